"""Servers the tests and benchmarks use: whether PostgreSQL and Redis answer (`make test-pg` runs this
module: exit 0 when the given URLs answer), and a redis-server and a PostgreSQL server of one's own that can
be killed and started again (tests/e2e/test_e2e_recovery.py, tests/e2e/test_e2e_database_down.py,
bench/faults.py)."""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
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


def _postgres_bin() -> Path | None:
    """The folder of the newest PostgreSQL server installed (Debian keeps each version's apart)."""
    versions = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    if versions:
        return max(versions, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    """A PostgreSQL server of one's own: a cluster made by initdb in `folder`, served on a free port of
    127.0.0.1, that can be stopped as a crash stops it (`pg_ctl stop -m immediate`) and started again on the
    same data. Never the machine's own server. PostgreSQL refuses to run as root: as root, its commands run
    as the `postgres` user, who owns the folder."""

    def __init__(self, folder: Path) -> None:
        self.bin = _postgres_bin()
        self.folder = Path(folder)
        self.data = self.folder / "data"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    @staticmethod
    def available() -> bool:
        return _postgres_bin() is not None and (os.geteuid() != 0 or shutil.which("runuser") is not None)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> None:
        """Make the cluster if there is none yet, and start the server; returns once it accepts connections."""
        if not self.data.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.folder, "postgres", "postgres")
                # The folders above must let the postgres user through (a temporary folder is root's alone).
                for parent in self.folder.parents:
                    if parent == Path(parent.anchor) or parent == Path("/tmp"):
                        break
                    parent.chmod(parent.stat().st_mode | 0o011)
            self._run(
                "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"
            )
        # Its socket in its own folder; fsync off, as nothing here outlives the machine.
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", options,
                  "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """`immediate`: every server process quits at once, as in a crash; the next start recovers."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def remove(self) -> None:
        """Stop the server if it runs, and delete its cluster."""
        if self.data.exists() and self.running():
            with contextlib.suppress(RuntimeError):
                self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    pg_url, redis_url = sys.argv[1:3]
    sys.exit(0 if reachable(pg_url, 5432) and reachable(redis_url, 6379) else 1)
