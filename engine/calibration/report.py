"""A calibration's report: each judge's figures against the samples' expected scores, its gates, its worst
disagreements, and how two calibrations of a set compare.

The figures come from the judgements alone (engine.calibration.playing.judgement), whoever played the set.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, Field

from .. import agreement
from ..agreement import Confusion, Judgement, Metrics
from ..cost import spent
from ..text import plural
from .playing import Judged
from .sets import LoadedSet, NamedJudge, Sample


class SampleRow(BaseModel):
    index: int
    label: str
    expected_score: float
    expected_reason: str
    tags: list[str]
    judge_score: float | None  # the mean over repeats that gave a score
    judge_reason: str
    scores: list[float | None]  # one per repeat
    reasons: list[str]
    raws: list[str | None]
    errors: list[str | None]
    agreement: float | None  # share of this sample's scored repeats on the expected level
    disagreement: float | None  # mean |judged - expected|; the table sorts by it


class GateResult(BaseModel):
    name: str  # min_agreement | min_kappa
    value: float | None
    minimum: float
    passed: bool


class JudgeReport(BaseModel):
    name: str
    model: str
    criteria: str
    metrics: Metrics
    confusion: Confusion
    by_tag: dict[str, Metrics]
    gates: list[GateResult]
    passed: bool
    samples: list[SampleRow]


class CalibrationReport(BaseModel):
    name: str
    scale: str
    threshold: float
    repeats: int
    binary: bool  # a pass/fail set: expected scores all 0 or 1 on the 0-1 scale
    judges: list[JudgeReport]
    warnings: list[str] = Field(default_factory=list)
    status: str  # passed | failed (a gate failed for some judge)
    duration_s: float | None = None
    # The judges' calls the response cache answered, what they would have cost (engine.cache), and the
    # endpoints without prices they went to, which leave that unknown or a lower bound (engine.cost.spent).
    cached_calls: int = 0
    saved_cost: float = 0.0
    unpriced: list[str] = Field(default_factory=list)


def _criteria_text(judge: NamedJudge) -> str:
    if isinstance(judge.criteria, str):
        return judge.criteria
    return "; ".join(f"{c.name or 'criterion'} ×{c.weight:g}: {c.criteria}" for c in judge.criteria)


def report(
    loaded: LoadedSet,
    judged: Sequence[Judged],
    *,
    models: dict[str, str] | None = None,
    duration_s: float | None = None,
) -> CalibrationReport:
    spec = loaded.spec
    threshold = spec.threshold
    levels = agreement.levels_for(spec.scale, [s.expected_score for s in loaded.samples], threshold)
    by_index = {sample.index: sample for sample in loaded.samples}
    judges = []
    for judge in spec.all_judges:
        mine = [j for j in judged if j.judge == judge.name and j.sample in by_index]
        judgements = [
            Judgement(j.sample, j.repeat, by_index[j.sample].expected_score, j.score, by_index[j.sample].tags)
            for j in mine
        ]
        metrics = agreement.metrics(judgements, spec.scale, threshold, levels)
        gates = _gates(spec.gates, metrics)
        judges.append(
            JudgeReport(
                name=judge.name,
                model=(models or {}).get(judge.name, judge.model or ""),
                criteria=_criteria_text(judge),
                metrics=metrics,
                confusion=agreement.confusion(judgements, levels),
                by_tag=agreement.by_tag(judgements, spec.scale, threshold, levels),
                gates=gates,
                passed=all(gate.passed for gate in gates),
                samples=_rows(loaded.samples, mine, levels),
            )
        )
    return CalibrationReport(
        name=spec.name,
        scale=spec.scale,
        threshold=threshold,
        repeats=spec.repeats,
        binary=levels.binary,
        judges=judges,
        warnings=[str(warning) for warning in loaded.warnings],
        status="passed" if all(j.passed for j in judges) else "failed",
        duration_s=duration_s,
    )


def _gates(gates, metrics: Metrics) -> list[GateResult]:
    out = []
    if gates is None:
        return out
    if gates.min_agreement is not None:
        value = metrics.exact_agreement
        out.append(GateResult(name="min_agreement", value=value, minimum=gates.min_agreement,
                              passed=value is not None and value >= gates.min_agreement))  # fmt: skip
    if gates.min_kappa is not None:
        value = metrics.weighted_kappa
        out.append(GateResult(name="min_kappa", value=value, minimum=gates.min_kappa,
                              passed=value is not None and value >= gates.min_kappa))  # fmt: skip
    return out


def _rows(samples: Sequence[Sample], judged: Sequence[Judged], levels: agreement.Levels) -> list[SampleRow]:
    grouped: dict[int, list[Judged]] = {}
    for j in sorted(judged, key=lambda j: (j.sample, j.repeat)):
        grouped.setdefault(j.sample, []).append(j)
    rows = []
    for sample in samples:
        mine = grouped.get(sample.index, [])
        scores = [j.score for j in mine]
        scored = [s for s in scores if s is not None]
        on_level = [levels.of(s) == levels.of(sample.expected_score) for s in scored]
        rows.append(
            SampleRow(
                index=sample.index,
                label=sample.label,
                expected_score=sample.expected_score,
                expected_reason=sample.expected_reason,
                tags=list(sample.tags),
                judge_score=statistics.fmean(scored) if scored else None,
                judge_reason=next(
                    (j.reason for j in mine if j.score is not None), mine[0].reason if mine else ""
                ),
                scores=scores,
                reasons=[j.reason for j in mine],
                raws=[j.raw for j in mine],
                errors=[j.error for j in mine],
                agreement=sum(on_level) / len(on_level) if on_level else None,
                disagreement=agreement.disagreement(sample.expected_score, scores),
            )
        )
    # Worst first; samples the judge never scored go last.
    rows.sort(key=lambda row: (row.disagreement is None, -(row.disagreement or 0.0), row.index))
    return rows


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def format_calibration(report: CalibrationReport, worst: int = 5) -> str:
    """The terminal summary: each judge's figures, its gates, and its worst disagreements."""
    lines = [
        f"Calibration {report.name!r}: {report.judges[0].metrics.samples} samples on {report.scale}"
        + (f" × {report.repeats} repeats" if report.repeats > 1 else "")
        + (" (pass/fail)" if report.binary else ""),
    ]
    for judge in report.judges:
        m = judge.metrics
        lines += [
            "",
            f"{judge.name} ({judge.model or 'default judge'}): {' '.join(judge.criteria.split())[:80]}",
        ]
        figures = [f"exact agreement {_pct(m.exact_agreement)}"]
        if m.within_one is not None:
            figures.append(f"within one {_pct(m.within_one)}")
        figures += [
            f"MAE {_num(m.mae)}",
            f"bias {'—' if m.bias is None else f'{m.bias:+.2f}'}",
            f"{'kappa' if report.binary else 'weighted kappa'} {_num(m.weighted_kappa)}",
            f"Spearman {_num(m.spearman)}",
        ]
        lines.append("  " + " · ".join(figures))
        pf = m.pass_fail
        lines.append(
            f"  pass/fail at {report.threshold:g}: agreement {_pct(pf.agreement)}, catches failures with "
            f"precision {_pct(pf.precision)} and recall {_pct(pf.recall)}"
        )
        if m.consistency is not None:
            lines.append(f"  self-consistency {_pct(m.consistency)} (mean spread {m.repeat_spread:.2f})")
        if m.unscored:
            lines.append(
                f"  {m.unscored} of {m.judgements} judgements gave no score (left out of the figures)"
            )
        for gate in judge.gates:
            mark = "ok" if gate.passed else "FAILED"
            value = "—" if gate.value is None else f"{gate.value:.2f}"
            lines.append(f"  gate {gate.name} ≥ {gate.minimum:g}: {value} {mark}")
        off = [row for row in judge.samples if row.disagreement][:worst]
        if off:
            lines.append("  worst disagreements:")
            for row in off:
                judged = "—" if row.judge_score is None else f"{row.judge_score:g}"
                lines.append(
                    f"    {row.label}: expected {row.expected_score:g}, judged {judged} — {row.judge_reason[:90]}"
                )
    lines.append("")
    if report.cached_calls:  # as `evalsite run` says it
        saved = spent(report.saved_cost, report.unpriced)
        lines.append(
            f"{plural(report.cached_calls, 'judge call')} from the cache{f', {saved} saved' if saved else ''}"
        )
    lines.append(f"Calibration {report.status}")
    return "\n".join(lines)


