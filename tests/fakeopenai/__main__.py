"""Serves the fake endpoint standalone: ``python -m tests.fakeopenai --port 8900 --latency 0.1``."""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any

from tests.fakeopenai.server import FakeOpenAI


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI API for manual testing.")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--api-key", default=None, help="require this bearer token")
    parser.add_argument("--default-reply", default="OK")
    args = parser.parse_args(argv)

    fake = FakeOpenAI(latency=args.latency, api_key=args.api_key, port=args.port, host=args.host)
    fake.default_reply = args.default_reply
    fake.start()
    print(fake.base_url, flush=True)
    # Benchmarks run this as a subprocess and stop it with terminate(); exit as cleanly as on Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
