"""Servers the tests and benchmarks use: whether PostgreSQL and Redis answer (`make test-pg` runs this
module: exit 0 when the given URLs answer), and a redis-server of one's own that can be killed and started
again (tests/e2e/test_e2e_recovery.py, bench/faults.py)."""

import socket
import subprocess
import sys
import time
from urllib.parse import urlparse


def reachable(url: str, default_port: int) -> bool:
    parts = urlparse(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A redis-server of one's own, on a free port, that can be killed and started again (empty: it keeps
    nothing on disk, so a restart loses every message, as a Redis without persistence does)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 10) -> None:
        # Nothing on disk: a restart comes back empty.
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self.answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.02)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


if __name__ == "__main__":
    pg_url, redis_url = sys.argv[1:3]
    sys.exit(0 if reachable(pg_url, 5432) and reachable(redis_url, 6379) else 1)