# --- comparing two calibrations of a set ------------------------------------------------------------------

COMPARED = ("exact_agreement", "within_one", "weighted_kappa", "spearman", "mae", "bias", "consistency")
LOWER_IS_BETTER = {"mae"}


class MetricChange(BaseModel):
    name: str
    before: float | None
    after: float | None
    delta: float | None
    better: bool | None  # None: unchanged, or not comparable; bias is better nearer 0


class SampleChange(BaseModel):
    label: str
    expected_score: float
    before: float | None  # the judge's mean score then and now
    after: float | None


class JudgeComparison(BaseModel):
    name: str
    metrics: list[MetricChange]
    better: list[SampleChange]  # the judge's score moved nearer the expected one
    worse: list[SampleChange]
    unchanged: int
    only_before: list[str]  # samples in one calibration only (the set changed between them)
    only_after: list[str]


def _better(name: str, before: float, after: float) -> bool | None:
    if name == "bias":
        before, after = abs(before), abs(after)
        name = "mae"
    if after == before:
        return None
    return (after < before) if name in LOWER_IS_BETTER else (after > before)


def compare(before: CalibrationReport, after: CalibrationReport) -> list[JudgeComparison]:
    """How each judge named in both calibrations moved: its figures, and which samples (matched by where
    they are written) it now scores nearer to or further from their expected score."""
    earlier = {judge.name: judge for judge in before.judges}
    out = []
    for judge in after.judges:
        old = earlier.get(judge.name)
        if old is None:
            continue
        metrics = []
        for name in COMPARED:
            a, b = getattr(old.metrics, name), getattr(judge.metrics, name)
            delta = None if a is None or b is None else b - a
            metrics.append(
                MetricChange(
                    name=name,
                    before=a,
                    after=b,
                    delta=delta,
                    better=None if delta is None else _better(name, a, b),
                )  # fmt: skip
            )
        rows_before = {row.label: row for row in old.samples}
        rows_after = {row.label: row for row in judge.samples}
        better, worse, unchanged = [], [], 0
        for label, row in rows_after.items():
            was = rows_before.get(label)
            if was is None or row.disagreement is None or was.disagreement is None:
                continue
            change = SampleChange(
                label=label, expected_score=row.expected_score, before=was.judge_score, after=row.judge_score
            )
            if row.disagreement < was.disagreement:
                better.append(change)
            elif row.disagreement > was.disagreement:
                worse.append(change)
            else:
                unchanged += 1
        out.append(
            JudgeComparison(
                name=judge.name,
                metrics=metrics,
                better=better,
                worse=worse,
                unchanged=unchanged,
                only_before=sorted(set(rows_before) - set(rows_after)),
                only_after=sorted(set(rows_after) - set(rows_before)),
            )
        )
    return out
