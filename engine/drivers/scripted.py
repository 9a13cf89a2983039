"""Scripted conversations: `input` (messages sent in order, graded per turn against `ground_truth`) and
`turns` (messages with checks on chosen turns). Every message is sent whatever the replies, unless
`on_turn_failure: stop`; the score aggregates every graded turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..outcomes import Status
from ..results import TurnRecord
from ..schema import Eval
from ..text import SCORE_EPSILON, against, turns_passed
from .base import Defaults, Driver, Step, TurnScores, Verdict

AGGREGATIONS = {"mean": lambda scores: sum(scores) / len(scores), "min": min, "max": max}


class Scripted(Driver):
    graded_per_turn = True

    def __init__(self, ev: Eval, index: int, defaults: Defaults) -> None:
        self.ev = ev
        self.threshold = ev.pass_threshold if ev.pass_threshold is not None else defaults.pass_threshold
        if self.threshold is None:
            self.threshold = 1.0
        self.aggregation = ev.aggregation or "mean"
        self.stop_on_failure = ev.on_turn_failure == "stop"
        steps = self.script(ev, f"evals[{index}]")
        # The eval's own checks and a single ground truth grade the last reply.
        steps[-1] = replace(
            steps[-1],
            checks=[*steps[-1].checks, *(ev.checks or [])],
            grade_conversation=ev.ground_truth if isinstance(ev.ground_truth, str) else None,
        )
        self.steps = steps
        self.multi_turn = len(steps) > 1

    @staticmethod
    def script(ev: Eval, node: str) -> list[Step]:
        """One step per message to send, in order."""
        if ev.turns is not None:
            return [
                Step(turn.input, turn.checks or [], f"{node}.turns[{i}]") for i, turn in enumerate(ev.turns)
            ]
        inputs = [ev.input] if isinstance(ev.input, str) else ev.input
        truths = ev.ground_truth if isinstance(ev.ground_truth, list) else [None] * len(inputs)
        return [
            Step(
                text,
                [],
                f"{node}.input[{i}]" if isinstance(ev.input, list) else f"{node}.input",
                ground_truth=truth,
            )
            for i, (text, truth) in enumerate(zip(inputs, truths, strict=True))
        ]

    def first(self) -> Step:
        return self.steps[0]

    def next(self, step: Step, turns: Sequence[TurnRecord]) -> Step | None:
        turn = turns[-1]
        if self.stop_on_failure and turn.passed is False:
            return None
        return self.steps[turn.turn] if turn.turn < len(self.steps) else None

    def out_of_script(self, turns: Sequence[TurnRecord]) -> bool:
        return not (self.stop_on_failure and turns[-1].passed is False)

    def units(self, turns: Sequence[TurnRecord]) -> list[tuple[float, bool]]:
        """Every graded turn, as (score, passed): its grade and its checks together, so turns_total counts
        turns. A check that passed its own threshold counts 1 (a judge's 0.9 over a 0.5 threshold must not
        fail the conversation); a failed one keeps its score as partial credit."""
        units = []
        for turn in turns:
            scores = [turn.grade.score] if turn.grade is not None else []
            scores += [
                1.0 if check.passed else min(1.0, max(0.0, check.score or 0.0)) for check in turn.checks
            ]
            if scores:
                passed = (turn.grade is None or turn.grade.passed) and all(c.passed for c in turn.checks)
                units.append((sum(scores) / len(scores), passed))
        return units

    def turn_scores(self, turns: Sequence[TurnRecord]) -> TurnScores:
        stopped = len(turns) < len(self.steps)
        return TurnScores([score for score, _ in self.units(turns)], self.aggregation, stopped)

    def tally(self, turns: Sequence[TurnRecord]) -> tuple[int, int]:
        """The turns graded, and those that passed, as each turn's mark says: a turn of a per-turn row that
        named graders alone grade (Letta's) counts as theirs say, though the verdict is their pass rule's."""
        marks = [turn.passed for turn in turns if turn.grade is not None or turn.checks or turn.grades]
        return sum(1 for ok in marks if ok), len(marks)

    def verdict(self, turns: Sequence[TurnRecord]) -> Verdict:
        """The graded turns that passed, and the score against the eval's pass_threshold: "2 of 3 turns
        passed, score 0.67 ≥ 0.60", "2 of 3 turns passed, score 0.67 < 1.00"; the score is left out when
        every turn passed with full marks ("every turn passed: 2 of 2"), as no line can matter then."""
        units = self.units(turns)
        if not units:  # graded by named graders alone (engine.conversation combines their verdict)
            return Verdict(Status.PASSED, None, "no checks of its own")
        score = AGGREGATIONS[self.aggregation]([score for score, _ in units])
        passed = sum(1 for _, ok in units if ok)
        stopped = len(turns) < len(self.steps)
        # A turn with nothing to grade is no graded one: the count says so when the conversation has such turns.
        parts = [turns_passed(passed, len(units), "turn" if len(units) == len(turns) else "graded turn")]
        if stopped:
            parts.append(f"stopped after turn {len(turns)}")
        if passed < len(units) or score < 1.0 - SCORE_EPSILON:
            parts.append(against(score, self.threshold))
        # A mean of scores that each reached the line may fall under it by a rounding error (three 0.7s).
        reached = score >= self.threshold - SCORE_EPSILON
        outcome = Status.PASSED if reached and not stopped else Status.FAILED
        return Verdict(outcome, score, ", ".join(parts))
