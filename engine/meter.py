"""The current turn's meter: what its model calls have spent so far, which endpoints without prices they went to,
and the run's cost limit, asked before each call that grades the turn.

The conversation loop starts a Meter for each turn it plays (`metering`), and one for the graders that judge a
conversation after its last turn; the clients note in it each request they send (`sent`) and what each answer
cost (`answered`), whichever thread makes the call: the threads that grade a turn run in a copy of its context,
and so see the same Meter. A turn's record names the endpoints without prices that its calls went to
(TurnRecord.unpriced), so that a run's cost is unknown, or a lower bound, only when a call was made to one of
them. Whoever plays a run may also have every such endpoint noted in a set of its own as the request goes out
(`calling`), before any turn ends: the CLI's progress line, and its last line when the run is interrupted.

A turn's judges may make many calls. Each asks `before_grading_call` first: once the run's spend, with what
this turn has spent so far, has reached its limit, LimitReached stops the grading there, and the conversation
stops with its turn kept, ungraded, with what it cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# Asked with what the turn has spent so far: false goes on; true, or the limit in words, stops the grading.
Limit = Callable[[float], "bool | str"]


class LimitReached(Exception):
    """The run's cost limit was reached while a turn was being graded: no more of its grading calls are made."""

    def __init__(self, why: bool | str) -> None:
        super().__init__(why if isinstance(why, str) and why else "cost limit reached")
        self.why = why


class Meter:
    """One turn's calls: what they have spent (USD), the endpoints without prices they went to, and the limit
    asked before each grading call (None: none)."""

    __slots__ = ("spent", "unpriced", "limit")

    def __init__(self, limit: Limit | None = None) -> None:
        self.spent = 0.0
        self.unpriced: set[str] = set()
        self.limit = limit


_meter: ContextVar[Meter | None] = ContextVar("evalsite_meter", default=None)
_called: ContextVar[set[str] | None] = ContextVar("evalsite_unpriced_called", default=None)


def metering(limit: Limit | None = None) -> Meter:
    """A new turn begins: its calls are noted in the Meter returned, until the next turn's."""
    meter = Meter(limit)
    _meter.set(meter)
    return meter


@contextmanager
def metered(meter: Meter) -> Iterator[Meter]:
    """Within this block, calls are noted in `meter` (the graders after a conversation's last turn)."""
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


@contextmanager
def calling(called: set[str]) -> Iterator[None]:
    """Within this block, the endpoints without prices that requests go out to are also added to `called`."""
    token = _called.set(called)
    try:
        yield
    finally:
        _called.reset(token)


def sent(endpoint: str, priced: bool) -> None:
    """A request goes out to `endpoint`: noted when it has no prices, since its calls count 0 in every cost."""
    if priced:
        return
    meter, called = _meter.get(), _called.get()
    if meter is not None:
        meter.unpriced.add(endpoint)
    if called is not None:
        called.add(endpoint)


def answered(cost: float) -> None:
    """An answer came, which cost `cost`: added to what the current turn has spent."""
    meter = _meter.get()
    if meter is not None:
        meter.spent += cost


def before_grading_call() -> None:
    """A judge (or an embedding) is about to be called to grade the turn: LimitReached when the run's limit,
    asked with what the turn has spent so far, says stop."""
    meter = _meter.get()
    if meter is None or meter.limit is None:
        return
    why = meter.limit(meter.spent)
    if why:
        raise LimitReached(why)
