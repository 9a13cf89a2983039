"""Conversation trees (vibecheck's format): the eval's prompt, then follow-ups chosen by the failed checks,
until a level passes or no follow-up is left."""

from __future__ import annotations

from collections.abc import Sequence

from ..checks import choose_followup
from ..outcomes import Status
from ..results import TurnRecord
from ..schema import Check, Eval, followup_depth
from ..text import plural
from .base import Defaults, Driver, Step, Verdict, checks_score


class Tree(Driver):
    graded_per_turn = False  # the deciding turn grades it: a follow-up is sent because a turn failed

    def __init__(self, ev: Eval, index: int, defaults: Defaults) -> None:
        self.ev = ev
        self.node = f"evals[{index}]"
        self.multi_turn = followup_depth(ev.checks or []) > 0

    def first(self) -> Step:
        return Step(self.ev.prompt, self.ev.checks, self.node)

    def next(self, step: Step, turns: Sequence[TurnRecord]) -> Step | None:
        turn = turns[-1]
        if turn.passed:
            return None
        followup = choose_followup(step.checks, turn.checks)
        if followup is None:
            return None
        item, reason = followup
        return Step(item.prompt, item.checks, _node_of(item, step), f"{reason} on turn {turn.turn}")

    def out_of_script(self, turns: Sequence[TurnRecord]) -> bool:
        return not turns[-1].passed  # a failed turn ends the tree only when it has no follow-up for it

    def verdict(self, turns: Sequence[TurnRecord]) -> Verdict:
        # The score is the deciding turn's: the mean of its check scores (a passing turn whose judge said 0.8
        # scores 0.8), so iterations and gates see how well it did; pass or fail is the checks' own.
        last = turns[-1]
        score = checks_score(last.checks)
        if last.passed:
            return Verdict(
                Status.PASSED, 1.0 if score is None else score, f"passed on turn {last.turn}",
                passed_on_turn=last.turn,
            )  # fmt: skip
        return Verdict(
            Status.FAILED, 0.0 if score is None else score, f"failed after {plural(last.turn, 'turn')}"
        )


def _node_of(item: Check, step: Step) -> str:
    for i, candidate in enumerate(step.checks):
        if candidate is item:
            return f"{step.node}.checks[{i}]"
        for j, member in enumerate(candidate.or_ or ()):
            if member is item:
                return f"{step.node}.checks[{i}].or[{j}]"
    return step.node
