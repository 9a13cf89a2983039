"""The CLI's calibration: a set played by the engine's runner, as a worker would play it, then its report."""

from __future__ import annotations

from ..clients import EndpointRegistry
from ..runner import run_suite
from .playing import as_suite, judgement
from .report import CalibrationReport, report
from .sets import LoadedSet


def run_calibration(
    loaded: LoadedSet,
    registry: EndpointRegistry,
    *,
    judge_model: str | None = None,
    concurrency: int = 10,
    on_wait=None,
    store=None,
) -> CalibrationReport:
    """Every judge on every sample, `repeats` times, then the figures. `store`: the response cache's, used
    as the set's `cache` says (engine.cache.first_draw_only)."""
    suite = as_suite(loaded)
    result = run_suite(
        suite, registry, model=judge_model, concurrency=concurrency, on_wait=on_wait, store=store
    )
    judged = [
        judgement(
            suite,
            ev.index,
            ev.iteration,
            ev.turns[0].checks[0].model_dump() if ev.turns and ev.turns[0].checks else None,
            ev.error or "",
        )
        for ev in result.evals
    ]
    models = {judge.name: judge.model or result.model for judge in loaded.spec.all_judges}
    found = report(loaded, judged, models=models, duration_s=result.totals.duration_s)
    cached = {"cached_calls": result.totals.cached_calls, "saved_cost": result.totals.saved_cost}
    return found.model_copy(update={**cached, "unpriced": list(result.unpriced)})
