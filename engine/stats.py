"""Statistics over repeated trials of one eval (@agtlantis/eval's iteration stats).

Given each iteration's outcome, score, turn count and termination reason: the pass rate with a Wilson 95%
interval, mean / population standard deviation / min / max of scores, turn counts, termination-reason
counts, the representative iteration (score closest to the mean, earliest on ties) and whether the eval is
flaky (its outcome differs across iterations).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from pydantic import BaseModel, Field

from .outcomes import GRADED, Status, TerminationKind

Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Trial:
    iteration: int
    passed: bool
    score: float | None  # None when the iteration errored or was cancelled
    turns: int
    termination: str = ""


class IterationStats(BaseModel):
    iterations: int
    pass_count: int
    pass_rate: float
    pass_rate_low: float  # Wilson 95% interval
    pass_rate_high: float
    scores: list[float] = Field(default_factory=list)
    mean: float | None = None
    std_dev: float | None = None  # population standard deviation
    min: float | None = None
    max: float | None = None
    avg_turns: float = 0.0
    min_turns: int = 0
    max_turns: int = 0
    termination_counts: dict[str, int] = Field(default_factory=dict)
    representative: int | None = None  # the iteration whose score is closest to the mean
    flaky: bool = False
    errors: int = 0
    passed: bool = False  # pass_rate >= the eval's pass_rate_threshold
    pass_rate_threshold: float = 0.5


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    margin = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - margin), min(1.0, centre + margin)


def iteration_stats(trials: list[Trial], pass_rate_threshold: float = 0.5) -> IterationStats:
    graded = [trial for trial in trials if trial.score is not None]
    scores = [trial.score for trial in graded]
    passes = sum(1 for trial in graded if trial.passed)
    n = len(graded)
    low, high = wilson_interval(passes, n)
    mean = sum(scores) / n if n else None
    std = math.sqrt(sum((score - mean) ** 2 for score in scores) / n) if n else None
    representative = None
    if n:
        representative = min(graded, key=lambda trial: (abs(trial.score - mean), trial.iteration)).iteration
    turns = [trial.turns for trial in trials]
    rate = passes / n if n else 0.0
    return IterationStats(
        iterations=len(trials),
        pass_count=passes,
        pass_rate=rate,
        pass_rate_low=low,
        pass_rate_high=high,
        scores=scores,
        mean=mean,
        std_dev=std,
        min=min(scores) if scores else None,
        max=max(scores) if scores else None,
        avg_turns=sum(turns) / len(turns) if turns else 0.0,
        min_turns=min(turns) if turns else 0,
        max_turns=max(turns) if turns else 0,
        termination_counts=dict(Counter(trial.termination for trial in trials if trial.termination)),
        representative=representative,
        flaky=len({trial.passed for trial in graded}) > 1,
        errors=len(trials) - n,
        passed=n > 0 and rate >= pass_rate_threshold,
        pass_rate_threshold=pass_rate_threshold,
    )


class IteratedResult(BaseModel):
    """One eval run N times: its statistics and verdict (pass rate against the threshold)."""

    index: int
    id: str
    kind: str  # single-turn-iterated | multi-turn-iterated
    status: str  # passed | failed | error (none graded, one errored) | cancelled (every iteration cancelled)
    stats: IterationStats


def iterated_results(suite, evals) -> list[IteratedResult]:
    """Group per-iteration EvalResults (or anything with index/iteration/status/score/turns) by eval."""
    groups: dict[int, list] = {}
    for result in evals:
        groups.setdefault(result.index, []).append(result)
    out = []
    for index, results in sorted(groups.items()):
        ev = suite.evals[index]
        iterations = ev.iterations or suite.iterations
        if iterations <= 1:
            continue
        threshold = (
            ev.pass_rate_threshold if ev.pass_rate_threshold is not None else suite.pass_rate_threshold
        )
        trials = [
            Trial(
                iteration=r.iteration,
                passed=r.status == Status.PASSED,
                score=r.score if r.status in GRADED else None,
                turns=r.totals.turns if hasattr(r, "totals") else r.turn_count,
                termination=(r.termination or "")
                if r.status != Status.ERROR
                else TerminationKind.ERROR.describe(),
            )
            for r in sorted(results, key=lambda r: r.iteration)
        ]
        stats = iteration_stats(trials, threshold)
        multi = any(getattr(r, "kind", "") == "multi-turn" for r in results)
        graded = stats.iterations - stats.errors
        status = pass_rate_status(
            stats.pass_count, graded, any(r.status == Status.ERROR for r in results), threshold
        )
        out.append(
            IteratedResult(
                index=index,
                id=suite.eval_id(index),
                kind="multi-turn-iterated" if multi else "single-turn-iterated",
                status=status,
                stats=stats,
            )
        )
    return out


def pass_rate_status(passes: int, graded: int, errored: bool, threshold: float) -> Status:
    """A repeated eval's verdict: passed when the share of its graded iterations that passed reaches the
    threshold, else failed; with no graded iteration, error if one errored, else cancelled (a run cancelled
    before any iteration finished says so; only a real failure is an error)."""
    if not graded:
        return Status.ERROR if errored else Status.CANCELLED
    return Status.PASSED if passes / graded >= threshold else Status.FAILED


def overall_status(evals, iterated: list[IteratedResult]) -> Status:
    """The run's status from its evals: running/queued while any is; then error if any errored (its result is
    unknown), else failed if any failed, else cancelled if any was, else passed. Iterated evals are judged
    by their pass rate, not by each iteration; the rest by their own status."""
    grouped = {item.index for item in iterated}
    statuses = [r.status for r in evals if r.index not in grouped] + [item.status for item in iterated]
    for status in (Status.RUNNING, Status.QUEUED, Status.ERROR, Status.FAILED, Status.CANCELLED):
        if status in statuses:
            return status
    return Status.PASSED
