"""What every tool source shares: the outcome of a call, and what a source may read besides it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..results import Usage
from ..schema import Tool


@dataclass(frozen=True)
class Outcome:
    """A call's result, or the tool's error (sent back as the result's text, marked as an error)."""

    result: Any = None
    error: str | None = None
    source: str = ""
    usage: Usage | None = None  # what a source that calls a model (an `llm` tool) spent on this call
    cost: float = 0.0


@dataclass
class CallScope:
    """What a source may read besides the call: the conversation so far (this turn's exchange included), the
    eval, the engine's context (judge, code runner, attached files) and state kept per conversation."""

    eval_id: str
    conversation: list[dict]
    ctx: Any = None  # engine.conversation.EngineContext
    files: Mapping[str, str] = field(default_factory=dict)
    state: dict = field(default_factory=dict)  # per source, per conversation (an llm tool's memory)


# A source: the tool, the parsed arguments and the scope; its Outcome, or None when it has no answer for
# this call (the next source is asked). It may be a coroutine function (awaited on the conversation's loop).
Source = Callable[[Tool, dict, CallScope], Outcome | None | Awaitable[Outcome | None]]
