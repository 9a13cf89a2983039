"""What the one retry layer (engine.clients) shares with the rest: waits it reports, and endpoint pauses.

A call that must wait before retrying reports the wait to whoever runs the conversation (`retry_hooks`:
a worker stores it on the conversation so the run page can say "waiting for rate limit (retry in 8 s)"),
and sleeps in slices that give up when the conversation should stop (a cancelled run).

A rate-limited endpoint is paused for every caller at once: the call that got the 429 writes "paused until
T" on a `PauseBoard`, and every other call to that endpoint waits until T before sending, instead of each
finding the limit out for itself. The engine's board is in-process (threads); the web app's is backed by
the database so that every worker process sees it (runs.pauses).

The same board carries the other news: an endpoint answering again. A call that gets an answer after
failing (or while others wait) notes "recovered at T", and every call waiting out a backoff of its own
choosing on that endpoint (a dropped connection, a 5xx without Retry-After) stops waiting and retries, so an
endpoint back from an outage is noticed within a wait slice, not after the longest backoff. A wait the
server asked for (Retry-After, a 429's pause) is honoured whole.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

# Waits shorter than this are not reported: jitter between quick retries is not worth a database write.
REPORT_FROM_SECONDS = 1.0
# How often a waiting call looks whether its endpoint has answered someone else meanwhile: a dict read in
# this process (the database board reads its row at most once a second).
RECOVERY_CHECK_SECONDS = 0.25


@dataclass(frozen=True)
class RetryWait:
    """A call about to wait before trying again."""

    endpoint: str
    reason: str  # "waiting for rate limit", "endpoint unavailable (HTTP 503)", "cannot reach endpoint", …
    seconds: float
    attempts: int  # made so far


class RetryStopped(Exception):
    """The conversation should stop (its run was cancelled) while a call waited to retry."""


@dataclass(frozen=True)
class _Hooks:
    on_wait: Callable[[RetryWait], None] | None
    should_stop: Callable[[], bool | str] | None  # true, or a reason: stop


# Per thread of execution: a worker plays one conversation per thread, and each sets its own.
_hooks: ContextVar[_Hooks | None] = ContextVar("evalsite_retry_hooks", default=None)


@contextmanager
def retry_hooks(
    on_wait: Callable[[RetryWait], None] | None = None, should_stop: Callable[[], bool | str] | None = None
) -> Iterator[None]:
    """Within this block, calls report their waits to `on_wait` and stop waiting once `should_stop()`."""
    token = _hooks.set(_Hooks(on_wait, should_stop))
    try:
        yield
    finally:
        _hooks.reset(token)


def report_wait(wait: RetryWait) -> None:
    hooks = _hooks.get()
    if hooks is not None and hooks.on_wait is not None and wait.seconds >= REPORT_FROM_SECONDS:
        hooks.on_wait(wait)


def _pieces(seconds: float, woken: Callable[[], bool] | None) -> Iterator[float]:
    """The slices a wait of `seconds` is slept in: of at most a second when someone may ask the conversation
    to stop (RetryStopped between slices), of RECOVERY_CHECK_SECONDS when `woken()` may end the wait early
    (the endpoint answered another call); the whole wait at once when neither can happen."""
    hooks = _hooks.get()
    should_stop = hooks.should_stop if hooks is not None else None
    if should_stop is None and woken is None:
        yield seconds
        return
    slice_ = RECOVERY_CHECK_SECONDS if woken is not None else 1.0
    remaining = seconds
    while remaining > 0:
        if should_stop is not None and should_stop():
            raise RetryStopped()
        if woken is not None and woken():
            return
        piece = min(slice_, remaining)
        yield piece
        remaining -= piece


def wait_out(seconds: float, sleep: Callable[[float], None], woken: Callable[[], bool] | None = None) -> None:
    """Sleep `seconds` in slices (_pieces), giving up when the conversation should stop or the endpoint is
    back."""
    for piece in _pieces(seconds, woken):
        sleep(piece)


async def async_wait_out(seconds: float, woken: Callable[[], bool] | None = None) -> None:
    """wait_out for the asyncio path: the same slices, awaited instead of sleeping a thread."""
    for piece in _pieces(seconds, woken):
        await asyncio.sleep(piece)


class PauseBoard(Protocol):
    """Per-endpoint "paused until" times (seconds since the epoch, so processes can share them)."""

    def paused_until(self, endpoint: str) -> float:
        """When the endpoint's pause ends; 0 or a past time when it is not paused."""
        ...

    def pause(self, endpoint: str, until: float) -> None:
        """Pause the endpoint until then, unless it is already paused for longer."""
        ...

    def recovered_at(self, endpoint: str) -> float:
        """When the endpoint last answered a call after failing (or while others waited); 0 if never."""
        ...

    def recovered(self, endpoint: str, at: float) -> None:
        """The endpoint answered at `at`: calls waiting out a backoff on it may retry now."""
        ...


class LocalPauseBoard:
    """The pauses of one process, shared by its threads."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._recovered: dict[str, float] = {}
        self._lock = threading.Lock()

    def paused_until(self, endpoint: str) -> float:
        return self._until.get(endpoint, 0.0)  # a dict read is atomic; writers hold the lock

    def pause(self, endpoint: str, until: float) -> None:
        with self._lock:
            if until > self._until.get(endpoint, 0.0):
                self._until[endpoint] = until

    def recovered_at(self, endpoint: str) -> float:
        return self._recovered.get(endpoint, 0.0)

    def recovered(self, endpoint: str, at: float) -> None:
        with self._lock:
            if at > self._recovered.get(endpoint, 0.0):
                self._recovered[endpoint] = at


# Every registry of a process shares this one, so every client of an endpoint sees its pauses.
LOCAL_PAUSES = LocalPauseBoard()
