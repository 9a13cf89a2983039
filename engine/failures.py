"""A run's failing evals as CI reads them against a baseline: regressions (passed in the baseline, not now),
new failures (evals the baseline did not have), then the others (failing in both, or no baseline); and the
evals fixed since. The Markdown summary lists them in that order and `evalsite run --fail-on-regression`
and `--fail-on-new-failures` gate on them, so the two always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .compare import Change, Comparison, EvalDiff
from .outcomes import Status
from .results import EvalResult

REASON_CHARS = 200  # a reason is one line of a table or a terminal


class Kind(StrEnum):
    REGRESSION = "regressed"
    NEW = "new"
    OTHER = "failing"


@dataclass(frozen=True)
class Failing:
    result: EvalResult
    kind: Kind
    reason: str


@dataclass(frozen=True)
class Failures:
    failing: list[Failing]  # regressions first, then new failures, then the others; suite order within each
    fixed: list[EvalDiff]  # failed or errored in the baseline, passed now

    def of(self, kind: Kind) -> list[Failing]:
        return [item for item in self.failing if item.kind == kind]


def reason(result: EvalResult) -> str:
    """Why an eval did not pass, in one line: its error, else its first failed check or grade, else its
    verdict."""
    if result.status == Status.ERROR:
        text = result.error or result.verdict
    else:
        text = result.verdict
        for turn in result.turns:
            failed = [check for check in turn.checks if check.passed is False]
            if failed:
                text = f"turn {turn.turn}: {failed[0].label}: {failed[0].reason}"
                break
            if turn.grade is not None and turn.grade.passed is False:
                text = f"turn {turn.turn}: {turn.grade.grader}: {turn.grade.rationale}"
                break
    text = " ".join(str(text or "failed").split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def failures(evals: list[EvalResult], comparison: Comparison | None) -> Failures:
    """Every failed or errored eval (each iteration of an iterated one), sorted by kind."""
    changes = {row.id: row.change for row in comparison.rows} if comparison is not None else {}
    kinds = {Change.REGRESSION: Kind.REGRESSION, Change.ADDED: Kind.NEW}
    failing = [
        Failing(result, kinds.get(changes.get(result.id), Kind.OTHER), reason(result))
        for result in evals
        if result.status in (Status.FAILED, Status.ERROR)
    ]
    order = list(Kind)
    failing.sort(key=lambda item: order.index(item.kind))  # stable: suite order within each kind
    fixed = [row for row in comparison.rows if row.change == Change.FIX] if comparison is not None else []
    return Failures(failing, fixed)


def transcript_url(run_url: str | None, result: EvalResult) -> str | None:
    """The eval's conversation page on the server, under its run's page."""
    if not run_url:
        return None
    return f"{run_url.rstrip('/')}/c/{result.index}/" + (
        f"?iteration={result.iteration}" if result.iteration else ""
    )
