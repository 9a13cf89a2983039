"""python manage.py evalserve: the dashboard and a Celery worker together, for `make run`.

The worker is a real `celery worker` process (threads pool: conversations wait on HTTP, not the CPU); it
stops when the web server stops.
"""

import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

WORKER = [sys.executable, "-m", "celery", "--quiet", "-A", "evalsite", "worker", "--pool", "threads",
          "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]  # fmt: skip


class Command(BaseCommand):
    help = "Serve the dashboard with a Celery worker alongside."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--workers", type=int, default=20, help="Worker threads (conversations at once).")

    def handle(self, *args, addrport, workers, **options):
        worker = subprocess.Popen([*WORKER, "--concurrency", str(workers)], env=os.environ.copy())
        # A plain `kill` of the server must stop the worker too: turn SIGTERM into a normal exit.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        self.stdout.write(f"Celery worker started (pid {worker.pid}, {workers} threads).")
        password_file = settings.VAR_DIR / "admin-password"
        sign_in = (
            f" and sign in as admin / {password_file.read_text().strip()}" if password_file.exists() else ""
        )
        self.stdout.write(self.style.SUCCESS(f"\nevalsite: open http://{addrport}/{sign_in}\n"))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
