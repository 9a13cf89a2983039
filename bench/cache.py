"""The response cache: a suite launched, then launched again unchanged with the cache on.

    python bench/cache.py [--n 300] [--concurrency 10] [--latency 0.1] [--backends cli,embedded,postgres]
                          [--repeat 3] [--no-cache]

N conversation trees of 3 turns (bench/throughput.py's workload, with `cache: true`) against the fake
endpoint, measured as bench/throughput.py measures (a fresh database and real workers per backend, the fake
in its own process). For the CLI (`evalsite run`, a local store in a fresh XDG_CACHE_HOME) and for the
workers (the server's store: the database, or Redis when EVALSITE_CACHE_URL is set) it prints, for the
second launch: the model calls the fake answered (0 when every call came from the cache) and its time as a
fraction of the first launch's (the workers are warmed by a run of other conversations before either). --no-cache launches both times with the cache off: what a re-launch cost
before there was a cache. --repeat K reports the median fraction of K measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/throughput.py also puts the project on sys.path.
from throughput import (
    PG_URL,
    REDIS_URL,
    TURNS,
    Workload,
    fake_in_a_process,
    measure_in_child,
    quiet_collector,
    reachable,
    suite_yaml,
)

ROOT = Path(__file__).resolve().parent.parent


def workload(args) -> Workload:
    import math

    extra = ("cache: false",) if args.no_cache else ("cache: true",)
    return Workload(
        source=suite_yaml(args.n, extra),
        ideal=math.ceil(args.n / args.concurrency) * TURNS * args.latency,
        scripts={f"conversation {i}": ["not yet", "still not", "done"] for i in range(args.n)},
    )


def cli_twice(args, work: Workload) -> dict:
    """`evalsite run` twice on the same suite and store: each launch's whole-process and run times, and the
    calls the fake answered during each."""
    folder = Path(tempfile.mkdtemp(prefix="evalsite-bench-cache-"))
    try:
        with fake_in_a_process(args, work) as (base_url, answered):
            suite = folder / "suite.yaml"
            suite.write_text(work.source)
            env = {
                **os.environ,
                "OPENAI_BASE_URL": base_url,
                "OPENAI_API_KEY": "sk-bench",
                "EVALSITE_DEFAULT_CONCURRENCY": str(args.concurrency),
                "EVALSITE_VAR_DIR": str(folder),
                "XDG_CACHE_HOME": str(folder / "xdg"),
                "DATABASE_URL": f"sqlite:///{folder / 'none.sqlite3'}",  # not created: the CLI needs none
            }
            evalsite = str(Path(sys.executable).with_name("evalsite"))
            launches = []
            for n in range(2):
                out = folder / f"out{n}.json"
                command = [evalsite, "run", str(suite), "--model", "bench-model", "--concurrency",
                           str(args.concurrency), "--json", str(out)]  # fmt: skip
                before = answered()
                started = time.monotonic()
                process = subprocess.run(command, env=env, capture_output=True, text=True, cwd=folder)
                whole = time.monotonic() - started
                if process.returncode not in (0, 1):
                    raise SystemExit(f"evalsite run failed ({process.returncode}):\n{process.stderr[-2000:]}")
                report = json.loads(out.read_text())
                launches.append(
                    {
                        "status": report["status"],
                        "calls": answered() - before,
                        "run": report["totals"]["duration_s"],
                        "whole": whole,
                        "cached_calls": report["totals"].get("cached_calls", 0),
                    }
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"launches": launches}


def workers_twice(args, work: Workload) -> dict:
    """Two launches of the suite on real workers sharing one store: each launch's time from launch to end,
    and the calls the fake answered during each."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from endpoints.models import Endpoint
    from projects.models import Membership, Project
    from runs.models import Run
    from runs.services import create_run
    from runs.worker.tasks import run_conversation
    from suites.services import create_suite

    call_command("migrate", verbosity=0)
    with fake_in_a_process(args, work) as (base_url, answered):
        Endpoint.objects.create(
            name="fake", base_url=base_url, api_key_env="BENCH_FAKE_KEY", max_concurrency=1000
        )
        user = get_user_model().objects.create_user("bench", password="bench-password")
        Membership.objects.get_or_create(project=Project.default(), user=user, defaults={"role": "admin"})
        suite = create_suite(owner=user, source=work.source)
        command = [sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--pool", "threads",
                   "--concurrency", str(args.worker_threads), "--loglevel", "WARNING", "--without-gossip",
                   "--without-mingle"]  # fmt: skip
        var_dir = Path(os.environ["EVALSITE_VAR_DIR"])
        launches = []
        with open(var_dir / "worker.log", "wb") as log:
            workers = [
                subprocess.Popen([*command, "--hostname", f"cache{i}@%h"], cwd=ROOT, stdout=log, stderr=log)
                for i in range(args.worker_procs)
            ]
            try:
                run_conversation.delay(0)  # connects workers and broker before the clock starts
                time.sleep(4)
                # A first run on fresh workers is slower than the next (their first tasks, connections and
                # caches): a run of other conversations warms them first, so the two launches compare alike.
                warm_source = suite_yaml(2 * args.concurrency).replace("conversation ", "warm-up ")
                warm = create_suite(
                    owner=user, source=warm_source.replace("name: throughput", "name: warm-up")
                )
                warm_run = create_run(version=warm.latest_version, user=user, concurrency=args.concurrency)
                while Run.objects.filter(pk=warm_run.pk, status__in=("queued", "running")).exists():
                    time.sleep(0.05)
                quiet_collector()
                for _ in range(2):
                    before = answered()
                    started = time.monotonic()
                    run = create_run(version=suite.latest_version, user=user, concurrency=args.concurrency)
                    while Run.objects.filter(pk=run.pk, status__in=("queued", "running")).exists():
                        time.sleep(0.01)
                    wall = time.monotonic() - started
                    run.refresh_from_db()
                    cached = sum(run.conversations.values_list("cached_calls", flat=True))
                    launches.append(
                        {"status": run.status, "calls": answered() - before, "run": wall, "whole": wall,
                         "cached_calls": cached}
                    )  # fmt: skip
            finally:
                for worker in workers:
                    worker.kill()
    return {"launches": launches}


