"""python manage.py evalserve: the dashboard and a Celery worker together, for `make run`.

The workers are real `celery worker` processes (threads pool: conversations wait on HTTP, not the CPU); they
stop when the web server stops. Two processes by default: a conversation spends a few ms of CPU per turn in
Python (the openai client alone ~3 ms), and twenty threads under one interpreter lock queue for it
(bench/throughput.py: wall / ideal 1.24 with one process of 20 threads, 1.19 with two of 10).
"""

import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from engine.text import plural

WORKER = [sys.executable, "-m", "celery", "--quiet", "-A", "evalsite", "worker", "--pool", "threads",
          "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]  # fmt: skip


class Command(BaseCommand):
    help = "Serve the dashboard with a Celery worker alongside."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument(
            "--workers", type=int, default=20, help="Worker threads in all (conversations at once)."
        )
        parser.add_argument(
            "--processes", type=int, default=2, help="Worker processes the threads are shared among."
        )

    def handle(self, *args, addrport, workers, processes, **options):
        processes = max(1, min(processes, workers))
        threads = -(-workers // processes)  # ceil: at least `workers` threads in all
        started = [
            subprocess.Popen(
                [*WORKER, "--concurrency", str(threads), "--hostname", f"evalsite{n}@%h"],
                env=os.environ.copy(),
            )
            for n in range(1, processes + 1)
        ]
        # A plain `kill` of the server must stop the workers too: turn SIGTERM into a normal exit.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        pids = ", ".join(str(worker.pid) for worker in started)
        self.stdout.write(f"Celery workers started: {processes} x {plural(threads, 'thread')} (pids {pids}).")
        password_file = settings.VAR_DIR / "admin-password"
        sign_in = (
            f" and sign in as admin / {password_file.read_text().strip()}" if password_file.exists() else ""
        )
        self.stdout.write(self.style.SUCCESS(f"\nevalsite: open http://{addrport}/{sign_in}\n"))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            for worker in started:
                worker.send_signal(signal.SIGTERM)
            for worker in started:
                try:
                    worker.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
