"""Gates: a suite's thresholds over its evals' scores (or one named grader's), evaluated into GateResults.

A GateResult is part of the results format (`RunReport.gates`); the named graders' scores it reads are
read off EvalResults and the web app's stored conversations alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from .outcomes import GRADED, Status

if TYPE_CHECKING:
    from .results import EvalResult


class GateResult(BaseModel):
    """A gate as evaluated. `kind` simple: `metric` over the eval scores, or over one named `grader`'s;
    weighted_average: `metric` over each eval's weighted mean of its graders' scores (`weights`);
    logical_and / logical_or: `children` combined (metric, op, value and actual are then unused)."""

    kind: Literal["simple", "weighted_average", "logical_and", "logical_or"] = "simple"
    metric: str = ""
    op: str = ">="
    value: float = 0.0
    actual: float | None = None  # None when no eval has a score (every one errored)
    passed: bool
    grader: str | None = None
    weights: dict[str, float] | None = None
    children: list[GateResult] = Field(default_factory=list)

    @property
    def label(self) -> str:
        if self.kind in ("logical_and", "logical_or"):
            joined = " and " if self.kind == "logical_and" else " or "
            return "(" + joined.join(child.label for child in self.children) + ")"
        if self.kind == "weighted_average":
            mix = " + ".join(f"{weight:g}×{name}" for name, weight in (self.weights or {}).items())
            return f"{self.metric} of ({mix}) {self.op} {self.value:g}"
        if self.grader:
            return f"{self.grader} {self.metric} {self.op} {self.value:g}"
        return f"{self.metric} {self.op} {self.value:g}"


_OPS = {">=": float.__ge__, ">": float.__gt__, "<=": float.__le__, "<": float.__lt__, "==": float.__eq__}


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def evaluate_gates(gates, evals: list[EvalResult]) -> list[GateResult]:
    """Each of the suite's gates over the evals' scores (engine.schema.suite.Gate says what each kind reads)."""
    return [_gate(gate, evals) for gate in gates]


def _gate(gate, evals: list[EvalResult]) -> GateResult:
    kind = getattr(gate, "kind", "simple")
    if kind in ("logical_and", "logical_or"):
        children = [_gate(member, evals) for member in gate.members]
        combine = all if kind == "logical_and" else any
        return GateResult(kind=kind, passed=combine(child.passed for child in children), children=children)
    finished = [result for result in evals if result.status in GRADED]
    grader = getattr(gate, "grader", None)
    weights = getattr(gate, "weighted_average", None)
    if grader is not None:
        pairs = [found for r in finished if (found := _graded(r).get(grader))]
    elif weights:
        pairs = []
        for result in finished:
            scored = {name: found for name, found in _graded(result).items() if name in weights}
            if scored:
                total = sum(weights[name] for name in scored)
                mean = sum(weights[name] * score for name, (score, _) in scored.items()) / total
                pairs.append((mean, result.status == Status.PASSED))
    else:
        pairs = [(r.score, r.status == Status.PASSED) for r in evals if r.score is not None]
    scores = [score for score, _ in pairs]
    if gate.metric == "accuracy":
        if grader is not None:
            actual = sum(bool(ok) for _, ok in pairs) / len(pairs) if pairs else None
        else:
            actual = sum(r.status == Status.PASSED for r in finished) / len(finished) if finished else None
    elif not scores:
        actual = None
    elif gate.metric == "avg":
        actual = sum(scores) / len(scores)
    elif gate.metric == "min":
        actual = min(scores)
    else:
        actual = percentile(scores, 0.95)
    passed = actual is not None and _OPS[gate.op](float(actual), float(gate.value))
    return GateResult(kind=kind, metric=gate.metric, op=gate.op, value=gate.value, actual=actual, passed=passed,
                      grader=grader, weights=dict(weights) if weights else None)  # fmt: skip


def _grader_items(result) -> list[tuple[str, float | None, bool | None]]:
    """A result's named graders as (name, score, passed). Reads EvalResults and the web app's stored
    conversations (their `graders` column holds the same results as dicts)."""
    return [
        (item["name"], item.get("score"), item.get("passed"))
        if isinstance(item, dict)
        else (item.name, item.score, item.passed)
        for item in getattr(result, "graders", None) or ()
    ]


def grader_names(results) -> list[str]:
    """Named graders' names in the order they first appear (the suite's, then evals' own): one column each
    on the run page and in the CSV."""
    names: dict[str, None] = {}
    for result in results:
        names.update((name, None) for name, _, _ in _grader_items(result))
    return list(names)


def _graded(result) -> dict[str, tuple[float, bool]]:
    """A result's named graders that gave a score: name -> (score, passed). Reads EvalResults and the web
    app's stored conversations."""
    return {name: (score, bool(passed)) for name, score, passed in _grader_items(result) if score is not None}
