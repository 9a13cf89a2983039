"""What the pump's thread is handed: one frozen message per kind, put on its queue from the event loop or a
Celery task and dispatched on type (Pump._round).

A turn's path: the engine grades it (engine.conversation), the conversation's `on_turn` puts a StoreTurn
(Pump.store), the next round writes every StoreTurn it took together (writes.write_turns, then
sql_turns.store_turns) and answers each on its `stored` future.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass

from engine.results import TurnRecord

from .playing import Playing


@dataclass(frozen=True)
class Offer:
    """A conversation offered to this worker, its slot taken already: claim it and play it."""

    conversation_id: int


@dataclass(frozen=True)
class StoreTurn:
    """A graded turn to store; `stored` answers True once it is committed, False when the conversation is no
    longer ours (nothing written)."""

    conversation_id: int
    attempt: int
    turn: TurnRecord
    stored: concurrent.futures.Future


@dataclass(frozen=True)
class Call:
    """fn(*args) in the pump's thread; its result or exception goes to `result`, or to the log when None."""

    fn: Callable
    args: tuple
    result: concurrent.futures.Future | None = None


@dataclass(frozen=True)
class Ended:
    """A conversation's coroutine is done (`done` holds its result or exception): write its end, free its slot."""

    playing: Playing
    done: concurrent.futures.Future


Message = Offer | StoreTurn | Call | Ended
