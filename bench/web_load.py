"""The web tier under load: 20 signed-in clients for 30 s on the run page and transcripts of a 1,000-
conversation run, against the server `make run` starts.

    python bench/web_load.py [--clients 20] [--seconds 30] [--conversations 1000]
                             [--servers gunicorn,runserver] [--server-args '--web-processes 4']

For each server: a fresh var folder, migrated and with its static files collected as `make setup` does; a
run of N conversations × 3 turns built through the worker's writes (bench/pages_scale.build); then
`manage.py evalserve` (gunicorn, or `--dev-server` for Django's development server) on a free port, with
its Celery workers as `make run` has them. Each client is a thread with its own session cookie (signed in
as the run's owner) and its own keep-alive connection, asking for the run page and a transcript in turn,
as fast as the answers come. Prints requests, requests per second, latency percentiles and errors (a
status other than 200, or no answer within 30 s). Goal (issue 16): p95 under 500 ms, no error.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(var_dir: Path, conversations: int) -> tuple[dict, str, list[str]]:
    """Set up the var folder and the run in a child process (its own Django settings); returns the
    environment, a session cookie of the run's owner, and the paths to ask for."""
    env = {**os.environ, "EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(var_dir), "LOG_LEVEL": "WARNING",
           "DJANGO_SETTINGS_MODULE": "evalsite.settings"}  # fmt: skip
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):  # the embedded defaults, as `make run` has them
        env.pop(name, None)
    for command in (["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True)
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(ROOT / "bench")!r})
import argparse
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.auth import SESSION_KEY, BACKEND_SESSION_KEY, HASH_SESSION_KEY
import pages_scale
user = get_user_model().objects.create_user("loadbench", password="bench-pw-123")
args = argparse.Namespace(shape="dataset", conversations={conversations}, turns=3)
run = pages_scale.build(args, user)
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key, run.pk)
"""
    made = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env,
                          check=True, capture_output=True, text=True)  # fmt: skip
    key, run_id = made.stdout.strip().splitlines()[-1].split()
    paths = [f"/runs/{run_id}/"] + [f"/runs/{run_id}/c/{n}/" for n in (1, 250, 500, 999 % conversations)]
    return env, key, paths


def load(port: int, cookie: str, paths: list[str], clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        turn = n
        while time.monotonic() < stop_at:
            # The run page every other request, a transcript in between.
            path = paths[0] if turn % 2 == 0 else paths[1 + (turn // 2) % (len(paths) - 1)]
            turn += 1
            started = time.perf_counter()
            try:
                connection.request("GET", path, headers={"Cookie": f"sessionid={cookie}"})
                response = connection.getresponse()
                response.read()
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status != 200:
                        errors.append(f"{response.status} {path}")
            except (OSError, http.client.HTTPException) as exc:
                with lock:
                    errors.append(f"{type(exc).__name__} {path}")
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    return {
        "requests": len(latencies),
        "per_second": len(latencies) / wall,
        "p50": pct(0.5),
        "p95": pct(0.95),
        "p99": pct(0.99),
        "mean": 1000 * statistics.fmean(latencies) if latencies else float("nan"),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def measure(server: str, args) -> dict:
    var_dir = Path(tempfile.mkdtemp(prefix=f"evalsite-load-{server}-"))
    env, cookie, paths = prepare(var_dir, args.conversations)
    port = free_port()
    command = [sys.executable, "manage.py", "evalserve", f"127.0.0.1:{port}"]
    if server == "runserver":
        command.append("--dev-server")
    command += args.server_args.split()
    log = (var_dir / "evalserve.log").open("wb")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit((var_dir / "evalserve.log").read_text()[-2000:]) from None
                time.sleep(0.2)
        load(port, cookie, paths, 2, 2)  # warm: templates, the suite cache, connections
        return load(port, cookie, paths, args.clients, args.seconds)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--servers", default="gunicorn,runserver")
    parser.add_argument(
        "--server-args", default="", help="more options for evalserve, e.g. '--web-threads 4'"
    )
    args = parser.parse_args()
    print(f"{args.clients} clients for {args.seconds:g} s: the run page and transcripts of a run of "
          f"{args.conversations:,} conversations × 3 turns")  # fmt: skip
    print(f"{'server':<12}{'requests':>9}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for server in args.servers.split(","):
        result = measure(server, args)
        print(f"{server:<12}{result['requests']:>9}{result['per_second']:>8.1f}{result['p50']:>9.0f}"
              f"{result['p95']:>9.0f}{result['p99']:>9.0f}{result['errors']:>8}", flush=True)  # fmt: skip
        for error in result["first_errors"]:
            print(f"    {error}")


if __name__ == "__main__":
    main()
