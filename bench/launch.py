"""Launching a run at the conversation cap: how long it takes, and how much memory.

    python bench/launch.py [--conversations 100000] [--shape iterations|dataset] [--runs-list]

A fresh SQLite database in a temporary folder (or DATABASE_URL's, migrated), one user and one suite of N
conversations: 100 evals × N/100 iterations (`iterations`; more evals past 100,000), or a dataset of N rows (`dataset`). It then
launches the suite as the launch form does (`runs.services.create_run`, parsing the saved suite with a cold
cache, as the first launch in a web process does) and prints:

- seconds: wall time of the launch, without tracemalloc (which slows Python down);
- peak MB: the largest Python heap during a second launch, measured by tracemalloc;
- with --runs-list, the time and query count of the runs list once both runs exist.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC_BACKEND = "django.contrib.staticfiles.storage.StaticFilesStorage"
sys.path.insert(0, str(ROOT))


def suite_source(shape: str, conversations: int) -> tuple[str, dict[str, str]]:
    if shape == "dataset":
        rows = "".join(
            f'{{"input": "question {i}", "ground_truth": "answer {i}"}}\n' for i in range(conversations)
        )
        return "name: launch bench\nmodel: mock\ndataset: rows.jsonl\n", {"rows.jsonl": rows}
    evals = max(100, conversations // 1_000)  # iterations go up to 1,000
    lines = ["name: launch bench", "model: mock", f"iterations: {conversations // evals}", "evals:"]
    for i in range(evals):
        lines += [f"  - prompt: question {i}", "    checks:", f"      - match: '*answer {i}*'"]
    return "\n".join(lines) + "\n", {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--shape", choices=("iterations", "dataset"), default="iterations")
    parser.add_argument("--runs-list", action="store_true", help="also time the runs list afterwards")
    args = parser.parse_args()

    var_dir = tempfile.mkdtemp(prefix="evalsite-launch-")
    os.environ.setdefault("EVALSITE_DEV", "1")
    os.environ["EVALSITE_VAR_DIR"] = var_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    os.environ.setdefault("EVALSITE_MAX_CONVERSATIONS_PER_RUN", str(max(args.conversations, 100_000)))
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from runs import specs
    from runs.models import Run
    from runs.services import create_run
    from suites.models import Suite
    from suites.services import create_suite

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(
        username=f"launch-bench-{os.getpid()}", password="bench-pw-123"
    )
    from projects.models import Membership, Project  # the project its pages and runs are in

    Membership.objects.get_or_create(project=Project.default(), user=user, defaults={"role": "admin"})
    source, files = suite_source(args.shape, args.conversations)
    started = time.perf_counter()
    suite = create_suite(owner=user, source=source, files=files)
    saved = time.perf_counter() - started
    version = suite.latest_version

    specs._suites.clear()
    started = time.perf_counter()
    run = create_run(version=version, user=user)
    seconds = time.perf_counter() - started
    stored = run.conversations.count()

    specs._suites.clear()
    tracemalloc.start()
    create_run(version=version, user=user)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"{connection.vendor}, {args.shape}: {stored:,} conversations stored")
    print(f"save (validate + store the suite): {saved:.2f} s")
    print(f"launch: {seconds:.2f} s, peak {peak / 1e6:.1f} MB (tracemalloc)")
    if args.runs_list:
        from django.db import reset_queries
        from django.test import Client, override_settings
        from django.test.utils import CaptureQueriesContext, setup_test_environment
        from django.urls import reverse

        setup_test_environment()
        client = Client()
        client.force_login(user)
        reset_queries()
        plain_static = {
            **settings.STORAGES,
            "staticfiles": {"BACKEND": STATIC_BACKEND},
        }  # no collectstatic here
        with override_settings(STORAGES=plain_static), CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(reverse("runs:list"))
            elapsed = time.perf_counter() - started
        print(f"runs list: HTTP {response.status_code} in {elapsed:.2f} s, {len(queries)} queries")
    # DATABASE_URL's database is left as it was.
    Run.objects.filter(created_by=user).delete()
    Suite.objects.filter(owner=user).delete()
    user.delete()


if __name__ == "__main__":
    main()
