"""Throughput of simulated conversations, iterated evals and calibrations on the real worker path.

    python bench/conversations.py [--scenarios simulated,iterations,calibration] [--concurrency 20]
                                  [--latency 0.1] [--conversations 100] [--turns 6] [--evals 50]
                                  [--iterations 10] [--samples 1000] [--repeats 3]
                                  [--backends engine,embedded,postgres] [--worker-procs 2] [--worker-threads 50]
                                  [--explain]

Three workloads, each measured like bench/throughput.py (whose code this reuses: a fresh database, real
`celery worker` processes, the fake OpenAI server on 127.0.0.1, one run, wall time from launch to the run's
end, plus the engine alone in threads as the floor):

- simulated: --conversations evals, each a `prompt` + `simulate` conversation with a simulated user
  (persona, model fake/sim-model) that stops after exactly --turns agent turns. Every conversation makes
  T agent calls and T - 1 simulated-user calls, one after the other, so
  ideal = ceil(N / C) x (T + T - 1) x latency: the simulated user's calls are on the critical path too.
- iterations: --evals evals x `iterations: --iterations`, each conversation a 3-turn tree (fail, fail,
  pass) as in throughput.py; ideal = ceil(evals x iterations / C) x 3 x latency.
- calibration: a calibration set of --samples samples asked --repeats times of one judge
  (docs/calibration.md): one judge call per judgement and no agent call, so
  ideal = ceil(samples x repeats / C) x latency.

The fake answers the agent with scripts (keyed by the eval's prompt) and the simulated user with a rule on
its last message, "Write your next message to the agent.". The target is wall / ideal <= 1.10.
"""

from __future__ import annotations

import argparse
import math
import sys

# bench/throughput.py also puts the project on sys.path, for the engine import below.
from throughput import TURNS, Workload, child, common_arguments, run_backends, suite_yaml, table_header

from engine.simulate import SIMULATOR_ASK

TARGET = 1.10
SCENARIOS = ("simulated", "iterations", "calibration")


def simulated_yaml(n: int, turns: int) -> str:
    lines = ["name: simulated conversations", "model: fake/bench-model", "judge: fake/judge-model", "evals:"]
    for i in range(n):
        lines += [
            f"  - prompt: conversation {i}",
            "    simulate:",
            "      persona: A customer planning a trip who always has one more question.",
            "      model: fake/sim-model",
            f"      max_turns: {turns}",
            "      stop_when:",
            f"        after_turns: {turns}",
            "    checks:",
            "      - match: '*done*'",
        ]
    return "\n".join(lines) + "\n"


def simulated(args) -> Workload:
    agent_replies = [f"answer {turn}" for turn in range(1, args.turns)] + ["done"]
    return Workload(
        source=simulated_yaml(args.conversations, args.turns),
        ideal=math.ceil(args.conversations / args.concurrency) * (2 * args.turns - 1) * args.latency,
        scripts={f"conversation {i}": agent_replies for i in range(args.conversations)},
        rules=[(SIMULATOR_ASK, "And what about the next step?")],
    )


def iterations(args) -> Workload:
    conversations = args.evals * args.iterations
    return Workload(
        source=suite_yaml(args.evals, extra=("judge: fake/judge-model", f"iterations: {args.iterations}")),
        ideal=math.ceil(conversations / args.concurrency) * TURNS * args.latency,
        scripts={f"conversation {i}": ["not yet", "still not", "done"] for i in range(args.evals)},
    )


def calibration_yaml(samples: int, repeats: int) -> str:
    lines = [
        "name: calibration",
        "judge: {model: fake/judge-model, criteria: Polite and correct, scale: -3..3}",
        f"repeats: {repeats}",
        "samples:",
    ]
    for i in range(samples):
        lines += [
            f"  - messages: [{{role: user, content: 'question {i}'}}, {{role: assistant, content: 'answer {i}'}}]",
            "    expected: {score: 2}",
        ]
    return "\n".join(lines) + "\n"


def calibration(args) -> Workload:
    judgements = args.samples * args.repeats
    return Workload(
        source=calibration_yaml(args.samples, args.repeats),
        ideal=math.ceil(judgements / args.concurrency) * args.latency,
        rules=[("Polite and correct", '{"score": 2, "reason": "fine"}')],
    )


def describe(name: str, args) -> str:
    common = f"run concurrency {args.concurrency}, fake latency {args.latency * 1000:.0f} ms"
    if name == "simulated":
        t = args.turns
        return (
            f"simulated: {args.conversations} conversations x {t} agent turns + {t - 1} simulated-user calls, "
            f"{common}\n  ideal = ceil({args.conversations}/{args.concurrency}) x ({t} + {t - 1}) x latency: "
            "the simulated user's calls are on the critical path too"
        )
    if name == "calibration":
        total = args.samples * args.repeats
        return (
            f"calibration: {args.samples} samples x {args.repeats} repeats = {total} judge calls, {common}\n"
            f"  ideal = ceil({total}/{args.concurrency}) x latency"
        )
    total = args.evals * args.iterations
    return (
        f"iterations: {args.evals} evals x {args.iterations} iterations = {total} conversations x {TURNS} turns, "
        f"{common}\n  ideal = ceil({total}/{args.concurrency}) x {TURNS} x latency"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--conversations", type=int, default=100, help="simulated: conversations")
    parser.add_argument("--turns", type=int, default=6, help="simulated: agent turns per conversation")
    parser.add_argument("--evals", type=int, default=50, help="iterations: evals")
    parser.add_argument("--iterations", type=int, default=10, help="iterations: iterations per eval")
    parser.add_argument("--samples", type=int, default=1000, help="calibration: samples")
    parser.add_argument("--repeats", type=int, default=3, help="calibration: judgements per sample")
    parser.add_argument("--scenario", choices=SCENARIOS, help=argparse.SUPPRESS)
    common_arguments(parser)
    args = parser.parse_args()
    workloads = {"simulated": simulated, "iterations": iterations, "calibration": calibration}
    if args.child:
        child(args, workloads[args.scenario](args))
        return

    print(
        f"{args.worker_procs} worker process(es) x {args.worker_threads} slots; target wall/ideal <= {TARGET:.2f}"
    )
    summary = []
    for name in args.scenarios.split(","):
        if name not in workloads:
            raise SystemExit(f"unknown scenario {name!r}")
        print(f"\n{describe(name, args)}")
        table_header()
        rows = run_backends(args, [__file__, *sys.argv[1:], "--scenario", name])
        summary += [(name, row) for row in rows]
    print("\nwall/ideal:")
    for name, row in summary:
        ratio = row["wall"] / row["ideal"]
        verdict = "meets" if ratio <= TARGET and row["status"] == "passed" else "MISSES"
        print(f"  {name:<11}{row['backend']:<9}{ratio:.3f}  {verdict} the target <= {TARGET:.2f}")


if __name__ == "__main__":
    main()
