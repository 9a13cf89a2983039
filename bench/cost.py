"""What the cost estimate and the cost limit cost, against the fake endpoint.

    python bench/cost.py [--n 300] [--concurrency 10] [--latency 0.1] [--backends engine,embedded]
                         [--evals 3000] [--repeat 3] [--parts estimate,limit,stop]

- estimate: engine.cost.estimate of the --evals-eval bench suite (bench/throughput.py's 3-turn trees), beside
  the time PyYAML's C loader alone takes to read the same text: the estimate must not be a fixed cost.
- limit: bench/throughput.py's run (N trees x 3 turns, wall / ideal and worker CPU a call) without a cost
  limit and with one the run never reaches (`max_cost: 1000000`), so every ended conversation's check runs:
  a run with a limit pays for the checks, one without pays nothing.
- stop: `evalsite run`'s runner in this process, --n one-call evals at $1 a call with `max_cost` at a third of
  them: how many conversations it played and what it spent against the limit (the conversations playing
  when the limit is reached finish, so it may pass the limit by up to concurrency - 1 calls).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

# bench/throughput.py also puts the project on sys.path, for the engine imports below.
from throughput import TURNS, Workload, child, common_arguments, run_backends, suite_yaml, table_header

NEVER_REACHED = "max_cost: 1000000"


def limit_workload(args) -> Workload:
    extra = (NEVER_REACHED,) if args.limited else ()
    return Workload(
        source=suite_yaml(args.n, extra),
        ideal=math.ceil(args.n / args.concurrency) * TURNS * args.latency,
        scripts={f"conversation {i}": ["not yet", "still not", "done"] for i in range(args.n)},
    )


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def estimate_part(args) -> None:
    import yaml

    from engine.clients import DEFAULT, EndpointConfig
    from engine.cost import estimate
    from engine.loader import load_suite

    source = suite_yaml(args.evals)
    suite = load_suite(source)
    config = EndpointConfig(name=DEFAULT, base_url="http://x.invalid/v1", price_input=0.15, price_output=0.6)
    seconds = best_of(lambda: estimate(suite, lambda ref: (DEFAULT, config)), args.repeat)
    yaml_seconds = best_of(lambda: yaml.load(source, Loader=yaml.CSafeLoader), args.repeat)
    print(f"estimate of {args.evals} evals: {seconds * 1000:.1f} ms (median of {args.repeat}); "
          f"PyYAML's C loader alone reads the file in {yaml_seconds * 1000:.1f} ms: "
          f"ratio {seconds / yaml_seconds:.3f}")  # fmt: skip
    print(f"  {estimate(suite, lambda ref: (DEFAULT, config)).text()}")


def limit_part(args) -> None:
    print(f"\n{args.n} conversations x {TURNS} turns, run concurrency {args.concurrency}, fake latency "
          f"{args.latency * 1000:.0f} ms, {args.worker_procs} worker process(es) x {args.worker_threads} slots")  # fmt: skip
    for limited in (False, True):
        print(f"\n{'with a limit never reached (' + NEVER_REACHED + ')' if limited else 'without a limit'}")
        table_header()
        argv = [__file__, *sys.argv[1:], "--parts", "limit"] + (["--limited"] if limited else [])
        run_backends(args, argv)


def stop_part(args) -> None:
    import os

    from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
    from engine.loader import load_suite
    from engine.runner import run_suite
    from tests.fakeopenai import FakeOpenAI

    limit = args.n // 3
    source = f"name: stop\nmodel: bench-model\nmax_cost: {limit}\nevals:\n" + "".join(
        f"  - input: question {i}\n    checks: [{{contains: OK}}]\n" for i in range(args.n)
    )
    suite = load_suite(source)
    os.environ["BENCH_FAKE_KEY"] = "sk-bench"
    with FakeOpenAI(latency=args.latency, api_key="sk-bench") as fake:
        registry = EndpointRegistry(
            default=EndpointConfig(
                name=DEFAULT, base_url=fake.base_url, api_key_env="BENCH_FAKE_KEY",
                max_concurrency=1000, price_output=1_000_000,
            )
        )  # fmt: skip
        started = time.monotonic()
        report = run_suite(suite, registry, concurrency=args.concurrency)
        wall = time.monotonic() - started
        calls = len(fake.chat_requests())
    played = report.totals.evals - report.totals.cancelled
    ideal = math.ceil(limit / args.concurrency) * args.latency
    print(f"\nstop: {args.n} one-call evals at $1 a call, max_cost {limit}, concurrency {args.concurrency}: "
          f"{played} played ({calls} calls), spent ${report.totals.cost:.0f} = {report.totals.cost / limit:.3f} x "
          f"the limit; {report.stop_reason}; wall {wall:.2f} s, ideal {ideal:.2f} s, ratio {wall / ideal:.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--evals", type=int, default=3000, help="estimate: the suite's evals")
    parser.add_argument("--parts", default="estimate,limit,stop")
    parser.add_argument("--limited", action="store_true", help=argparse.SUPPRESS)
    common_arguments(parser)
    parser.set_defaults(backends="engine,embedded")
    args = parser.parse_args()
    if args.child:
        child(args, limit_workload(args))
        return
    parts = args.parts.split(",")
    if "estimate" in parts:
        estimate_part(args)
    if "limit" in parts:
        limit_part(args)
    if "stop" in parts:
        stop_part(args)


if __name__ == "__main__":
    main()
