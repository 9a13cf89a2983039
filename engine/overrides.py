"""Reviewers' overrides: a person overturns one check's outcome, with a note, and the conversation's verdict
follows by its own rules.

Stored turns are never changed. An override names one outcome of one turn, `checks[i]` (a top-level check
of that turn, an `or` block counting as one) or `grade` (the turn's ground-truth grade), and the outcome the
reviewer gives it. `apply` gives the turns as the reviewer reads them: the outcome flipped, its score 1 or 0,
marked `overridden`, and the turn's pass recomputed. `reverdict` replays the conversation's driver over those
turns, so each style keeps its rule:

- a tree that now passes on an earlier turn passes there: the follow-ups after it would never have been sent,
  so they no longer count; one whose deciding turn now fails is failed (the follow-up it would have sent was
  never played);
- a tree whose reviewed outcomes would have chosen another follow-up stops where the stored one parts from it;
- scripted turns count every turn as before (with `on_turn_failure: stop`, a turn that now fails ends it);
- a simulated conversation is decided by its final checks, as when it ran;
- named graders' results stand as graded, and the eval's pass rule combines them with the reviewed checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .drivers import Driver, Verdict
from .outcomes import Status
from .results import CheckResult, GraderResult, OverrideRecord, TurnRecord
from .turn_grading import graded_verdict, turn_passed

GRADE = "grade"


class OverrideError(ValueError):
    """An override that names no outcome of the conversation, or gives the one it already has."""


@dataclass(frozen=True)
class Target:
    """One outcome a reviewer can overturn: its key (`checks[0]`, `grade`), how it reads, and its outcome."""

    key: str
    label: str
    passed: bool


def targets(turn: TurnRecord) -> list[Target]:
    """The outcomes of a turn a reviewer can overturn, as the run gave them."""
    found = [Target(f"checks[{i}]", check.label, check.passed) for i, check in enumerate(turn.checks)]
    if turn.grade is not None:
        found.append(Target(GRADE, f"ground truth ({turn.grade.grader or 'grade'})", turn.grade.passed))
    return found


def check(turns: Sequence[TurnRecord], turn: int, target: str, passed: bool) -> Target:
    """The outcome an override names, as the run gave it; OverrideError when there is none, or when the
    override would give it the outcome it already has."""
    record = next((item for item in turns if item.turn == turn), None)
    if record is None:
        raise OverrideError(f"the conversation has no turn {turn}")
    found = next((item for item in targets(record) if item.key == target), None)
    if found is None:
        raise OverrideError(f"turn {turn} has no outcome {target!r} to override")
    if found.passed == passed:
        raise OverrideError(f"{found.label} on turn {turn} already {'passed' if passed else 'failed'}")
    return found


def apply(turns: Sequence[TurnRecord], overrides: Sequence[OverrideRecord]) -> list[TurnRecord]:
    """The turns as the reviewer reads them. Overrides naming nothing (a record of another shape) are ignored."""
    by_turn: dict[int, dict[str, bool]] = {}
    for item in overrides:
        by_turn.setdefault(item.turn, {})[item.target] = item.passed
    reviewed = []
    for turn in turns:
        outcomes = by_turn.get(turn.turn)
        if not outcomes:
            reviewed.append(turn)
            continue
        checks = [
            _flip(result, outcomes[f"checks[{i}]"]) if f"checks[{i}]" in outcomes else result
            for i, result in enumerate(turn.checks)
        ]
        grade = turn.grade
        if grade is not None and GRADE in outcomes:
            grade = grade.model_copy(
                update={"passed": outcomes[GRADE], "score": float(outcomes[GRADE]), "overridden": True}
            )
        passed = turn_passed(checks, grade, turn.grades)
        reviewed.append(turn.model_copy(update={"checks": checks, "grade": grade, "passed": passed}))
    return reviewed


def _flip(result: CheckResult, passed: bool) -> CheckResult:
    return result.model_copy(update={"passed": passed, "score": float(passed), "overridden": True})


@dataclass(frozen=True)
class Reviewed:
    """A conversation's verdict under its overrides, and how many of its stored turns still count."""

    verdict: Verdict
    turns: list[TurnRecord]  # the reviewed turns that count, in order
    note: str = ""  # why turns stopped counting, if any did


def reverdict(
    driver: Driver,
    turns: Sequence[TurnRecord],
    overrides: Sequence[OverrideRecord],
    *,
    graders: Sequence[GraderResult] = (),
    pass_rule: object = "all",
) -> Reviewed:
    """The verdict of a conversation that ran to its end (passed or failed), under `overrides`."""
    reviewed = apply(turns, overrides)
    kept: list[TurnRecord] = []
    note = ""
    step = driver.first()
    for position, turn in enumerate(reviewed):
        kept.append(turn)
        if turn.termination_kind is not None or position == len(reviewed) - 1:
            break
        step = driver.next(step, kept)
        following = reviewed[position + 1]
        if step is None:
            note = f"turns after turn {turn.turn} no longer count: the conversation ends there once reviewed"
            break
        if step.node != following.node:
            note = (
                f"turn {turn.turn} as reviewed would have sent another follow-up ({step.node}), "
                f"not turn {following.turn}'s: the turns after it no longer count"
            )
            break
    unplayed = not note and len(kept) == len(reviewed) and kept[-1].termination_kind is None
    if unplayed and driver.next(step, kept) is not None:
        note = f"turn {kept[-1].turn} as reviewed would have been followed by a turn that was never played"
    verdict = driver.verdict(kept)
    if graders and verdict.outcome in (Status.PASSED, Status.FAILED):
        verdict = graded_verdict(pass_rule, list(graders), verdict, kept, driver.turn_scores(kept))
    return Reviewed(verdict, kept, note)
