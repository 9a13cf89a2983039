"""Throughput of judged conversations: the same suite with a plain check and with an LLM judge, on the real paths.

    python bench/judges.py [--n 300] [--concurrency 10] [--latency 0.1]
                           [--backends http,cli,embedded,postgres] [--worker-procs 2] [--worker-threads 50]
                           [--scenarios plain,judged] [--explain] [--repeat 1]

Two workloads of N one-turn conversations, measured like bench/throughput.py (whose code this reuses: a fresh
database, real `celery worker` processes, the fake OpenAI server on 127.0.0.1 in a process of its own, one
run, wall time from launch to the run's end):

- plain: the reply is graded by `contains`: one model call a conversation, ideal = ceil(N / C) x latency.
- judged: the reply is graded by an `llm_judge` on the fake's judge model: two calls a conversation, one after
  the other, ideal = ceil(N / C) x 2 x latency. The judge runs in a grading thread beside the event loop (the
  checks are plain functions); its call is what this measures.

Backends as in bench/throughput.py: `http` (the bare HTTP client, one call a conversation: the CPU floor a
call), `cli` (`evalsite run`, with the whole process's wall time), `embedded` (workers on SQLite + the
filesystem broker) and `postgres` (workers on PostgreSQL + Redis: BENCH_PG_URL, default the `evalsite_bench`
database, and BENCH_REDIS_URL, default Redis database 10).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

# Before throughput reads it: this benchmark's Redis database, apart from the other benchmarks' and tests'.
os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379/10")

# bench/throughput.py puts the project on sys.path.
from throughput import Workload, child, common_arguments, run_backends, table_header  # noqa: E402

SCENARIOS = ("plain", "judged")
VERDICT = '{"score": 0.9, "reason": "polite and to the point"}'


def suite_yaml(n: int, judged: bool) -> str:
    check = "{llm_judge: {criteria: Is the reply polite?, threshold: 0.5}}" if judged else "{contains: ''}"
    lines = ["name: judged", "model: fake/bench-model", "judge: fake/judge-model", "evals:"]
    lines += [f"  - {{id: q{i}, prompt: 'question {i}', checks: [{check}]}}" for i in range(n)]
    return "\n".join(lines) + "\n"


def workload(args, judged: bool) -> Workload:
    return Workload(
        source=suite_yaml(args.n, judged),
        ideal=math.ceil(args.n / args.concurrency) * (2 if judged else 1) * args.latency,
        rules=[("polite", VERDICT)],  # the judge's request names its criteria; the model's never does
        rules_where="any",
        calls=2 if judged else 1,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300, help="conversations")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--scenario", choices=SCENARIOS, help=argparse.SUPPRESS)
    common_arguments(parser)
    parser.set_defaults(backends="http,cli,embedded,postgres")
    args = parser.parse_args()
    if args.child:
        child(args, workload(args, judged=args.scenario == "judged"))
        return

    waves = math.ceil(args.n / args.concurrency)
    print(
        f"{args.n} one-turn conversations, run concurrency {args.concurrency} ({waves} waves), fake latency "
        f"{args.latency * 1000:.0f} ms, {args.worker_procs} worker process(es) x {args.worker_threads} slots; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    for name in args.scenarios.split(","):
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {name!r}")
        calls = "2 calls (reply, then judge)" if name == "judged" else "1 call"
        print(f"\n{name}: ideal = {waves} waves x {calls} x {args.latency * 1000:.0f} ms")
        table_header()
        run_backends(args, [__file__, *sys.argv[1:], "--scenario", name])


if __name__ == "__main__":
    main()
