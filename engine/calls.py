"""Model calls in flight, so that a call the endpoint sits on can be told apart from a slow run.

Whoever plays a conversation may watch its calls (`watching(calls)`): engine.clients then notes each
request as it goes out and as it comes back, in memory, at the cost of a dict entry. Someone else (the
worker's pump, the CLI's runner) looks now and then (`slow_calls`) for calls out longer than a few times
the run's usual latency, and only those cost anything more: a database note, a line on stderr.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# A call is slow once it has been out this many times the run's median latency so far, and at least the
# watcher's minimum (so that a run of sub-second replies does not call a reply of a few seconds slow).
SLOW_FACTOR = 4.0
SLOW_MIN_SECONDS = 10.0
# How many of the latest answered calls the median is taken over: the run's usual latency lately.
LATENCY_SAMPLE = 200

_keys = itertools.count()


class Latencies:
    """The latencies of a run's latest answered calls, shared by its conversations' watches."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds: deque[float] = deque(maxlen=LATENCY_SAMPLE)

    def median(self) -> float | None:
        sample = list(self.seconds)  # a deque is appended to from other threads; a copy is atomic
        return statistics.median(sample) if sample else None

    def slow_after(self, minimum: float = SLOW_MIN_SECONDS) -> float:
        """Seconds out after which a call of this run counts as slow."""
        median = self.median()
        return max(minimum, SLOW_FACTOR * median) if median is not None else minimum


class Calls:
    """The calls one conversation has out: when each went out (time.monotonic), by a key of its own."""

    __slots__ = ("out", "latencies")

    def __init__(self, latencies: Latencies) -> None:
        self.out: dict[int, float] = {}
        self.latencies = latencies

    def oldest(self) -> float | None:
        """When the longest-out call went out; None when none is out."""
        return min(self.out.copy().values(), default=None)  # copied: calls come and go in other threads


_watched: ContextVar[Calls | None] = ContextVar("evalsite_calls", default=None)


@contextmanager
def watching(calls: Calls | None) -> Iterator[None]:
    """Within this block, model calls are noted in `calls` (None: not watched)."""
    token = _watched.set(calls)
    try:
        yield
    finally:
        _watched.reset(token)


def going_out() -> int | None:
    """A request is sent: its key, for `came_back`; None when nobody watches."""
    calls = _watched.get()
    if calls is None:
        return None
    key = next(_keys)
    calls.out[key] = time.monotonic()
    return key


def came_back(key: int | None, *, answered: bool) -> None:
    """The request `going_out` noted has ended; an answered one counts towards the usual latency (a timeout
    or a refusal does not: an endpoint that hangs would otherwise raise the bar for calling it slow)."""
    if key is None:
        return
    calls = _watched.get()
    if calls is None:
        return
    started = calls.out.pop(key, None)
    if started is not None and answered:
        calls.latencies.seconds.append(time.monotonic() - started)


@dataclass(frozen=True)
class Slow:
    """Calls out longer than their run's usual latency: how many, and how long the longest has been out."""

    count: int
    seconds: float

    def __str__(self) -> str:
        calls = "1 call" if self.count == 1 else f"{self.count} calls"
        return f"{calls} waiting on the model for {self.seconds:.0f} s"


def slow_since(calls: Calls, now: float, minimum: float = SLOW_MIN_SECONDS) -> float | None:
    """When the conversation's longest-out call went out, if it is slow by its run's latencies; else None."""
    oldest = calls.oldest()
    # The minimum first: the median is worked out only for the few calls out longer than that.
    if oldest is None or now - oldest < minimum or now - oldest < calls.latencies.slow_after(minimum):
        return None
    return oldest


def slow_calls(watched: Iterable[Calls], minimum: float = SLOW_MIN_SECONDS) -> Slow | None:
    """The slow calls of these conversations, or None when none is slow."""
    now = time.monotonic()
    since = [s for calls in watched if (s := slow_since(calls, now, minimum)) is not None]
    return Slow(len(since), now - min(since)) if since else None


class SlowReporter:
    """Passes slow calls on to `say` as a line when their number changes, and every SAY_EVERY seconds while
    it does not: told every second, a terminal would scroll with the same news."""

    SAY_EVERY = 15

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.said: tuple[int, int] | None = None

    def __call__(self, slow: Slow) -> None:
        said = (slow.count, int(slow.seconds // self.SAY_EVERY))
        if said != self.said:
            self.said = said
            self.say(str(slow))
