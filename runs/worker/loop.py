"""The worker process's event loop: every conversation the process plays awaits its model calls on one loop.

Each conversation's loop runs as a coroutine here (engine.conversation.run_eval_async), where many
conversations wait on the model at once through one aiohttp session, and hands its database work to the
thread of the pump that claimed it (runs.worker.pump), so claims, leases and fencing tokens stay with the
database code, and everything Django expects of a thread (its own connection, a test's transaction) holds.
A model call then costs the process a turn of the loop instead of a thread and its share of the interpreter
lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from .threads import name_this_thread, started

log = logging.getLogger(__name__)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None

# Threads for what a conversation runs beside the loop because it may call a model while grading (judges,
# semantic checks, named graders, the simulated user: engine.conversation's `blocking`). asyncio's default
# executor has a few threads per core, so a worker's conversations would wait on each other's judges. A
# worker sets it to its own concurrency (runs.worker.tasks), so every conversation it holds can be grading
# at once; threads are started only as they are needed.
grading_threads = 32


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's loop, running in a daemon thread of its own; started on first use (after a fork, so a
    forked child starts its own)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _loop.set_default_executor(
                ThreadPoolExecutor(
                    max_workers=max(1, grading_threads),
                    thread_name_prefix="evalsite-grading",
                    initializer=name_this_thread,
                    initargs=("evalsite-grade",),
                )
            )
            _thread = started(_loop.run_forever, "evalsite-loop")
        return _loop
