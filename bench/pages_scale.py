"""The pages of a run of 100,000 conversations × 3 turns: server time, queries, and the exports' memory.

    python bench/pages_scale.py [--conversations 100000] [--turns 3] [--shape dataset|iterations]
                                [--repeat 7] [--db PATH]

One suite, launched as the launch form launches it (runs.services.create_run, its conversations streamed
into the database), then every conversation played through the worker's own writes without a model: its
claim (runs.worker.claims.claim, a thousand at a time), each turn (runs.worker.writes.store_turn: the Turn row
and the conversation's counters) and its end (runs.worker.writes.finish), so the database holds what workers write. One eval in ten
fails. `--shape dataset`: a dataset of N rows, each eval once; `iterations`: 100 evals × N/100 iterations
(the run page then summarises every iteration). `--db PATH` keeps the SQLite database to measure again
without building (or DATABASE_URL's, migrated, for PostgreSQL).

Then each page is requested through Django's test client, signed in, and the bench prints its median and
worst server time over --repeat requests, its query count and its size; the progress poll of a live run
with one changed row (with the repeated evals' section, which a live run's poll sends every 5 s, apart); and
results.json and the evals CSV consumed as they stream: their time, size and
Python's peak memory (tracemalloc). The budget is 200 ms a page (issue 16).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BUDGET_MS = 200
PASSWORD = "bench-pw-123"


def suite_source(shape: str, conversations: int, turns: int) -> tuple[str, dict[str, str]]:
    if shape == "dataset":
        rows = "".join(
            '{"input": [' + ", ".join(f'"question {i} turn {t}"' for t in range(turns)) + "], "
            '"ground_truth": [' + ", ".join('"fine answer"' for _ in range(turns)) + "]}\n"
            for i in range(conversations)
        )
        return "name: scale bench\nmodel: mock\ngrader: contains\ndataset: rows.jsonl\n", {"rows.jsonl": rows}
    evals = 100
    lines = ["name: scale bench", "model: mock", f"iterations: {conversations // evals}", "evals:"]
    for i in range(evals):
        inputs = ", ".join(f'"question {i} turn {t}"' for t in range(turns))
        truths = ", ".join('"fine answer"' for _ in range(turns))
        lines += [f"  - id: eval-{i}", f"    input: [{inputs}]", f"    ground_truth: [{truths}]",
                  "    grader: contains"]  # fmt: skip
    return "\n".join(lines) + "\n", {}


def build(args, user):
    """Launch the run and play it through the worker's writes; returns it."""
    from django.db import transaction

    from engine.results import EvalResult, Totals, TurnGrade, TurnRecord, Usage
    from runs.services import create_run
    from runs.worker import scheduling, writes
    from runs.worker.claims import claim
    from suites.services import create_suite

    source, files = suite_source(args.shape, args.conversations, args.turns)
    suite = create_suite(owner=user, source=source, files=files)
    run = create_run(version=suite.latest_version, user=user, concurrency=100)
    rows = list(run.conversations.values_list("pk", "index", "iteration", "eval_id", "prompt"))
    started = time.perf_counter()
    for n in range(0, len(rows), 1000):
        with transaction.atomic():  # a thousand conversations a commit: the build, not what is measured
            claims = {c.conversation_id: c for c in claim([row[0] for row in rows[n : n + 1000]])}
            for pk, index, iteration, eval_id, prompt in rows[n : n + 1000]:
                claimed = claims[pk]
                broken = (index + iteration) % 10 == 0
                records = []
                for t in range(args.turns):
                    reply = "wrong" if broken and t == args.turns - 1 else "fine answer"
                    passed = reply == "fine answer"
                    grade = TurnGrade(turn=t + 1, score=float(passed), passed=passed, submission=reply,
                                      ground_truth="fine answer", grader="contains",
                                      rationale="contains 'fine answer'" if passed else "substring not found")  # fmt: skip
                    record = TurnRecord(turn=t + 1, prompt=f"{prompt} turn {t}", response=reply,
                                        usage=Usage(prompt_tokens=20 + 10 * t, completion_tokens=3),
                                        latency_ms=100, grade=grade, passed=passed)  # fmt: skip
                    writes.store_turn(pk, claimed.attempt, record)
                    records.append(record)
                ok = all(record.passed for record in records)
                writes.finish(pk, claimed.attempt, EvalResult(
                    index=index, id=eval_id, kind="multi-turn", conversation="scripted", prompt=prompt,
                    status="passed" if ok else "failed", score=sum(r.grade.score for r in records) / len(records),
                    verdict=f"{'passed' if ok else 'failed'}: {sum(r.passed for r in records)}/{len(records)} passed",
                    turns=records, turns_passed=sum(r.passed for r in records), turns_total=len(records),
                    totals=Totals.of(records),
                ))  # fmt: skip
        if n and n % 20_000 == 0:
            print(f"  played {n:,} conversations in {time.perf_counter() - started:.0f} s", flush=True)
    scheduling.finalize(run.pk)  # as the worker that ends the last conversation: its status and summary
    run.refresh_from_db()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--shape", choices=("dataset", "iterations"), default="dataset")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--db", help="a SQLite file to keep (built once, measured again without building)")
    parser.add_argument("--no-exports", action="store_true", help="pages only")
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DEV", "1")
    os.environ["EVALSITE_VAR_DIR"] = tempfile.mkdtemp(prefix="evalsite-scale-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    os.environ.setdefault("EVALSITE_MAX_CONVERSATIONS_PER_RUN", str(max(args.conversations, 100_000)))
    if args.db:
        os.environ["DATABASE_URL"] = f"sqlite:///{Path(args.db).resolve()}"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.cache import caches
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse
    from django.utils import timezone

    from runs.models import Conversation, Run

    settings.ALLOWED_HOSTS = ["*"]
    settings.STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"
    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    user = users.filter(username="bench").first() or users.create_user("bench", password=PASSWORD)
    from projects.models import Membership, Project  # the project its pages and runs are in

    Membership.objects.get_or_create(project=Project.default(), user=user, defaults={"role": "admin"})
    run = Run.objects.filter(created_by=user).order_by("-created_at").first()
    if run is None or run.conversations.count() != args.conversations:
        started = time.perf_counter()
        run = build(args, user)
        print(f"built {args.conversations:,} conversations × {args.turns} turns ({args.shape}) in "
              f"{time.perf_counter() - started:.0f} s ({connection.vendor})", flush=True)  # fmt: skip
    else:
        print(f"reusing the run of {args.conversations:,} conversations in {args.db} ({connection.vendor})")
        if not run.summary:  # built before runs kept one: as finalize would have kept it
            from runs.worker.scheduling import summary_to_store

            Run.objects.filter(pk=run.pk).update(summary=summary_to_store(run, run.status))
            run.refresh_from_db()

    client = Client()
    client.force_login(user)
    detail = reverse("runs:detail", args=[run.pk])
    pages = {
        "run page": detail,
        "run page, page 500": detail + "?page=500",
        "filtered: failed, by score": detail + "?status=failed&sort=score",
        "search: 'question 77777'": detail + "?q=question+77777",
        "transcript": (
            reverse("runs:conversation", args=[run.pk, args.conversations // 2])
            if args.shape == "dataset"
            else reverse("runs:conversation", args=[run.pk, 50]) + f"?iteration={args.conversations // 200}"
        ),
        "runs list": reverse("runs:list"),
        **(
            {"repeated evals, page 3": detail + "?ipage=3", "flaky only": detail + "?flaky=1"}
            if args.shape == "iterations"
            else {}
        ),
    }
    print(f"\n{'page':<28} {'median ms':>10} {'worst ms':>9} {'queries':>8} {'KB':>7}  within {BUDGET_MS} ms")

    def measure(name: str, url: str, cold: bool = False, **headers) -> None:
        client.get(url, **headers)  # warm: templates and the suite cache are paid once per process
        times, size = [], 0
        for _ in range(args.repeat):
            if cold:  # nothing kept from the last request: a finished run's aggregates, its rendered rows
                caches["aggregates"].clear()
                caches["rows"].clear()
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                response = client.get(url, **headers)
                times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code in (200, 286), (name, response.status_code)
            size = len(response.content)
        median = statistics.median(times)
        print(f"{name:<28} {median:>10.1f} {max(times):>9.1f} {len(queries):>8} {size / 1024:>7.1f}  "
              f"{'yes' if median <= BUDGET_MS else 'NO'}", flush=True)  # fmt: skip

    measure("run page, nothing kept", detail, cold=True)
    for name, url in pages.items():
        measure(name, url)

    # The progress poll of a live run: one conversation's row changed since the page's last poll.
    # The page last polled a minute from now (after every stored timestamp, margin included), and one row
    # moved after that.
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    since = int((timezone.now().timestamp() + 60) * 1000)
    moved = run.conversations.order_by("index", "iteration").values_list("pk", flat=True)[3]
    Conversation.objects.filter(pk=moved).update(finished_at=timezone.now() + timezone.timedelta(minutes=2))
    poll = reverse("runs:progress", args=[run.pk]) + f"?since={since}"
    # Most polls of a live run: counts and the changed row (the repeated evals and gates were sent < 5 s ago).
    measure("progress poll (1 row moved)", poll + f"&whole={since}", HTTP_HX_REQUEST="true")
    if args.shape == "iterations":  # every 5 s: the repeated evals' statistics and strips as well
        measure("  ... with repeated evals", poll, HTTP_HX_REQUEST="true")
        # As if every eval on the section's page had an iteration finish since the last refresh.
        measure("  ... every one changed", poll, cold=True, HTTP_HX_REQUEST="true")
    Run.objects.filter(pk=run.pk).update(status=run.status, finished_at=run.finished_at)

    if args.no_exports:
        return
    print(f"\n{'export':<28} {'seconds':>10} {'MB':>9} {'peak MB':>8}")
    for name, url in {"results.json": reverse("runs:json", args=[run.pk]),
                      "evals CSV": reverse("runs:export", args=[run.pk, "csv"])}.items():  # fmt: skip
        tracemalloc.start()
        t0 = time.perf_counter()
        response = client.get(url)
        size = sum(len(chunk) for chunk in response.streaming_content)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{name:<28} {elapsed:>10.1f} {size / 2**20:>9.1f} {peak / 2**20:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
