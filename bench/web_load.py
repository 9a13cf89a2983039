"""The web tier under load: signed-in clients asking, as fast as the answers come, for the pages of one run,
against the server `make run` starts.

    python bench/web_load.py [--clients 50] [--seconds 30] [--conversations 100000] [--mix page,poll]
                             [--db PATH] [--live] [--servers gunicorn,runserver]
                             [--server-args '--web-processes 4']

For each server: a var folder, migrated and with its static files collected as `make setup` does; a run of
N conversations × 3 turns built through the worker's writes (bench/pages_scale.build: 100,000 take ~8 min
on SQLite here), in a fresh database, or in `--db PATH` (a SQLite file, kept: built once, reused after; a
`pages_scale.py --db` file serves) or DATABASE_URL's PostgreSQL database (its run kept the same way; run
`VACUUM ANALYZE` after the build, as autovacuum would); then `manage.py evalserve` (gunicorn, or
`--dev-server` for Django's development server) on a free port, with its Celery workers as `make run` has
them. Each client is a thread with its own session cookie (signed in as the run's owner) and its own
keep-alive connection, asking in turn for what `--mix` names (after rounds of 10 clients until the server
answers all of a round within 2 s: its processes have started and read what they keep):
  page        the run page;
  poll        its progress partial, as htmx asks for it (a finished run's answers 286, which stops polling);
  transcript  a conversation's page (four of them in turn).
`--live` shows the run as running while the clients ask (its status set back after), so the poll is a live
page's refresh every second: counts, the rows changed since the client's last poll, and every 5 s the
sections that read many rows. Prints the command, the machine's load average before and after, and per kind:
requests, requests per second, latency percentiles and errors (a status other than 200/204/286, or no answer
within 30 s). Goal (issue 28): 50 clients on the page and poll of a 100,000-conversation run, p95 under
1 s; (issue 16): 20 clients, page and transcripts of 1,000 conversations, p95 under 500 ms.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shlex
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
KINDS = ("page", "poll", "transcript")
OK = (200, 204, 286)  # a page; a poll with nothing new; a finished run's last poll


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def environment(var_dir: Path, db: str | None) -> dict:
    env = {**os.environ, "EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(var_dir), "LOG_LEVEL": "WARNING",
           "DJANGO_SETTINGS_MODULE": "evalsite.settings"}  # fmt: skip
    env.pop("CELERY_BROKER_URL", None)  # the embedded broker, as `make run` has it
    if db:
        env["DATABASE_URL"] = f"sqlite:///{Path(db).resolve()}"
    env.setdefault("EVALSITE_MAX_CONVERSATIONS_PER_RUN", "100000")
    return env


def prepare(env: dict, conversations: int) -> tuple[str, str]:
    """Migrate, collect the static files, and find or build the run in a child process (its own Django
    settings); returns a session cookie of the run's owner and the run's id."""
    for command in (["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True)
    script = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(ROOT / "bench")!r})
import argparse
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.auth import SESSION_KEY, BACKEND_SESSION_KEY, HASH_SESSION_KEY
from projects.models import Membership, Project
from runs.models import Run
import pages_scale
users = get_user_model().objects
user = users.filter(username="bench").first() or users.create_user("bench", password=pages_scale.PASSWORD)
Membership.objects.get_or_create(project=Project.default(), user=user, defaults={{"role": "admin"}})
run = next((r for r in Run.objects.filter(created_by=user).order_by("-created_at")
            if r.conversations.count() == {conversations}), None)
if run is None:
    started = time.perf_counter()
    run = pages_scale.build(argparse.Namespace(shape="dataset", conversations={conversations}, turns=3), user)
    print(f"built {conversations:,} conversations in {{time.perf_counter() - started:.0f}} s", file=sys.stderr)
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key, run.pk)
"""
    made = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env,
                          check=True, stdout=subprocess.PIPE, text=True)  # fmt: skip
    key, run_id = made.stdout.strip().splitlines()[-1].split()
    return key, run_id


def set_live(env: dict, run_id: str, live: bool) -> None:
    """Show the run as running (its finish kept aside in a file) or as it was."""
    script = f"""
from runs.models import Run
from django.utils import timezone
run = Run.objects.get(pk={run_id!r})
if {live!r}:
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None, summary={{**run.summary, "kept": [run.status, run.finished_at.isoformat()]}})
else:
    status, finished = run.summary.pop("kept")
    Run.objects.filter(pk=run.pk).update(status=status, finished_at=finished, summary=run.summary)
"""
    subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True)


def paths_of(run_id: str, conversations: int) -> dict[str, list[str]]:
    return {
        "page": [f"/runs/{run_id}/"],
        "poll": [f"/runs/{run_id}/progress/"],
        "transcript": [
            f"/runs/{run_id}/c/{n}/" for n in sorted({1, 250, 500, 999} & set(range(conversations)))
        ],
    }


