"""Statistics over repeated trials of one eval (@agtlantis/eval's iteration stats).

Given each iteration's outcome, score, turn count and termination reason: the pass rate with a Wilson 95%
interval, mean / population standard deviation / min / max of scores, turn counts, termination-reason
counts, the representative iteration (score closest to the mean, earliest on ties) and whether the eval is
flaky (its outcome differs across iterations).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class Tally:
    """What an eval's statistics are worked out from: counts, sums and extremes of its iterations. Built from
    the trials here (Tally.of), or by a database aggregate (runs.selectors.repeated_so_far) for a run too big
    to read every iteration; stats_of turns either into the same IterationStats."""

    iterations: int
    graded: int  # iterations with a score: passed or failed
    passes: int
    score_sum: float = 0.0
    score_squares: float = 0.0  # the sum of the scores' squares
    score_min: float | None = None
    score_max: float | None = None
    turns_sum: int = 0
    turns_min: int = 0
    turns_max: int = 0
    terminations: dict[str, int] | None = None
    representative: int | None = None

    @property
    def mean(self) -> float | None:
        return self.score_sum / self.graded if self.graded else None

    @classmethod
    def of(cls, trials: list[Trial]) -> Tally:
        graded = [trial for trial in trials if trial.score is not None]
        scores = [trial.score for trial in graded]
        turns = [trial.turns for trial in trials]
        tally = cls(
            iterations=len(trials),
            graded=len(graded),
            passes=sum(1 for trial in graded if trial.passed),
            score_sum=math.fsum(scores),
            score_squares=math.fsum(score * score for score in scores),
            score_min=min(scores, default=None),
            score_max=max(scores, default=None),
            turns_sum=sum(turns),
            turns_min=min(turns, default=0),
            turns_max=max(turns, default=0),
            terminations=dict(Counter(trial.termination for trial in trials if trial.termination)),
        )
        mean = tally.mean
        if mean is None:
            return tally
        nearest = min(graded, key=lambda trial: (distance(trial.score, mean), trial.iteration))
        return replace(tally, representative=nearest.iteration)


def distance(score: float, mean: float) -> int:
    """How far a score is from the mean, in units of the last decimal place kept, so equally far scores tie
    whatever order the mean was summed in; SQL orders by the same integer."""
    return round(abs(score - mean) * 10**DISTANCE_PLACES)


DISTANCE_PLACES = 9


def stats_of(
    tally: Tally, pass_rate_threshold: float = 0.5, scores: list[float] | None = None
) -> IterationStats:
    """IterationStats from a Tally. `scores`: the graded scores in iteration order, when they were read."""
    n = tally.graded
    low, high = wilson_interval(tally.passes, n)
    mean = tally.mean
    std = None
    if n:
        # Population variance from the sums; a rounding error below zero (every score alike) is zero.
        variance = tally.score_squares / n - mean * mean
        std = math.sqrt(variance) if variance > 1e-12 else 0.0
    rate = tally.passes / n if n else 0.0
    return IterationStats(
        iterations=tally.iterations,
        pass_count=tally.passes,
        pass_rate=rate,
        pass_rate_low=low,
        pass_rate_high=high,
        scores=scores or [],
        mean=mean,
        std_dev=std,
        min=tally.score_min,
        max=tally.score_max,
        avg_turns=tally.turns_sum / tally.iterations if tally.iterations else 0.0,
        min_turns=tally.turns_min,
        max_turns=tally.turns_max,
        termination_counts=dict(tally.terminations or {}),
        representative=tally.representative,
        flaky=0 < tally.passes < n,
        errors=tally.iterations - n,
        passed=n > 0 and rate >= pass_rate_threshold,
        pass_rate_threshold=pass_rate_threshold,
    )


def iteration_stats(trials: list[Trial], pass_rate_threshold: float = 0.5) -> IterationStats:
    scores = [trial.score for trial in trials if trial.score is not None]
    return stats_of(Tally.of(trials), pass_rate_threshold, scores)


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
        if result.status == Status.SKIPPED:  # never played: no iteration of its statistics
            continue
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
        errored = any(r.status == Status.ERROR for r in results)
        out.append(iterated_result(index, suite.eval_id(index), stats, multi=multi, errored=errored))
    return out


def iterated_result(
    index: int, eval_id: str, stats: IterationStats, *, multi: bool, errored: bool
) -> IteratedResult:
    """An eval's IteratedResult from its statistics: its verdict is its pass rate against its threshold."""
    graded = stats.iterations - stats.errors
    return IteratedResult(
        index=index,
        id=eval_id,
        kind="multi-turn-iterated" if multi else "single-turn-iterated",
        status=pass_rate_status(stats.pass_count, graded, errored, stats.pass_rate_threshold),
        stats=stats,
    )


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
