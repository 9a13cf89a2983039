"""A worker process's threads, named for the operating system as well as for Python, so that `top -H`,
`ps -L` and /proc/<pid>/task/*/comm tell the event loop, the pump and the rest apart from outside the process
(bench/throughput.py's CPU by thread reads them there). Python's own names stay in the interpreter; the
system's come from setproctitle, which Celery also uses for its process titles."""

from __future__ import annotations

import threading
from collections.abc import Callable

try:
    from setproctitle import setthreadtitle
except ImportError:  # an install without it: the threads keep the process's name

    def setthreadtitle(title: str) -> None:
        pass


# The system keeps the first 15 characters of a thread's name.
OS_NAME_LENGTH = 15


def name_this_thread(name: str) -> None:
    setthreadtitle(name[:OS_NAME_LENGTH])


def started(target: Callable[[], object], name: str) -> threading.Thread:
    """A daemon thread running `target`, named `name` for Python and the system, started."""

    def run() -> None:
        name_this_thread(name)
        target()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
