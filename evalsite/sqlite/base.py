"""Django's SQLite backend with writers queued, one at a time, across threads and processes.

SQLite allows one writer. When a second writer asks for the write lock, SQLite's busy handler sleeps and
retries with growing pauses, so with many worker threads a write that should wait a moment waits far
longer. Here a writer first takes a process-wide thread lock, then an exclusive flock on a
file beside the database, which the kernel hands to the next waiting process the moment it is released
(and releases by itself if its holder dies). So several worker processes and the web server share the
database without meeting SQLite's busy handler; it remains the fallback for programs outside evalsite.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading

from django.db import OperationalError
from django.db.backends.sqlite3 import base

_WAIT_SECONDS = 30  # as long as SQLite's own busy timeout (settings: OPTIONS timeout)
_waits = threading.local()  # a thread's own bound on that wait (writes_wait_at_most)
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLAC")


class WriterLock:
    """One writer at a time for one database file: a thread lock, then a flock held for the transaction.

    The flock's file is opened once per process (a forked child reopens it: a descriptor shared with the
    parent would share the lock too). A database without a file (":memory:") needs only the thread lock.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.thread_lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    def acquire(self) -> None:
        if not self.thread_lock.acquire(timeout=getattr(_waits, "seconds", _WAIT_SECONDS)):
            raise OperationalError("database is locked (waited for another thread's write)")
        if self.path is None:
            return
        try:
            if self._pid != os.getpid():
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                self._pid = os.getpid()
            # Blocking, without a timeout: flock has none, the holder is another evalsite process inside a
            # short transaction, and if it dies the kernel releases the lock.
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self.thread_lock.release()
            raise

    def release(self) -> None:
        try:
            if self.path is not None and self._pid == os.getpid():
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.thread_lock.release()


_locks: dict[str, WriterLock] = {}
_locks_guard = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child (Celery's prefork pool) inherits the parent's thread locks in whatever state they
    # were, and its flock descriptor, which shares the parent's lock (and would keep it held if the parent
    # died holding it): start afresh; the child opens its own descriptor on first use.
    for lock in _locks.values():
        lock.thread_lock = threading.Lock()
        if lock._fd is not None:
            with contextlib.suppress(OSError):
                os.close(lock._fd)
        lock._fd = None
        lock._pid = 0


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def writes_wait_at_most(seconds: float):
    """This thread's writes wait at most `seconds` for another thread's (then raise OperationalError, as a
    longer wait would): for a caller that would rather try again later than wait."""
    before = getattr(_waits, "seconds", None)
    _waits.seconds = seconds
    try:
        yield
    finally:
        if before is None:
            del _waits.seconds
        else:
            _waits.seconds = before


def writer_lock(database: str) -> WriterLock:
    """The lock of one database (tests use another database than the server, in the same process)."""
    in_memory = database == ":memory:" or "mode=memory" in database
    key = database if in_memory else os.path.abspath(database)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = WriterLock(None if in_memory else key + ".writer-lock")
        return lock


class Cursor(base.SQLiteCursorWrapper):
    writer: WriterLock

    def execute(self, query, params=None):
        # A write outside a transaction is a transaction of its own; inside one, the wrapper holds the lock.
        if self.connection.in_transaction or query.lstrip()[:6].upper() not in _WRITES:
            return super().execute(query, params)
        self.writer.acquire()
        try:
            return super().execute(query, params)
        finally:
            self.writer.release()


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_writer = False

    @property
    def writer(self) -> WriterLock:
        return writer_lock(str(self.settings_dict["NAME"]))

    def get_new_connection(self, conn_params):
        # Opening runs the init command (PRAGMA journal_mode=WAL), which another process's commit can
        # find busy; once per thread, so it queues with the writers rather than meet SQLite's busy handler.
        writer = self.writer
        writer.acquire()
        try:
            return super().get_new_connection(conn_params)
        finally:
            writer.release()

    def create_cursor(self, name=None):
        cursor = self.connection.cursor(factory=Cursor)
        cursor.writer = self.writer
        return cursor

    def _start_transaction_under_autocommit(self):
        writer = self.writer
        writer.acquire()
        self._holds_writer = writer
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer()
            raise

    def _release_writer(self) -> None:
        writer = self._holds_writer
        if writer:
            self._holds_writer = False
            writer.release()

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_writer()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_writer()

    def _close(self):
        # The last connection to close checkpoints the log and removes it, under SQLite's exclusive lock.
        if self._holds_writer or self.connection is None:
            try:
                return super()._close()
            finally:
                self._release_writer()
        writer = self.writer
        writer.acquire()
        try:
            return super()._close()
        finally:
            writer.release()
