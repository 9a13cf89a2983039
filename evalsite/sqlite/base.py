"""Django's SQLite backend with writers queued in Python, one at a time per process.

SQLite allows one writer. When a second thread asks for the write lock, SQLite's busy handler sleeps and
retries with growing pauses (1, 2, 5, 10 ... ms), so under ten worker threads a write that should wait
a millisecond waits ten. Taking a process-wide lock first hands the write lock from thread to thread the
moment it is free. Processes still meet at SQLite's own lock, as before.
"""

import threading

from django.db import OperationalError
from django.db.backends.sqlite3 import base

_writer = threading.Lock()
_WAIT_SECONDS = 30  # as long as SQLite's own busy timeout (settings: OPTIONS timeout)
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLAC")


def _acquire() -> None:
    if not _writer.acquire(timeout=_WAIT_SECONDS):
        raise OperationalError("database is locked (waited for another thread's write)")


class Cursor(base.SQLiteCursorWrapper):
    def execute(self, query, params=None):
        # A write outside a transaction is a transaction of its own; inside one, the wrapper holds the lock.
        if self.connection.in_transaction or query.lstrip()[:6].upper() not in _WRITES:
            return super().execute(query, params)
        _acquire()
        try:
            return super().execute(query, params)
        finally:
            _writer.release()


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_writer = False

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=Cursor)

    def _start_transaction_under_autocommit(self):
        _acquire()
        self._holds_writer = True
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer()
            raise

    def _release_writer(self) -> None:
        if self._holds_writer:
            self._holds_writer = False
            _writer.release()

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
        try:
            return super()._close()
        finally:
            self._release_writer()
