"""`make run`'s server (manage.py evalserve) as a user starts it: a fresh var dir, the web server, two worker
processes; the example mock demo launched against it is played to its end; a worker that dies is started
again; SIGTERM stops everything."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runs.management.commands.evalserve import Supervisor, default_web_processes
from tests.conftest import ROOT

LAUNCH_AND_WAIT = """
import time
from django.contrib.auth import get_user_model
from runs.services import create_run
from suites.models import Suite

user = get_user_model().objects.get(username="admin")
run = create_run(version=Suite.objects.get(owner=user, name="demo-follow-ups").latest_version, user=user)
deadline = time.monotonic() + 60
while run.is_active and time.monotonic() < deadline:
    time.sleep(0.2)
    run.refresh_from_db()
from runs.selectors import live_workers
print(live_workers())
print(run.status, sorted((c.eval_id, c.status, c.passed_on_turn) for c in run.conversations.all()))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: its children, theirs, and so on."""
    below = [child for child, _ in children(pid)]
    return below + [pid for child in below for pid in descendants(child)]


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == pid:
            found.append((int(entry.name), command))
    return found


@pytest.fixture
def var_env(tmp_path):
    return set_up_var(tmp_path / "var")


def set_up_var(var_dir: Path, *, collect: bool = True) -> dict[str, str]:
    """The environment of a local install whose var dir is `var_dir`, set up as `make setup` sets it up
    (without collecting the static files, when not `collect`)."""
    env = {**os.environ, "EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(var_dir),
           "DJANGO_SETTINGS_MODULE": "evalsite.settings", "LOG_LEVEL": "WARNING"}  # fmt: skip
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "STATIC_ROOT"):  # the defaults, as `make run` has them
        env.pop(name, None)
    manage = [sys.executable, "manage.py"]
    # As `make setup` does before `make run`.
    commands = [["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"], ["evalsetup"]]
    for command in commands if collect else [commands[0], commands[2]]:
        subprocess.run([*manage, *command], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    return env


def wait_for_page(url: str, server: subprocess.Popen, log: Path) -> None:
    """Until the server answers `url` (an error answer fails at once), or fails the test after a minute."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as page:
                assert page.status == 200
                return
        except urllib.error.HTTPError:
            raise
        except OSError:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            assert server.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)