def load(
    port: int, cookie: str, paths: dict, mix: list[str], clients: int, seconds: float, live: bool
) -> dict:
    latencies: dict[str, list[float]] = {kind: [] for kind in mix}
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        turn = n
        last_poll = last_whole = int(time.time() * 1000)
        while time.monotonic() < stop_at:
            kind = mix[turn % len(mix)]
            choices = paths[kind]
            path = choices[(turn // len(mix)) % len(choices)]
            turn += 1
            headers = {"Cookie": f"sessionid={cookie}"}
            if kind == "poll":
                headers["HX-Request"] = "true"
                # As a live page's poll URL has it: the rows changed since its last poll, the whole every 5 s.
                if live:
                    now = int(time.time() * 1000)
                    path += f"?since={last_poll}&whole={last_whole}"
                    last_poll, last_whole = now, now if now - last_whole >= 5000 else last_whole
            started = time.perf_counter()
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                response.read()
                elapsed = time.perf_counter() - started
                with lock:
                    latencies[kind].append(elapsed)
                    if response.status not in OK:
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
    rows = {kind: figures(values, wall) for kind, values in latencies.items()}
    rows["all"] = figures([v for values in latencies.values() for v in values], wall)
    return {"rows": rows, "errors": len(errors), "first_errors": errors[:3]}


def figures(latencies: list[float], wall: float) -> dict:
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    return {
        "requests": len(ordered),
        "per_second": len(ordered) / wall,
        "p50": pct(0.5),
        "p95": pct(0.95),
        "p99": pct(0.99),
        "max": 1000 * ordered[-1] if ordered else float("nan"),
        "mean": 1000 * statistics.fmean(ordered) if ordered else float("nan"),
    }


def measure(server: str, args) -> dict:
    var_dir = Path(tempfile.mkdtemp(prefix=f"evalsite-load-{server}-"))
    db = args.db
    if db is None and not os.environ.get("DATABASE_URL"):
        db = str(var_dir / "evalsite.sqlite3")
    env = environment(var_dir, db)
    cookie, run_id = prepare(env, args.conversations)
    paths = paths_of(run_id, args.conversations)
    port = free_port()
    command = [sys.executable, "manage.py", "evalserve", f"127.0.0.1:{port}"]
    if server == "runserver":
        command.append("--dev-server")
    command += shlex.split(args.server_args)
    print(f"  {server}: {shlex.join(command[1:])}  (database {env.get('DATABASE_URL')})", flush=True)
    if args.live:
        set_live(env, run_id, True)
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
        # Warm: gunicorn's processes import the app, and each reads what it keeps (templates, suites, caches)
        # on its first requests. Rounds of 10 clients for 3 s until one answers every request within 2 s.
        warming, rounds = time.monotonic(), 0
        while time.monotonic() - warming < 300:
            rounds += 1
            warm = load(port, cookie, paths, args.mix, 10, 3, args.live)
            if warm["rows"]["all"]["max"] < 2000 and not warm["errors"]:
                break
        print(
            f"  warm after {time.monotonic() - warming:.0f} s, {rounds} rounds of 10 clients for 3 s",
            flush=True,
        )
        before = load_average()
        result = load(port, cookie, paths, args.mix, args.clients, args.seconds, args.live)
        result["load"] = f"{before} -> {load_average()}"
        return result
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        if args.live:
            set_live(env, run_id, False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--mix", default="page,poll", help=f"what each client asks for in turn, of {KINDS}")
    parser.add_argument("--db", help="a SQLite file holding the run, built there on first use and kept")
    parser.add_argument("--live", action="store_true", help="show the run as running while it is asked for")
    parser.add_argument("--servers", default="gunicorn")
    parser.add_argument(
        "--server-args", default="", help="more options for evalserve, e.g. '--web-processes 4'"
    )
    args = parser.parse_args()
    args.mix = [kind for kind in args.mix.split(",") if kind]
    if not args.mix or set(args.mix) - set(KINDS):
        parser.error(f"--mix takes {', '.join(KINDS)}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    print(f"$ python {shlex.join(['bench/web_load.py', *sys.argv[1:]])}")
    print(
        f"code {commit.stdout.strip() or '?'} in {ROOT}; {os.cpu_count()} cores; load average {load_average()}"
    )
    print(f"{args.clients} clients for {args.seconds:g} s, each asking for {' then '.join(args.mix)} in turn, "
          f"of a {'live' if args.live else 'finished'} run of {args.conversations:,} conversations × 3 turns",
          flush=True)  # fmt: skip
    for server in args.servers.split(","):
        result = measure(server, args)
        print(f"{server} (load average {result['load']})")
        print(f"  {'':<12}{'requests':>9}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
        for kind, row in result["rows"].items():
            print(f"  {kind:<12}{row['requests']:>9}{row['per_second']:>8.1f}{row['p50']:>9.0f}"
                  f"{row['p95']:>9.0f}{row['p99']:>9.0f}{row['max']:>9.0f}")  # fmt: skip
        print(f"  errors {result['errors']}", flush=True)
        for error in result["first_errors"]:
            print(f"    {error}")


if __name__ == "__main__":
    main()
