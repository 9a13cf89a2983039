"""Throughput of agent conversations: the same suite with and without tools, on the real paths.

    python bench/tools.py [--n 100] [--concurrency 10] [--rounds 3] [--latency 0.1]
                          [--backends engine,cli,embedded,postgres] [--worker-procs 2] [--worker-threads 10]
                          [--scenarios plain,tools] [--explain] [--repeat 1]

Two workloads of N conversations x 3 scripted turns (`turns:`, every turn graded by a check), measured like
bench/throughput.py (whose code this reuses: a fresh database, real `celery worker` processes, the fake OpenAI
server on 127.0.0.1 in a process of its own, one run, wall time from launch to the run's end):

- plain: no tools; the fake answers each turn at once, so ideal = ceil(N / C) x 3 x latency.
- tools: the suite offers `get_weather` (a stub: `responses` rules on the arguments, then `returns`); the fake
  calls it --rounds times in every turn (`fake.tool_rounds`) before it answers in text quoting the results, so
  every turn is rounds + 1 model calls and ideal = ceil(N / C) x 3 x (rounds + 1) x latency. Each call is
  checked against the tool's schema and answered by the stub, with no I/O: what the tools add is the engine's
  own work per round.

Backends: `engine` (the engine alone in threads: the floor), `cli` (`evalsite run`, one process and event
loop, what a CI job runs), `embedded` (the workers on SQLite + the filesystem broker, as `make run`) and
`postgres` (the workers on PostgreSQL + Redis: BENCH_PG_URL, default the `evalsite_bench` database, and
BENCH_REDIS_URL, default Redis database 9). The target, with tools: wall / ideal <= 1.10.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

# Before throughput reads it: this benchmark's Redis database, apart from the other benchmarks' and tests'.
os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")

# bench/throughput.py puts the project on sys.path.
from throughput import Workload, child, common_arguments, run_backends, table_header  # noqa: E402

TARGET = 1.10
TURNS = 3
SCENARIOS = ("plain", "tools")
CITIES = ("Paris", "Rome", "Oslo")

TOOLS = """\
tools:
  - name: get_weather
    description: Current weather for a city
    parameters: {type: object, properties: {city: {type: string}, units: {enum: [C, F]}}, required: [city]}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21, sky: clear}
      - when: {city: {regex: "^R"}}
        returns: {temperature: 25, sky: sunny}
    returns: {temperature: 12, sky: cloudy}
"""


def suite_yaml(n: int, tools: bool) -> str:
    """N conversations of 3 turns, each turn graded; the same suite either way but for `tools:`. The fake
    calls the tool with the city its user message names last ("Weather in Paris?": Paris)."""
    lines = ["name: agents", "model: fake/bench-model"]
    if tools:
        lines += TOOLS.splitlines()
    lines.append("evals:")
    for i in range(n):
        lines += [f"  - id: agent-{i}", "    turns:"]
        for turn, city in enumerate(CITIES):
            ask = f"Conversation {i}: weather in {city}?" if turn == 0 else f"And in {city}?"
            lines += [f"      - input: '{ask}'", "        checks:", "          - not_match: '*Error*'"]
    return "\n".join(lines) + "\n"


def workload(args, tools: bool) -> Workload:
    calls_a_turn = args.rounds + 1 if tools else 1
    return Workload(
        source=suite_yaml(args.n, tools),
        ideal=math.ceil(args.n / args.concurrency) * TURNS * calls_a_turn * args.latency,
        tool_rounds=args.rounds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100, help="conversations")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="tool rounds in every turn")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--scenario", choices=SCENARIOS, help=argparse.SUPPRESS)
    common_arguments(parser)
    parser.set_defaults(backends="engine,cli,embedded,postgres")
    args = parser.parse_args()
    if args.child:
        child(args, workload(args, tools=args.scenario == "tools"))
        return

    waves = math.ceil(args.n / args.concurrency)
    print(
        f"{args.n} conversations x {TURNS} turns, run concurrency {args.concurrency} ({waves} waves), fake latency "
        f"{args.latency * 1000:.0f} ms, {args.worker_procs} worker process(es) x {args.worker_threads} threads; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    summary: dict[str, dict[str, dict]] = {}
    for name in args.scenarios.split(","):
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {name!r}")
        calls = f"{TURNS} x ({args.rounds} tool rounds + 1)" if name == "tools" else f"{TURNS} x 1"
        print(f"\n{name}: ideal = {waves} waves x {calls} calls x {args.latency * 1000:.0f} ms")
        table_header()
        for row in run_backends(args, [__file__, *sys.argv[1:], "--scenario", name]):
            summary.setdefault(row["backend"], {})[name] = row
    print(f"\nwall / ideal (target with tools <= {TARGET:.2f}); load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    for backend, rows in summary.items():
        ratios = {name: row["wall"] / row["ideal"] for name, row in rows.items()}
        parts = [f"{name} {ratio:.3f}" for name, ratio in ratios.items()]
        if "tools" in rows:
            met = ratios["tools"] <= TARGET and rows["tools"]["status"] == "passed"
            parts.append("meets the target" if met else "MISSES the target")
        print(f"  {backend:<10}" + ", ".join(parts))


if __name__ == "__main__":
    main()