BACKENDS = {"cli": "evalsite run (CLI)", "embedded": "workers, SQLite", "postgres": "workers, PG + Redis"}


def print_row(label: str, result: dict) -> float:
    first, second = result["launches"]
    fraction = second["run"] / first["run"]
    whole = f", whole process {second['whole']:.2f} s / {first['whole']:.2f} s = {second['whole'] / first['whole']:.3f}"
    print(
        f"{label:<22}first {first['calls']:>5} calls {first['run']:>6.2f} s | second {second['calls']:>5} calls "
        f"({second['cached_calls']} from the cache) {second['run']:>6.2f} s | second/first {fraction:.3f}"
        + (whole if label == BACKENDS["cli"] else "")
    )
    return fraction


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--worker-procs", type=int, default=2)
    parser.add_argument("--worker-threads", type=int, default=10)
    parser.add_argument("--backends", default="cli,embedded,postgres")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-cache", action="store_true", help="both launches with the cache off")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = workload(args)
    if args.child:
        measure = cli_twice if os.environ.get("BENCH_BACKEND") == "cli" else workers_twice
        print(json.dumps(measure(args, work)))
        return
    print(
        f"{args.n} conversations x {TURNS} turns, C={args.concurrency}, fake latency {args.latency * 1000:.0f} ms, "
        f"cache {'off' if args.no_cache else 'on'}; launched twice, unchanged"
    )
    for backend in args.backends.split(","):
        label = BACKENDS[backend]
        if backend == "postgres" and not (reachable(PG_URL) and reachable(REDIS_URL)):
            print(f"{label:<22}skipped: {PG_URL} or {REDIS_URL} not reachable")
            continue
        fractions = []
        for _ in range(args.repeat):
            result = measure_in_child(backend, [str(Path(__file__).resolve()), *sys.argv[1:]])
            if result is None:
                print(f"{label:<22}failed:\n{measure_in_child.error}")
                break
            fractions.append(print_row(label, result))
        if len(fractions) > 1:
            print(f"{'':<22}median second/first of {len(fractions)}: {statistics.median(fractions):.3f}")


if __name__ == "__main__":
    main()
