"""How an outcome shows: a status as its symbol, and a conversation graded per turn as its ✓✗ strip, each mark
passed or failed as stored or as a reviewer overrode it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.drivers import GRADED_PER_TURN
from engine.text import plural

from ..models import Conversation, Turn

# The one mapping from a status to its symbol: iteration strips, turn strips, a transcript's verdict, gates and
# check badges (through the `symbol` template filter, runs/templatetags/runs_display.py). An error or an
# unfinished iteration must not read as a failure.
STATUS_SYMBOLS = {
    "passed": "✓",
    "failed": "✗",
    "error": "!",
    "cancelled": "–",
    "running": "●",
    "queued": "○",
}


def symbol(status: str) -> str:
    return STATUS_SYMBOLS.get(status, "?")


@dataclass(frozen=True)
class Mark:
    """One graded turn of a conversation, as ✓ or ✗ in its strip."""

    turn: int
    passed: bool
    title: str

    @property
    def symbol(self) -> str:
        return symbol("passed" if self.passed else "failed")


def turn_marks(turns: Iterable[Turn], reviewed: dict | None = None) -> list[Mark]:
    """One mark per graded turn, in order, passed or failed as the engine stored it (Turn.passed: its grade
    against the ground truth and its checks together), or as a reviewer's overrides made it (`reviewed`:
    Conversation.original's reviewed_turns, {"2": true}). Ungraded turns (passed is None) have none."""
    reviewed = reviewed or {}
    marks = []
    for turn in turns:
        if turn.passed is None:
            continue
        record = turn.record
        passed = reviewed.get(str(record["turn"]), turn.passed)
        grade, checks = record.get("grade"), record.get("checks") or []
        parts = [f"{grade.get('grader') or 'grade'} {grade['score']:.2f}"] if grade else []
        if checks:
            parts.append(f"{sum(check['passed'] for check in checks)}/{plural(len(checks), 'check')}")
        title = f"Turn {record['turn']} {'passed' if passed else 'failed'}: {', '.join(parts)}"
        if str(record["turn"]) in reviewed:
            title += " (overridden by a reviewer)"
        marks.append(Mark(record["turn"], passed, title))
    return marks


def strip(conversation: Conversation, marks: list[Mark]) -> dict | None:
    """'2/3 ✓✓✗': the stored count once the conversation is over, the marks so far while it runs."""
    if conversation.style not in GRADED_PER_TURN:
        return None
    if conversation.turns_total == 0 and not marks:
        return None  # graded by its named graders alone: their columns say it
    if conversation.turns_total is not None and (conversation.turns_total or not marks):
        passed, total = conversation.turns_passed or 0, conversation.turns_total
    elif marks:
        passed, total = sum(mark.passed for mark in marks), len(marks)
    else:
        return None
    return {"passed": passed, "total": total, "marks": marks}
