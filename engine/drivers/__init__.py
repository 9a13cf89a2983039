"""Conversation drivers, one module per style, registered by style in one table.

Every style is played by the same loop (engine.conversation.run_eval); base.py says what a driver gives
it. A new style: its keys in engine.schema (Eval, Style), a driver module here whose class declares its
traits (graded_per_turn), and its line in DRIVERS.
"""

from __future__ import annotations

from ..schema import Eval, Style
from .base import Defaults, Driver, Ending, Step, TurnScores, UserAsk, Verdict
from .given import Given
from .history import History
from .scripted import Scripted
from .simulated import Simulated
from .tree import Tree

DRIVERS: dict[Style, type[Driver]] = {
    Style.TREE: Tree,
    Style.SCRIPTED: Scripted,
    Style.TURNS: Scripted,
    Style.HISTORY: History,
    Style.SIMULATED: Simulated,
    Style.GIVEN: Given,
}


# The styles whose turns are each graded on their own (Driver.graded_per_turn).
GRADED_PER_TURN = frozenset(style for style, driver in DRIVERS.items() if driver.graded_per_turn)


def driver_for(ev: Eval, index: int, defaults: Defaults) -> Driver:
    return DRIVERS[ev.style](ev, index, defaults)


__all__ = [
    "DRIVERS",
    "GRADED_PER_TURN",
    "Defaults",
    "Driver",
    "Ending",
    "Step",
    "TurnScores",
    "UserAsk",
    "Verdict",
    "driver_for",
]
