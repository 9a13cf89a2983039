"""How far an LLM judge agrees with human labels: the figures of a calibration.

Every judgement counts (a sample asked `repeats` times gives that many), because a suite asks its judge once
per check: the figures describe one call of the judge. Judgements the judge answered with no readable score
are counted apart and left out of the figures.

Scores are compared on levels as well as raw: on the ordinal -3..3 scale the levels are its integers; on
0-100 they are bands of 10; on 0-1 they are pass and fail when every expected score is 0 or 1 (a pass/fail
set), else bands of 0.1. Kappa is Cohen's, quadratic-weighted on ordinal levels and plain on pass/fail;
Spearman's rho is Pearson's correlation (the standard library's) of the average ranks. Both are the textbook
formulas, as scikit-learn's cohen_kappa_score and SciPy's spearmanr compute them (tests/engine hold them to
those): importing either library takes seconds, which a page showing these figures would wait for.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from .schema import SCALES


@dataclass(frozen=True)
class Judgement:
    sample: int
    repeat: int
    expected: float
    judged: float | None  # None: the judge's answer held no score, or the call failed
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Levels:
    values: tuple[float, ...]
    binary: bool  # pass/fail only: plain kappa, no within-one

    def of(self, score: float) -> float:
        return min(self.values, key=lambda level: (abs(level - score), -level))


def levels_for(scale: str, expected: Iterable[float], threshold: float) -> Levels:
    low, high, _ = SCALES[scale]
    if scale == "-3..3":
        return Levels(tuple(float(v) for v in range(-3, 4)), False)
    if scale == "0-1" and all(score in (0.0, 1.0) for score in expected):
        return Levels((0.0, 1.0), True)
    step = (high - low) / 10
    return Levels(tuple(round(low + i * step, 6) for i in range(11)), False)


class PassFail(BaseModel):
    agreement: float | None
    kappa: float | None
    # Catching failures: a "positive" is a sample the human failed (expected below the threshold).
    precision: float | None
    recall: float | None
    true_failures: int
    judged_failures: int


class Metrics(BaseModel):
    judgements: int
    unscored: int
    samples: int
    exact_agreement: float | None
    within_one: float | None  # None on a pass/fail set
    mae: float | None
    bias: float | None  # mean of judged - expected: above 0, the judge grades too high
    weighted_kappa: float | None
    spearman: float | None
    consistency: float | None  # share of samples whose repeats all land on one level; None without repeats
    repeat_spread: float | None  # mean over samples of the standard deviation of their repeats
    pass_fail: PassFail


class Confusion(BaseModel):
    levels: list[float]
    counts: list[list[int]]  # counts[expected level][judged level]


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def metrics(judgements: Sequence[Judgement], scale: str, threshold: float, levels: Levels) -> Metrics:
    scored = [j for j in judgements if j.judged is not None]
    expected = [j.expected for j in scored]
    judged = [j.judged for j in scored]
    exp_levels = [levels.of(score) for score in expected]
    got_levels = [levels.of(score) for score in judged]
    step = levels.values[1] - levels.values[0]
    n = len(scored)
    exact = sum(a == b for a, b in zip(exp_levels, got_levels, strict=True))
    within = sum(abs(a - b) <= step + 1e-9 for a, b in zip(exp_levels, got_levels, strict=True))
    return Metrics(
        judgements=len(judgements),
        unscored=len(judgements) - n,
        samples=len({j.sample for j in judgements}),
        exact_agreement=_ratio(exact, n),
        within_one=None if levels.binary else _ratio(within, n),
        mae=statistics.fmean(abs(b - a) for a, b in zip(expected, judged, strict=True)) if n else None,
        bias=statistics.fmean(b - a for a, b in zip(expected, judged, strict=True)) if n else None,
        weighted_kappa=_kappa(exp_levels, got_levels, levels, weighted=not levels.binary),
        spearman=_spearman(expected, judged),
        consistency=_consistency(scored, levels),
        repeat_spread=_spread(scored),
        pass_fail=_pass_fail(expected, judged, threshold),
    )


def _kappa(a: list[float], b: list[float], levels: Levels, *, weighted: bool) -> float | None:
    if not a:
        return None
    # Kappa is undefined when both raters used a single level: chance agreement is then 1.
    if len(set(a) | set(b)) < 2:
        return None
    labels = [str(level) for level in levels.values]
    return _cohen_kappa(
        [str(x) for x in a], [str(x) for x in b], labels=labels, weights="quadratic" if weighted else None
    )


def _cohen_kappa(a: list, b: list, *, labels: list, weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters' labels, plain or quadratic-weighted: 1 - Σ w·observed / Σ w·expected by
    chance, over the confusion matrix of `labels`."""
    index = {label: i for i, label in enumerate(labels)}
    size = len(labels)
    observed = [[0] * size for _ in labels]
    for x, y in zip(a, b, strict=True):
        observed[index[x]][index[y]] += 1
    rows = [sum(row) for row in observed]
    columns = [sum(row[j] for row in observed) for j in range(size)]
    total = sum(rows)
    if not total:
        return None
    disagreeing = expected = 0.0
    for i in range(size):
        for j in range(size):
            weight = (i - j) ** 2 if weights == "quadratic" else float(i != j)
            disagreeing += weight * observed[i][j]
            expected += weight * rows[i] * columns[j] / total
    return _finite(1 - disagreeing / expected) if expected else None


