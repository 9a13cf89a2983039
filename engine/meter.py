"""The current turn's meter: which endpoints without prices its model calls went to.

The conversation loop starts a Meter for each turn it plays (`metering`), and one for the graders that judge a
conversation after its last turn; the clients note in it each request they send (`sent`), whichever thread
makes the call: the threads that grade a turn run in a copy of its context, and so see the same Meter. A turn's record names the endpoints without prices that its calls went to
(TurnRecord.unpriced), so that a run's cost is unknown, or a lower bound, only when a call was made to one of
them. Whoever plays a run may also have every such endpoint noted in a set of its own as the request goes out
(`calling`), before any turn ends: the CLI's progress line, and its last line when the run is interrupted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Meter:
    """One turn's calls: the endpoints without prices they went to."""

    __slots__ = ("unpriced",)

    def __init__(self) -> None:
        self.unpriced: set[str] = set()


_meter: ContextVar[Meter | None] = ContextVar("evalsite_meter", default=None)
_called: ContextVar[set[str] | None] = ContextVar("evalsite_unpriced_called", default=None)


def metering() -> Meter:
    """A new turn begins: its calls are noted in the Meter returned, until the next turn's."""
    meter = Meter()
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
