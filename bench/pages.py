"""Server time of the pages a reviewer reads, on a run of 1,000 conversations × 5 turns.

    python bench/pages.py [--conversations 1000] [--turns 5] [--repeat 15]

A fresh SQLite database in a temporary folder (or DATABASE_URL's, migrated). Two runs of one suite are
played in this process as a worker plays them (runs.worker.pump.execute, on the built-in mock model: every
turn goes through the real store path), the second with one answer in ten changed so that it regresses.
Then each page is requested through Django's test client, signed in, and the bench prints its median and
worst server time over --repeat requests and its query count. The budget is 150 ms (issue 15).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BUDGET_MS = 150


def suite_source(conversations: int, turns: int, broken: bool) -> str:
    lines = ["name: pages bench", "model: mock", "mock:", "  rules:"]
    lines += ['    - {when: "*broken*", reply: "' + ("wrong" if broken else "fine answer") + '"}']
    lines += ['    - {when: "*", reply: "fine answer"}', "evals:"]
    for i in range(conversations):
        word = "broken" if i % 10 == 0 else "question"
        inputs = ", ".join(f'"{word} {i} turn {t}"' for t in range(turns))
        truths = ", ".join('"fine answer"' for _ in range(turns))
        lines += [
            f"  - id: eval-{i}",
            f"    input: [{inputs}]",
            f"    ground_truth: [{truths}]",
            "    grader: contains",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1_000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DEV", "1")
    os.environ["EVALSITE_VAR_DIR"] = tempfile.mkdtemp(prefix="evalsite-pages-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from runs.services import create_run
    from runs.worker.pump import execute
    from suites.services import create_suite, save_version

    settings.ALLOWED_HOSTS = ["*"]
    settings.STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pw-123")
    from projects.models import Membership, Project  # the project its pages and runs are in

    Membership.objects.get_or_create(project=Project.default(), user=user, defaults={"role": "admin"})

    started = time.perf_counter()
    suite = create_suite(owner=user, source=suite_source(args.conversations, args.turns, broken=False))
    before = create_run(version=suite.latest_version, user=user, concurrency=1)
    save_version(suite=suite, source=suite_source(args.conversations, args.turns, broken=True), user=user)
    after = create_run(version=suite.latest_version, user=user, concurrency=1)
    for run in (before, after):
        for conversation_id in run.conversations.values_list("pk", flat=True):
            execute(conversation_id)
        run.refresh_from_db()
    print(
        f"built 2 runs × {args.conversations:,} conversations × {args.turns} turns in "
        f"{time.perf_counter() - started:.1f} s ({connection.vendor}); statuses {before.status}, {after.status}"
    )

    client = Client()
    client.force_login(user)
    pages = {
        "run page": reverse("runs:detail", args=[after.pk]),
        "run page, filtered": reverse("runs:detail", args=[after.pk]) + "?status=failed&q=broken&sort=score",
        "progress poll": reverse("runs:progress", args=[after.pk]),
        "transcript": reverse("runs:conversation", args=[after.pk, 500 % args.conversations]),
        "compare": reverse("runs:compare_with", args=[after.pk, before.pk]),
        "compare, regressions": reverse("runs:compare_with", args=[after.pk, before.pk])
        + "?change=regression",
        "compare, one eval": reverse("runs:compare_eval", args=[after.pk, before.pk, "eval-10"]),
        "runs list": reverse("runs:list"),
    }
    print(f"\n{'page':<24} {'median ms':>10} {'worst ms':>9} {'queries':>8}  within {BUDGET_MS} ms")
    for name, url in pages.items():
        client.get(url)  # warm: template compilation and the suite cache are paid once per process
        times = []
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code in (200, 286), (name, response.status_code)
        median = statistics.median(times)
        print(
            f"{name:<24} {median:>10.1f} {max(times):>9.1f} {len(queries):>8}  {'yes' if median <= BUDGET_MS else 'NO'}"
        )


if __name__ == "__main__":
    main()
