"""Waiting out a database that went away: a PostgreSQL restart, a dropped connection, a busy SQLite file.

A worker keeps its claims and its conversations' state in memory while the database is away, as it does
while Redis is: the thread whose write failed closes its broken connection, waits with a capped backoff and
writes again once the database answers. Nothing here decides whether a write may be repeated: the callers'
writes are conditional on their claim, or check what a write that failed as it committed left behind.
Pages use it too (evalsite.middleware answers 503 while the database is away), so it lives in runs, not in
the worker runtime.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

T = TypeVar("T")

# The first wait, doubled after each failure up to the last. The pool tries each new connection itself too
# (settings: its reconnect is kept short so that one of these tries finds the database within seconds).
FIRST_WAIT = 0.25
LONGEST_WAIT = 2.0


# SQLite raises OperationalError for a schema that does not match the code, too (PostgreSQL raises
# ProgrammingError): a database not migrated to this version, which no amount of waiting brings back.
_SCHEMA_MISMATCH = ("no such table", "no such column", "has no column named")


def unavailable(exc: BaseException) -> bool:
    """Whether the database failed to answer, rather than refused what it was asked: a lost or refused
    connection, a pool with no connection to give (PostgreSQL), a locked file (SQLite)."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    return not any(words in str(exc) for words in _SCHEMA_MISMATCH)


def drop_connection() -> None:
    """Close this thread's connection, broken or not, so that the next query asks the pool (or the server)
    for a new one. Closing a broken connection can fail in its turn; it is gone either way."""
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - a connection that cannot even be closed is discarded all the same
        connection.connection = None


def patiently(
    work: Callable[[], T], *, what: str, stop: threading.Event | None = None, on_back: Callable | None = None
) -> T:
    """work(), done again after each database outage until it gets through; `what` names it in the log.

    Inside a caller's transaction (a test's) nothing can be done again: the error is raised. `stop` set gives
    up, raising the last error (a stopping worker hands its conversations over). `on_back` is called once the
    database answers again, before `work` is tried again: the caller's chance to check what the outage did
    to writes that were made just before it.
    """
    wait, since = FIRST_WAIT, None
    while True:
        try:
            if since is not None and on_back is not None:
                on_back()
            result = work()
        except Exception as exc:
            if not unavailable(exc) or connection.in_atomic_block or (stop is not None and stop.is_set()):
                raise
            if since is None:
                since = time.monotonic()
                log.warning("the database is unavailable (%s): %s waits for it", _first_line(exc), what)
            drop_connection()
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT)
            continue
        if since is not None:
            log.warning("the database is back after %.1f s: %s goes on", time.monotonic() - since, what)
        return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
