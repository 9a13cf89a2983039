"""The sources that answer from the suite alone, with no I/O: a static `returns`, `responses` rules on the
arguments, an `error`. A stub never touches the network."""

from __future__ import annotations

from ..schema import Tool
from .base import CallScope, Outcome
from .matching import matches_all


def from_returns(tool: Tool, arguments: dict, scope: CallScope) -> Outcome:
    return Outcome(result=tool.returns, source="returns")


def from_error(tool: Tool, arguments: dict, scope: CallScope) -> Outcome:
    return Outcome(error=tool.error, source="error")


def from_rules(tool: Tool, arguments: dict, scope: CallScope) -> Outcome | None:
    """The first rule whose `when` matches the arguments; None when none does (the next source answers)."""
    for rule in tool.responses or ():
        if matches_all(rule.when, arguments)[0]:
            if rule.error is not None:
                return Outcome(error=rule.error, source="responses")
            return Outcome(result=rule.returns, source="responses")
    return None