def _ranks(values: list[float]) -> list[float]:
    """Each value's rank from 1, ties sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None  # a constant side has no ranking to correlate
    return _finite(statistics.correlation(_ranks(a), _ranks(b)))


def _by_sample(scored: Sequence[Judgement]) -> dict[int, list[float]]:
    grouped: dict[int, list[float]] = defaultdict(list)
    for j in scored:
        grouped[j.sample].append(j.judged)
    return grouped


def _consistency(scored: Sequence[Judgement], levels: Levels) -> float | None:
    repeated = [scores for scores in _by_sample(scored).values() if len(scores) > 1]
    if not repeated:
        return None
    return sum(len({levels.of(s) for s in scores}) == 1 for scores in repeated) / len(repeated)


def _spread(scored: Sequence[Judgement]) -> float | None:
    repeated = [scores for scores in _by_sample(scored).values() if len(scores) > 1]
    return statistics.fmean(statistics.pstdev(scores) for scores in repeated) if repeated else None


def _pass_fail(expected: list[float], judged: list[float], threshold: float) -> PassFail:
    exp_fail = [score < threshold for score in expected]
    got_fail = [score < threshold for score in judged]
    caught = sum(a and b for a, b in zip(exp_fail, got_fail, strict=True))
    kappa = None
    if expected and len(set(exp_fail) | set(got_fail)) > 1:
        kappa = _cohen_kappa(exp_fail, got_fail, labels=[False, True])
    return PassFail(
        agreement=_ratio(sum(a == b for a, b in zip(exp_fail, got_fail, strict=True)), len(expected)),
        kappa=kappa,
        precision=_ratio(caught, sum(got_fail)),
        recall=_ratio(caught, sum(exp_fail)),
        true_failures=sum(exp_fail),
        judged_failures=sum(got_fail),
    )


def confusion(judgements: Sequence[Judgement], levels: Levels) -> Confusion:
    index = {level: i for i, level in enumerate(levels.values)}
    counts = [[0] * len(levels.values) for _ in levels.values]
    for j in judgements:
        if j.judged is not None:
            counts[index[levels.of(j.expected)]][index[levels.of(j.judged)]] += 1
    return Confusion(levels=list(levels.values), counts=counts)


def by_tag(
    judgements: Sequence[Judgement], scale: str, threshold: float, levels: Levels
) -> dict[str, Metrics]:
    tags = sorted({tag for j in judgements for tag in j.tags})
    return {tag: metrics([j for j in judgements if tag in j.tags], scale, threshold, levels) for tag in tags}


def disagreement(expected: float, judged: list[float | None]) -> float | None:
    """How far a sample's judgements fall from its label, on average: the per-sample table sorts by it."""
    scores = [score for score in judged if score is not None]
    return statistics.fmean(abs(score - expected) for score in scores) if scores else None
