"""What generation settings cost a model call: the asyncio client's CPU per call against the fake endpoint, bare
and with every setting sent (the suite's and an eval's merged, body keys, extra_body, extra_headers).

    python bench/settings.py [--n 3000] [--concurrency 100] [--latency 0.02] [--repeat 3]

The fake endpoint runs in a process of its own, so this process's CPU (user + sys) is the client's alone. Prints
the CPU per call of each, and the ratio (with / bare), the median of --repeat sittings.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.clients import AsyncOpenAIClient, EndpointConfig  # noqa: E402
from engine.clients.settings import Refusals, configured  # noqa: E402
from engine.schema.settings import ModelSettings  # noqa: E402

SUITE_SETTINGS = ModelSettings(
    temperature=0.2, max_tokens=200, seed=7, stop=["END"], response_format="json_object",
    extra_body={"store": False}, extra_headers={"X-Team": "bench"},
)  # fmt: skip
EVAL_SETTINGS = ModelSettings(temperature=0.7)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def calls(client, n: int, concurrency: int, settings) -> float:
    """CPU seconds this process spent making n calls, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    extra = {"settings": settings} if settings is not None else {}

    async def one(number: int) -> None:
        async with gate:
            await client.acomplete("bench", [{"role": "user", "content": f"question {number}"}], **extra)

    started = time.process_time()
    await asyncio.gather(*(one(number) for number in range(n)))
    spent = time.process_time() - started
    await client.aclose()
    return spent


def sitting(base_url: str, n: int, concurrency: int) -> tuple[float, float]:
    bare = AsyncOpenAIClient(EndpointConfig(name="bench", base_url=base_url, api_key_env="BENCH_NO_KEY"))
    with_settings = configured(
        AsyncOpenAIClient(EndpointConfig(name="bench", base_url=base_url, api_key_env="BENCH_NO_KEY")),
        SUITE_SETTINGS, "model_settings", Refusals(),
    )  # fmt: skip
    asyncio.run(calls(bare, 200, concurrency, None))  # warm: imports, connections
    cpu_bare = asyncio.run(calls(bare, n, concurrency, None))
    cpu_set = asyncio.run(calls(with_settings, n, concurrency, EVAL_SETTINGS))
    return cpu_bare / n, cpu_set / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeopenai", "--port", str(port), "--latency", str(args.latency)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(1.5)
        runs = [sitting(f"http://127.0.0.1:{port}/v1", args.n, args.concurrency) for _ in range(args.repeat)]
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    bare = statistics.median(run[0] for run in runs)
    with_settings = statistics.median(run[1] for run in runs)
    print(f"{args.n} calls at C={args.concurrency}, {args.latency * 1000:g} ms, median of {args.repeat}")
    print(f"  CPU per call, bare:          {bare * 1000:.3f} ms")
    print(f"  CPU per call, with settings: {with_settings * 1000:.3f} ms  (ratio {with_settings / bare:.3f})")


if __name__ == "__main__":
    main()