def stop(server: subprocess.Popen) -> None:
    """The server and its whole tree, found before it goes (its orphans would then be init's children)."""
    tree = descendants(server.pid)
    if server.poll() is None:
        server.kill()
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_serves_the_dashboard_plays_runs_on_two_worker_processes_restarts_them_and_stops_them(
    var_env, tmp_path
):
    port = free_port()
    log = (tmp_path / "evalserve.log").open("wb")
    # As from a user's shell: its lines must reach a log file while it runs, without PYTHONUNBUFFERED.
    env = {name: value for name, value in var_env.items() if name != "PYTHONUNBUFFERED"}
    server = subprocess.Popen(
        [sys.executable, "manage.py", "evalserve", f"127.0.0.1:{port}", "--processes", "2", "--slots", "4"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", server, tmp_path / "evalserve.log")
        output = (tmp_path / "evalserve.log").read_text()
        assert "Celery workers started: 2 workers, each playing up to 2 conversations at once" in output
        assert f"open http://127.0.0.1:{port}/ and sign in as admin / " in output
        workers = [pid for pid, command in children(server.pid) if "celery" in command]
        assert len(workers) == 2, children(server.pid)
        # The web is gunicorn's (a master and its processes, two per core and one more), and answers many
        # requests at once.
        (web,) = [pid for pid, command in children(server.pid) if "gunicorn" in command]
        assert len(children(web)) == default_web_processes() > 1, children(web)
        assert f"Web server: gunicorn, {default_web_processes()} processes x 1 thread" in output

        def get(_):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=10) as page:
                return page.status, "csrfmiddlewaretoken" in page.read().decode()

        with ThreadPoolExecutor(12) as pool:
            assert set(pool.map(get, range(24))) == {(200, True)}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/css/app.css", timeout=10) as css:
            assert css.status == 200 and b".badge-override" in css.read()  # whitenoise serves static files
        web_processes = [web, *(pid for pid, _ in children(web))]

        played = subprocess.run([sys.executable, "manage.py", "shell", "-c", LAUNCH_AND_WAIT], cwd=ROOT,
                                env=var_env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert played.returncode == 0, played.stderr[-3000:]
        # The demo's three outcomes: pass on turn 1, pass on turn 2 after a follow-up, fail after all.
        *_, workers_seen, played_line = played.stdout.strip().splitlines()
        assert workers_seen == "{'count': 2, 'slots': 4}"  # as the run page and the launch form count them
        status, conversations = played_line.split(" ", 1)
        assert status == "failed"
        assert conversations.count("'passed', 1)") == 1
        assert conversations.count("'passed', 2)") == 1
        assert conversations.count("'failed', None)") == 1

        # A worker that dies is started again, and says so.
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            restarted = [
                pid for pid, command in children(server.pid) if "celery" in command and pid not in workers
            ]
            if restarted:
                break
            time.sleep(0.1)
        assert restarted, (tmp_path / "evalserve.log").read_text()[-3000:]
        workers.extend(restarted)
        output = (tmp_path / "evalserve.log").read_text()
        assert f"worker 1 (pid {workers[0]}) exited with code -9; starting it again in 1 s" in output
        assert f"worker 1 started again (pid {restarted[0]})" in output

        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        deadline = time.monotonic() + 15
        while (
            any(Path(f"/proc/{pid}").exists() for pid in workers + web_processes)
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert not any(Path(f"/proc/{pid}").exists() for pid in workers), "a worker outlived the server"
        assert not any(Path(f"/proc/{pid}").exists() for pid in web_processes), "gunicorn outlived the server"
    finally:  # a failed assertion must not leave gunicorn and Celery running for the next test
        stop(server)
        log.close()


def test_a_var_dir_set_up_without_collectstatic_is_served_with_its_static_files(tmp_path):
    """Every page reads the manifest of hashed static names: without one each answered 500 ("Missing
    staticfiles manifest entry"). The server collects them first, and says so."""
    var = tmp_path / "var"
    env = set_up_var(var, collect=False)
    port = free_port()
    log_path = tmp_path / "evalserve.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "evalserve", f"127.0.0.1:{port}", "--processes", "1", "--slots", "1",
             "--web-processes", "1"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for_page(f"http://127.0.0.1:{port}/accounts/login/", server, log_path)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/js/head.js", timeout=10) as script:
                assert script.status == 200
            assert (var / "staticfiles" / "staticfiles.json").is_file()
            assert (
                f"Collecting the static files into {var / 'staticfiles'}: their manifest is missing or out of date"
                in log_path.read_text()
            )
        finally:
            stop(server)


def test_a_worker_that_exits_once_the_server_is_stopping_is_not_started_again():
    """Ctrl-C reaches the workers too (one process group), while gunicorn may still take a second to stop: the
    supervisor must not start them again meanwhile. Before the stop, the same death is a restart."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    supervisor = Supervisor([sleeper, sleeper], check_every=0.02)
    supervisor.MIN_BACKOFF = 0.0
    supervisor.start()
    try:
        first, second = supervisor.processes
        first.kill()
        deadline = time.monotonic() + 10
        while supervisor.restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert supervisor.restarts == 1 and supervisor.processes[0] is not first

        supervisor.stop_restarting()
        second.kill()
        second.wait()
        time.sleep(0.3)  # fifteen of the watch's intervals
        assert supervisor.restarts == 1 and supervisor.processes[1] is second
    finally:
        supervisor.stop()


@pytest.mark.parametrize("flag", ["--slots", "--processes", "--web-processes", "--web-threads"])
def test_a_count_below_one_is_refused_before_anything_starts(var_env, flag):
    done = subprocess.run([sys.executable, "manage.py", "evalserve", "127.0.0.1:1", flag, "0"], cwd=ROOT,
                          env=var_env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "'0' is not a whole number of 1 or more" in done.stderr
    assert "Celery workers started" not in done.stdout


def test_a_web_server_that_cannot_start_leaves_no_worker_behind(var_env, tmp_path):
    """The port is taken: gunicorn cannot bind, evalserve ends, and so do the workers it started."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = subprocess.Popen(
            [sys.executable, "manage.py", "evalserve", f"127.0.0.1:{port}", "--slots", "2"],
            cwd=ROOT, env=var_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        workers: set[int] = set()
        deadline = time.monotonic() + 90
        while server.poll() is None and time.monotonic() < deadline:
            workers |= {pid for pid, command in children(server.pid) if "celery" in command}
            time.sleep(0.1)
        output, _ = server.communicate(timeout=30)
    assert server.returncode is not None and workers, output[-3000:]
    left = [pid for pid in workers if Path(f"/proc/{pid}").exists() and "celery" in _cmdline(pid)]
    assert not left, output[-3000:]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
