"""python manage.py evalserve: the dashboard and a Celery worker together, for `make run`.

The web is served by gunicorn (processes, see WEB below), as in production, not by Django's development
server, which is slow to serve a page to many people at once. `--dev-server` keeps Django's for debugging.

The workers are real `celery worker` processes; one that dies is started again (logged, with a growing pause if
it keeps dying), and they stop when the web server stops. A process plays as many conversations at once as its
--concurrency, as coroutines on its event loop. Two processes by default: a conversation spends CPU in Python on
every turn, and one process has one interpreter lock. Together they play a run at the launch form's highest
concurrency (EVALSITE_MAX_RUN_CONCURRENCY) at full speed.
"""

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import BaseCommand

from engine.text import plural
from evalsite.cli.common import positive_int

WORKER = [sys.executable, "-m", "celery", "--quiet", "-A", "evalsite", "worker", "--pool", "threads",
          "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]  # fmt: skip


# The web tier: gunicorn's processes, each serving one request at a time (its `sync` workers), as many as
# two per core and one more. A run page is CPU-bound Python, so threads within a process only queue for its
# interpreter lock; and with threads (`gthread`) a browser's keep-alive connection stays with the process
# that accepted it, which accepts every connection it is offered, so one process can take most of the load.
# A sync process accepts a connection only when it is free, so the load spreads by itself (README's
# Benchmarks). `--web-threads N` still gives gthread workers.
# Static files are served by whitenoise from `collectstatic`'s folder, which the command fills first when it
# lacks a file (static_files_stale).
WEB = [sys.executable, "-m", "gunicorn", "evalsite.wsgi:application", "--graceful-timeout", "5",
       "--access-logfile", "-", "--access-logformat", '%(h)s "%(r)s" %(s)s %(b)s %(M)sms']  # fmt: skip
# A sync worker busy past its timeout is killed mid-request: streaming results.json of a very large run takes
# minutes.
SYNC_TIMEOUT, GTHREAD_TIMEOUT = 600, 120


def web_command(addrport: str, processes: int, threads: int) -> list[str]:
    """The gunicorn command line: sync workers, or gthread ones when more than one thread is asked for."""
    if threads > 1:
        workers = ["--worker-class", "gthread", "--threads", str(threads), "--timeout", str(GTHREAD_TIMEOUT)]
    else:
        workers = ["--worker-class", "sync", "--timeout", str(SYNC_TIMEOUT)]
    # gunicorn's control socket in this checkout's var folder, not the user's ~/.gunicorn, which a second
    # evalserve (another checkout, a test) would share.
    control = ["--control-socket", str(settings.VAR_DIR / "gunicorn.ctl")]
    return [*WEB, *workers, *control, "--bind", addrport, "--workers", str(processes)]


def default_web_processes() -> int:
    """Two per core and one more (gunicorn's own advice), at most 12: each process holds its own memory."""
    return min(2 * (os.cpu_count() or 1) + 1, 12)


log = logging.getLogger(__name__)

# What collectstatic leaves out, as it does by default.
STATIC_IGNORED = ["CVS", ".*", "*~"]


def static_files_stale() -> bool:
    """Whether the manifest of hashed static file names, which every page's {% static %} reads when DEBUG is
    off, is missing or lacks a file the site has: a var dir set up without `collectstatic`, or a checkout
    given a static file since. Every page would answer 500 until it is collected."""
    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin):
        return False  # DEBUG: files are served as they are
    try:
        manifest, _ = storage.load_manifest()
    except ValueError:  # written by another Django
        return True
    found = {path for finder in finders.get_finders() for path, _ in finder.list(STATIC_IGNORED)}
    return not found <= manifest.keys()


