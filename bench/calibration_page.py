"""Server time of a calibration run's figures page on its first view in a fresh web process.

    python bench/calibration_page.py [--processes 5]

A fresh SQLite database in a temporary folder. The example calibration set (examples/calibration-politeness.yaml,
on the built-in mock model) is played in this process as a worker plays it. Then each of --processes fresh
Python processes sets Django up, opens the runs list and the run's page (as a reviewer does first), and times
its first request of the figures page: wall and CPU time. The budget is 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BUDGET_MS = 300

CHILD = """
import json, os, sys, time
sys.path.insert(0, {root!r})
import django
django.setup()
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
settings.ALLOWED_HOSTS = ["*"]
settings.STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"
client = Client()
client.force_login(get_user_model().objects.get(username="bench"))
for url in (reverse("runs:list"), reverse("runs:detail", args=[{run!r}])):
    assert client.get(url).status_code == 200, url
wall, cpu = time.perf_counter(), time.process_time()
response = client.get(reverse("runs:calibration", args=[{run!r}]))
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
assert response.status_code == 200 and b"agree" in response.content.lower(), response.status_code
print(json.dumps({{"wall_ms": wall * 1000, "cpu_ms": cpu * 1000}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=5)
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DEV", "1")
    os.environ["EVALSITE_VAR_DIR"] = tempfile.mkdtemp(prefix="evalsite-calibration-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from projects.models import Membership, Project
    from runs.services import create_run
    from runs.worker.pump import execute
    from suites.services import create_suite

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pw-123")
    Membership.objects.create(project=Project.default(), user=user, role="admin")
    source = (ROOT / "examples" / "calibration-politeness.yaml").read_text()
    suite = create_suite(owner=user, source=re.sub(r"latency_ms: \d+", "latency_ms: 0", source))
    run = create_run(version=suite.latest_version, user=user)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    run.refresh_from_db()
    print(f"calibration run of {run.conversations.count()} conversations: {run.status}")

    child = CHILD.format(root=str(ROOT), run=str(run.pk))
    walls, cpus = [], []
    for _ in range(args.processes):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        walls.append(figures["wall_ms"])
        cpus.append(figures["cpu_ms"])
        print(
            f"  process {len(walls)}: first view {figures['wall_ms']:.0f} ms wall, {figures['cpu_ms']:.0f} ms CPU"
            f" (process {time.perf_counter() - started:.1f} s in all)"
        )
    median = statistics.median(walls)
    print(
        f"first view of the figures page: median {median:.0f} ms wall (worst {max(walls):.0f}), "
        f"median {statistics.median(cpus):.0f} ms CPU; within {BUDGET_MS} ms: {'yes' if median <= BUDGET_MS else 'NO'}"
    )


if __name__ == "__main__":
    main()
