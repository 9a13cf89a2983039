"""The result page of a calibration run: how far each judge agrees with the samples' expected scores.

A calibration run is an ordinary run of a calibration set (engine.calibration): its figures are computed
from the stored judge checks (runs.selectors.calibration_report) and laid out here. Owners see it at
/runs/<id>/calibration/, share-link visitors at /s/<token>/calibration/.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from engine.calibration.report import CalibrationReport, JudgeReport, compare
from projects.access import needs
from projects.roles import Can

from .. import selectors
from ..access import Access
from .common import owner, share_view, visitor

HEAT_STEPS = 10  # the confusion matrix's cells shade in this many steps (.heat-0 … .heat-10)


def _heatmap(judge: JudgeReport) -> dict:
    counts = judge.confusion.counts
    most = max((n for row in counts for n in row), default=0) or 1
    levels = [f"{level:g}" for level in judge.confusion.levels]
    rows = []
    for i, (expected, row) in enumerate(zip(levels, counts, strict=True)):
        cells = [
            {
                "count": n,
                "heat": round(n / most * HEAT_STEPS),
                "diagonal": i == j,
                "title": f"expected {expected}, judged {levels[j]}: {n}",
            }
            for j, n in enumerate(row)
        ]
        rows.append({"level": expected, "cells": cells, "total": sum(row)})
    return {"levels": levels, "rows": rows}


def _filtered(judge: JudgeReport, *, only_off: bool, tag: str) -> list:
    rows = judge.samples
    if only_off:
        rows = [row for row in rows if row.agreement is not None and row.agreement < 1]
    if tag:
        rows = [row for row in rows if tag in row.tags]
    return rows


def _page(request: HttpRequest, access: Access) -> HttpResponse:
    run = access.run
    suite = selectors.calibration_suite(run)
    if suite is None:
        raise Http404("not a calibration run")
    report: CalibrationReport = selectors.calibration_report(run, suite)
    only_off = request.GET.get("only") == "disagreements"  # the filters live in the URL, to share and reload
    tag = request.GET.get("tag", "")
    tags = sorted({t for sample in suite.calibration.samples for t in sample.tags})
    samples = {sample.index: sample for sample in suite.calibration.samples}
    # Eval positions: judge by judge, the samples in order (engine.calibration.as_suite).
    position = {sample.index: n for n, sample in enumerate(suite.calibration.samples)}
    n_samples = len(suite.calibration.samples)
    judges = []
    for number, judge in enumerate(report.judges):
        rows = _filtered(judge, only_off=only_off, tag=tag)
        judges.append(
            {
                "report": judge,
                "heatmap": _heatmap(judge),
                "rows": [
                    {
                        "row": row,
                        "messages": samples[row.index].messages,
                        # Each repeat is an iteration of the eval for this judge and sample.
                        "url": access.conversation_url(number * n_samples + position[row.index]),
                    }
                    for row in rows
                ],
                "hidden": len(judge.samples) - len(rows),
            }
        )
    comparison, against, choices = None, None, []
    if not access.shared:
        choices = selectors.other_calibrations(run)
        wanted = request.GET.get("against", "")
        against = next((other for other in choices if str(other.pk) == wanted), None)
        if against is not None:
            other_suite = selectors.calibration_suite(against)
            if other_suite is not None:
                before = selectors.calibration_report(against, other_suite)
                comparison = compare(before, report)
    progress = selectors.progress(run)
    context = {
        "comparison": comparison,
        "against": against,
        "choices": choices,
        "run": run,
        "shared": access.shared,
        "report": report,
        "judges": judges,
        "tags": tags,
        "tag": tag,
        "only_off": only_off,
        "active": run.is_active,
        "progress": progress,
        "urls": {"run": access.url("detail"), "self": access.url("calibration")},
    }
    template = "runs/calibration/_figures.html" if request.htmx else "runs/calibration.html"
    return render(request, template, context)


@needs(Can.VIEW)
@login_required
@require_GET
def calibration(request: HttpRequest, run_id) -> HttpResponse:
    return _page(request, owner(request, run_id))


@share_view
def shared_calibration(request: HttpRequest, token: str) -> HttpResponse:
    return _page(request, visitor(token))
