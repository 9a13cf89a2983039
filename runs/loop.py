"""The worker process's event loop: every conversation the process plays awaits its model calls on one loop.

A conversation still belongs to the worker thread that claimed it (runs.execution): that thread does all its
database work (the claim, each turn's store, the finish, the dispatch that follows), as before, so claims,
leases and fencing tokens are untouched, and so is everything Django expects of a thread (its own
connection, a test's transaction). What moved is the conversation loop itself: it runs as a coroutine on
this process's event loop (engine.conversation.run_eval_async), where many conversations wait on the model
at once through one aiohttp session, and it hands each database write back to its thread (`Owner.call`),
which sleeps in between. A model call then costs the process the loop's few hundred microseconds instead of a
thread's openai client and its share of the interpreter lock (figures in the README's Benchmarks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None

# Threads for what a conversation runs beside the loop because it may call a model while grading (judges,
# semantic checks, named graders, the simulated user: engine.conversation's `blocking`). asyncio's default
# executor has min(32, cores + 4) threads, 6 on two cores: a worker playing 100 conversations that each
# wait a second on a judge would grade six at a time. A worker sets it to its own concurrency (runs.tasks),
# so every conversation it holds can be grading at once; threads are started only as they are needed.
grading_threads = 32


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's loop, running in a daemon thread of its own; started on first use (after a fork, so a
    forked child starts its own)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _loop.set_default_executor(
                ThreadPoolExecutor(max_workers=max(1, grading_threads), thread_name_prefix="evalsite-grading")
            )
            _thread = threading.Thread(target=_loop.run_forever, name="evalsite-loop", daemon=True)
            _thread.start()
        return _loop


_DONE = object()


class Owner:
    """The thread a conversation belongs to, serving the database work its coroutine asks for.

    `play` runs the coroutine on the process's loop and, until it ends, runs in this thread whatever the
    coroutine hands over: `call` (awaited: a turn is stored before the next is asked) and `post` (not
    awaited: a note that a call waits to retry)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False

    async def call(self, fn: Callable, *args):
        """fn(*args) in the owner thread; its result or exception comes back to the awaiting coroutine."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(fn, args, future)
        return await asyncio.wrap_future(future)

    def post(self, fn: Callable, *args) -> None:
        """fn(*args) in the owner thread, without waiting for it; an exception is logged."""
        self._put(fn, args, None)

    def _put(self, fn: Callable, args: tuple, future: concurrent.futures.Future | None) -> None:
        with self._lock:
            if not self._closed:
                self._jobs.put((fn, args, future))
                return
        # A background check still asking after its conversation ended: nobody serves it now.
        if future is not None:
            future.set_exception(RuntimeError("the conversation has ended"))

    def play(self, coroutine: Coroutine):
        """Run the coroutine on the loop and serve its calls here until it ends; its result, or its exception
        raised here."""
        done = asyncio.run_coroutine_threadsafe(coroutine, event_loop())
        done.add_done_callback(lambda _: self._jobs.put(_DONE))
        while (job := self._jobs.get()) is not _DONE:
            self._run(*job)
        with self._lock:
            self._closed = True
        while True:  # what was handed over just before the end
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            self._run(*job)
        return done.result()

    @staticmethod
    def _run(fn: Callable, args: tuple, future: concurrent.futures.Future | None) -> None:
        if future is not None and not future.set_running_or_notify_cancel():
            return
        try:
            value = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, which decides
            if future is None:
                log.exception("%s failed", getattr(fn, "__name__", fn))
            else:
                future.set_exception(exc)
        else:
            if future is not None:
                future.set_result(value)
