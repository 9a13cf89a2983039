"""What `evalsite run` shows on a terminal while it plays, as a user sees it in a real pseudo-terminal.

    python bench/terminal.py [--n 300] [--concurrency 10] [--latency 1] [--repeat 3]
                             [--before /work/main/.venv/bin/evalsite] [--after .venv/bin/evalsite]

N one-turn conversations (each graded by one check) against the fake OpenAI server at --latency seconds a
reply, run by each `evalsite` command given (--before: another checkout's, to compare) in a pseudo-terminal
120 columns wide. For each, the median of --repeat runs of:

- first output: seconds from start until anything is on the terminal;
- first eval: seconds until the first conversation's report is on it;
- run / ideal: the whole process's wall time over ideal = ceil(N / C) x latency, and beside it the run's own
  (its `totals.duration_s` in --json: from the first call to the last reply);
- lines: the lines the terminal received (the live line's redraws are not lines).

With --big-concurrency C (default 300), the same N at --concurrency C, to show the default endpoint's cap:
ideal = ceil(N / C) x latency.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakeopenai import FakeOpenAI  # noqa: E402

KEY = "bench-terminal-key"


def suite_file(folder: Path, n: int) -> Path:
    lines = ["name: terminal-bench", "model: gpt-test", "evals:"]
    for number in range(n):
        lines += [f"  - prompt: Question {number}?", "    checks:", '      - match: "*OK*"']
    path = folder / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def in_terminal(command: str, suite: Path, concurrency: int, base_url: str) -> dict[str, float]:
    import fcntl
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY=KEY,
        EVALSITE_VAR_DIR=str(suite.parent),
        TERM="xterm-256color",
    )
    started = time.monotonic()
    process = subprocess.Popen(
        [command, "run", str(suite), "--concurrency", str(concurrency), "--json", str(suite.parent / "out.json")],
        cwd=suite.parent, env=env, stdin=slave, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    first_output = first_eval = None
    received = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.02)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            now = time.monotonic() - started
            if first_output is None:
                first_output = now
            received += data
            if first_eval is None and b"Eval " in received:
                first_eval = now
        elif process.poll() is not None:
            break
    process.wait()
    wall = time.monotonic() - started
    os.close(master)
    results = json.loads((suite.parent / "out.json").read_text(encoding="utf-8"))
    return {
        "run": results["totals"]["duration_s"],
        "first output": first_output if first_output is not None else wall,
        "first eval": first_eval if first_eval is not None else wall,
        "wall": wall,
        "lines": received.count(b"\n"),
    }


def measure(command: str, suite: Path, concurrency: int, base_url: str, repeat: int) -> dict[str, float]:
    runs = [in_terminal(command, suite, concurrency, base_url) for _ in range(repeat)]
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--big-concurrency", type=int, default=300)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", default="/work/main/.venv/bin/evalsite")
    parser.add_argument("--after", default=str(ROOT / ".venv" / "bin" / "evalsite"))
    args = parser.parse_args()
    commands = [("before", args.before), ("after", args.after)] if args.before else [("after", args.after)]
    print(f"N={args.n}, latency {args.latency:g} s, median of {args.repeat}, in a pseudo-terminal")
    print(
        "| command | concurrency | first output, s | first eval, s | lines | wall, s | process / ideal | run / ideal |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder, FakeOpenAI(latency=args.latency, api_key=KEY) as fake:
        suite = suite_file(Path(folder), args.n)
        for concurrency in (args.concurrency, args.big_concurrency):
            ideal = math.ceil(args.n / concurrency) * args.latency
            for name, command in commands:
                got = measure(command, suite, concurrency, fake.base_url, args.repeat)
                print(
                    f"| {name} | {concurrency} | {got['first output']:.2f} | {got['first eval']:.2f} | "
                    f"{got['lines']:.0f} | {got['wall']:.2f} | {got['wall'] / ideal:.2f} | {got['run'] / ideal:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