class Supervisor:
    """Keeps worker processes running: one that exits is started again, after a pause that doubles with each
    quick death (MIN_BACKOFF up to MAX_BACKOFF) and is forgotten once a worker has lived STABLE_AFTER."""

    MIN_BACKOFF, MAX_BACKOFF, STABLE_AFTER = 1.0, 60.0, 60.0

    def __init__(self, commands: list[list[str]], check_every: float = 0.5) -> None:
        self.commands = commands
        self.check_every = check_every
        self.processes: list[subprocess.Popen] = []
        self.started_at: list[float] = []
        self.backoff: list[float] = []
        self.restart_at: list[float | None] = []
        self.restarts = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        for command in self.commands:
            self.processes.append(subprocess.Popen(command, env=os.environ.copy()))
            self.started_at.append(time.monotonic())
            self.backoff.append(self.MIN_BACKOFF)
            self.restart_at.append(None)
        self._thread = threading.Thread(target=self._watch, name="evalserve-supervisor", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.check_every):
            for n, process in enumerate(self.processes):
                if process.poll() is None or self._stop.is_set():
                    continue
                now = time.monotonic()
                if self.restart_at[n] is None:
                    if now - self.started_at[n] >= self.STABLE_AFTER:
                        self.backoff[n] = self.MIN_BACKOFF
                    self.restart_at[n] = now + self.backoff[n]
                    log.warning("worker %d (pid %d) exited with code %s; starting it again in %.0f s",
                                n + 1, process.pid, process.returncode, self.backoff[n])  # fmt: skip
                    self.backoff[n] = min(self.backoff[n] * 2, self.MAX_BACKOFF)
                elif now >= self.restart_at[n]:
                    self.processes[n] = subprocess.Popen(self.commands[n], env=os.environ.copy())
                    self.started_at[n], self.restart_at[n] = now, None
                    self.restarts += 1
                    log.warning("worker %d started again (pid %d)", n + 1, self.processes[n].pid)

    def stop_restarting(self) -> None:
        """From now on a worker that exits stays down: the server is stopping, and Ctrl-C reaches the workers
        (they are in its process group) while gunicorn is still shutting down."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def stop(self, timeout: float = 10) -> None:
        self.stop_restarting()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()


class Command(BaseCommand):
    help = "Serve the dashboard with a Celery worker alongside."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument(
            "--slots", "--workers", type=positive_int, default=settings.EVALSITE_MAX_RUN_CONCURRENCY,
            help="Conversations played at once, in all the worker processes (default: the highest concurrency "
            "a run may ask, EVALSITE_MAX_RUN_CONCURRENCY).",
        )  # fmt: skip
        parser.add_argument(
            "--processes", type=positive_int, default=2, help="Worker processes the slots are shared among."
        )
        parser.add_argument(
            "--web-processes", type=positive_int, default=default_web_processes(),
            help="gunicorn worker processes (default: two per core and one more).",
        )  # fmt: skip
        parser.add_argument(
            "--web-threads", type=positive_int, default=1,
            help="Threads per gunicorn process; above 1, gthread workers instead of sync ones.",
        )  # fmt: skip
        parser.add_argument(
            "--dev-server", action="store_true", help="Serve with Django's development server instead."
        )

    def handle(self, *args, addrport, slots, processes, web_processes, web_threads, dev_server, **options):
        if static_files_stale():
            self.stdout.write(
                f"Collecting the static files into {settings.STATIC_ROOT}: their manifest is missing or "
                "out of date (`manage.py collectstatic`)."
            )
            self.stdout.flush()
            call_command("collectstatic", interactive=False, verbosity=0)
        processes = max(1, min(processes, slots))
        each = -(-slots // processes)  # ceil: at least `slots` in all
        supervisor = Supervisor(
            [
                [*WORKER, "--concurrency", str(each), "--hostname", f"evalsite{n}@%h"]
                for n in range(1, processes + 1)
            ]
        )
        supervisor.start()
        try:
            self._serve(supervisor, addrport, processes, each, web_processes, web_threads, dev_server)
        finally:  # however serving ends (a web server that cannot start included), no worker outlives it
            supervisor.stop()

    def _serve(self, supervisor, addrport, processes, each, web_processes, web_threads, dev_server) -> None:
        # A plain `kill` of the server must stop the workers too: turn SIGTERM into a normal exit.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        pids = ", ".join(str(worker.pid) for worker in supervisor.processes)
        self.stdout.write(
            f"Celery workers started: {plural(processes, 'worker')}, each playing up to {each} conversations at "
            f"once (pids {pids})."
        )
        password_file = settings.VAR_DIR / "admin-password"
        sign_in = (
            f" and sign in as admin / {password_file.read_text().strip()}" if password_file.exists() else ""
        )
        self.stdout.write(self.style.SUCCESS(f"\nevalsite: open http://{addrport}/{sign_in}\n"))
        self.stdout.flush()  # written to a file or a pipe, it would wait in the buffer behind gunicorn's log
        if dev_server:
            call_command("runserver", addrport, use_reloader=False)
            return
        web_processes, web_threads = max(1, web_processes), max(1, web_threads)
        web = subprocess.Popen(web_command(addrport, web_processes, web_threads), env=os.environ.copy())
        self.stdout.write(
            f"Web server: gunicorn, {web_processes} process{'es' if web_processes > 1 else ''} x "
            f"{plural(web_threads, 'thread')} (pid {web.pid}).",
        )
        self.stdout.flush()
        try:
            web.wait()
        except KeyboardInterrupt:
            pass  # Ctrl-C: stop everything below, without a traceback
        finally:
            supervisor.stop_restarting()  # before waiting for gunicorn: Ctrl-C has stopped the workers too
            # Ctrl-C reaches gunicorn too (it is in our process group); a SIGTERM to us must be passed on.
            if web.poll() is None:
                web.terminate()
                try:
                    web.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    web.kill()
