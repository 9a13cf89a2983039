"""Fault harness: a run against the fake endpoint while workers, the broker and the model server fail.

    python bench/faults.py [--quick] [--seed 1] [--backends embedded,postgres] [--scenarios kill,sigterm,...]
                           [--json faults.json] [--shared]

Each scenario launches one run of multi-turn conversation trees (each passes on a known turn, 1 to 5, so
every conversation's turns are known in advance) through the production path: a fresh database, two real
`celery worker` processes kept running by `manage.py evalserve`'s Supervisor (which starts a dead one again),
the fake OpenAI server on 127.0.0.1. At random moments of the run (seeded by --seed, placed by its progress)
it injects one kind of fault, one at a time (the next once the run has recovered from the last and both
workers are up):

- baseline: none, to compare with;
- kill:    `kill -9` of a worker holding conversations, N times;
- sigterm: SIGTERM (a warm shutdown, as a service manager stops a worker), N times;
- redis:   the Redis broker killed and started again, empty, seconds later (a redis-server of the harness's
           own, on its own port; PostgreSQL + Redis only);
- pgrestart: PostgreSQL stopped as a crash stops it (`pg_ctl stop -m immediate`) and started again seconds
           later (a server of the harness's own, initdb'd into its temporary folder, on its own port: never
           the machine's; PostgreSQL + Redis only, and the other scenarios played with it run on it too);
- outage:  the model server gone for seconds: connections refused, requests in flight dropped unanswered;
- storm:   for seconds, 30% of model calls answered 429 with Retry-After: 1 and 10% answered 500;
- redos:   some conversations' model starts answering a catastrophic reply (2,000 `a`s and `!`) to the
           suite's `regex: '(a+)+$'` check;
- garbage, html, empty: for seconds, every model call is answered 200 with something that is no chat
           completion: JSON cut short (`{"choices": [ not json`), a proxy's HTML page, empty `choices`.

Then it reads the database and the fake's request log and reports, per backend and scenario: conversations
finished exactly once (passed on their known turn, never finished again), duplicated, lost and misplaced
turns, stuck conversations (not finished 120 s after the last fault), errored ones, the longest time with no
turn stored, the time to recover from each fault (from the fault's end until every conversation that was in
flight when it began has stored a turn or finished), model calls answered more than once for the same turn,
and worker processes that died without being killed. Duplicated, lost, misplaced turns, stuck or errored
conversations, an unplanned worker death or a fault that could not be injected break an invariant: the
script then exits 1.

Settings are production's defaults (EVALSITE_WORKER_DEAD_SECONDS 5, EVALSITE_RETRY_SECONDS 300,
EVALSITE_REGEX_TIMEOUT_SECONDS 1, 60 s leases). PostgreSQL: FAULTS_PG_URL (default
postgres://postgres@127.0.0.1:5432/evalsite_faults, dropped and created again). --quick is the short version
`make test` runs (tests/e2e/test_faults.py): fewer conversations and faults, shorter windows, all scenarios in
one environment per backend (--shared). The code: bench/faults_play.py (the environment, the faults) and
bench/faults_measure.py (the workload, what happened to it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/ is on sys.path as the script's folder; bench/throughput.py puts the project there too.
from faults_play import FAKE_KEY, FAKE_KEY_ENV, FULL, QUICK, child
from throughput import ROOT, fresh_postgres_and_redis, reachable

from tests.live_services import PostgresServer

SCENARIOS = ("baseline", "kill", "sigterm", "redis", "pgrestart", "outage", "storm", "redos", "garbage", "html",
             "empty")  # fmt: skip
BACKENDS = {"embedded": "SQLite + filesystem", "postgres": "PostgreSQL + Redis"}
PG_URL = os.environ.get("FAULTS_PG_URL", "postgres://postgres@127.0.0.1:5432/evalsite_faults")
# Only when there is no redis-server binary to start one of the harness's own (no restart scenario then).
REDIS_URL = os.environ.get("FAULTS_REDIS_URL", "redis://127.0.0.1:6379/13")


def applicable(backend: str, scenario: str) -> bool:
    if scenario == "redis":
        return backend == "postgres" and shutil.which("redis-server") is not None
    if scenario == "pgrestart":
        return backend == "postgres" and PostgresServer.available()
    return True


def run_child(backend: str, scenarios: list[str], args) -> list[dict]:
    var_dir = Path(tempfile.mkdtemp(prefix=f"evalsite-faults-{backend}-"))
    result_path = var_dir / "result.json"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DEV": "1",
           "EVALSITE_VAR_DIR": str(var_dir), FAKE_KEY_ENV: FAKE_KEY, "LOG_LEVEL": "WARNING"}  # fmt: skip
    if backend == "embedded":
        env["DATABASE_URL"] = f"sqlite:///{var_dir / 'faults.sqlite3'}"
        env.pop("CELERY_BROKER_URL", None)
    else:
        own_redis = shutil.which("redis-server") is not None
        fresh_postgres_and_redis(PG_URL, None if own_redis else REDIS_URL)
        # Replaced by a server of the child's own when the restart is among its scenarios (faults_play).
        env["DATABASE_URL"] = PG_URL
        env["CELERY_BROKER_URL"] = REDIS_URL  # replaced by the harness's own redis-server when there is one
    command = [sys.executable, __file__, "--child", "--backend", backend, "--scenarios", ",".join(scenarios),
               "--seed", str(args.seed), "--result", str(result_path), *(["--quick"] if args.quick else [])]  # fmt: skip
    # A session of its own: whatever it leaves behind (workers, redis-server) is killed with its group.
    process = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True)
    try:
        code = process.wait(timeout=900)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        # A server of the child's own is a session of its own (pg_ctl's), out of the group's reach.
        postgres = PostgresServer(var_dir / "postgres")
        if postgres.running():
            with contextlib.suppress(RuntimeError):
                postgres.stop()
    results = json.loads(result_path.read_text()) if result_path.exists() else []
    if code != 0 or len(results) < len(scenarios):
        log = (var_dir / "workers.log").read_text(errors="replace")[-4000:]
        print(f"{BACKENDS[backend]}: the harness failed (exit {code}); kept {var_dir}\n{log}")
        done = {result["scenario"] for result in results}
        results += [{"backend": backend, "scenario": s, "broken": ["harness failed"]} for s in scenarios
                    if s not in done]  # fmt: skip
    else:
        shutil.rmtree(var_dir, ignore_errors=True)
    return results


HEADER = (f"{'backend':<20} {'scenario':<38} {'once':>8} {'dup':>4} {'lost':>4} {'stuck':>5} {'err':>4} "
          f"{'stall s':>7} {'repeat':>6}  recovery s (per fault)")  # fmt: skip


def row(result: dict) -> str:
    name = f"{BACKENDS[result['backend']]:<20} {result.get('label', result['scenario']):<38}"
    if "conversations" not in result:
        return f"{name} {'; '.join(result['broken'])}"
    recoveries = ", ".join(
        "-" if fault["recovery"] is None else f"{fault['recovery']:.1f}" for fault in result["faults"]
    )
    line = (f"{name} {result['finished_once']:>4}/{result['conversations']:<3} {result['duplicated']:>4} "
            f"{result['lost']:>4} {result['stuck']:>5} {result['errored']:>4} {result['longest_stall']:>7.1f} "
            f"{result['calls_repeated']:>6}  {recoveries or '-'}")  # fmt: skip
    return line + (f"   BROKEN: {'; '.join(result['broken'])}" if result["broken"] else "")


def evidence(result: dict) -> str:
    """What shows the fault did happen, per scenario."""
    calls = result["calls"]
    faults = result["faults"]
    scenario = result["scenario"]
    if scenario in ("kill", "sigterm"):
        held = "/".join(str(f["detail"]["held"]) for f in faults)
        text = (
            f"victims held {held} conversations; {result['workers_started']} started again by the supervisor"
        )
        if scenario == "sigterm":
            text += ", exited after " + "/".join(f"{f['detail']['exited_after']:.1f}" for f in faults) + " s"
        return text
    if scenario in ("redis", "pgrestart"):
        return f"workers alive after: {result['workers_alive']}/2, none restarted: {result['workers_started'] == 0}"
    if scenario == "outage":
        return f"{calls.get('None', 0)} requests dropped in flight, then connections refused"
    if scenario == "storm":
        return f"{calls.get('429', 0)} answered 429, {calls.get('500', 0)} answered 500"
    if scenario == "redos":
        return f"{result['regex_timeouts']} checks ended by the regex time limit"
    if scenario in ("garbage", "html", "empty"):
        return f"{calls.get('200 no reply', 0)} answered 200 with no chat completion"
    return f"the run took {result['wall']:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the short version (make test)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backends", default="embedded,postgres")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--shared", action="store_true",
                        help="one environment per backend for all scenarios (--quick always)")  # fmt: skip
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    profile = QUICK if args.quick else FULL
    scenarios = args.scenarios.split(",")
    for name in scenarios:
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {name!r}")
    print(f"{profile.conversations} conversation trees of 1-5 turns, run concurrency {profile.concurrency}, "
          f"fake latency {profile.latency * 1000:.0f} ms, 2 supervised worker processes x 10 threads, "
          f"seed {args.seed}")  # fmt: skip
    print(HEADER)
    results = []
    started = time.monotonic()
    for backend in args.backends.split(","):
        if backend not in BACKENDS:
            raise SystemExit(f"unknown backend {backend!r}")
        if backend == "postgres" and not reachable(PG_URL):
            print(f"{BACKENDS[backend]:<20} skipped: {PG_URL} not reachable")
            continue
        if backend == "postgres" and not shutil.which("redis-server") and not reachable(REDIS_URL):
            print(f"{BACKENDS[backend]:<20} skipped: no redis-server to start and {REDIS_URL} not reachable")
            continue
        mine = [s for s in scenarios if applicable(backend, s)]
        if "redis" in scenarios and "redis" not in mine:
            reason = "no Redis broker" if backend == "embedded" else "no redis-server binary to restart"
            print(f"{BACKENDS[backend]:<20} {'Redis restart':<38} not applicable: {reason}")
        if "pgrestart" in scenarios and "pgrestart" not in mine:
            reason = "no PostgreSQL" if backend == "embedded" else "no initdb to make a server of its own"
            print(f"{BACKENDS[backend]:<20} {'PostgreSQL restart':<38} not applicable: {reason}")
        groups = [mine] if args.shared or args.quick else [[s] for s in mine]
        for group in groups:
            for result in run_child(backend, group, args):
                print(row(result), flush=True)
                if "conversations" in result:
                    print(f"{'':<21}{evidence(result)}", flush=True)
                results.append(result)
    elapsed = time.monotonic() - started
    failures = [r for r in results if r["broken"]]
    print(f"\n{len(results)} scenario(s) in {elapsed:.0f} s; "
          + (f"{len(failures)} broke an invariant" if failures else "every invariant held"))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    sys.exit(1 if failures or not results else 0)


if __name__ == "__main__":
    main()
