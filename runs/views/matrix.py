"""A matrix's page: the grid of evals × variants, live while its runs play; its exports; and the choice of
two cells (or two columns) that opens the side-by-side compare of runs.views.compare."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseStopPolling

from engine import matrix as grids
from engine.cost import money
from engine.exports import junit_xml
from projects.access import needs
from projects.roles import Can

from .. import matrix as matrices
from .. import selectors, specs
from ..models import Run, RunMatrix


def _sort(request: HttpRequest) -> str:
    sort = request.GET.get("sort", "")
    return sort if sort in grids.SORTS else grids.SORTS[0]


def _cell_url(run_id: str, cell: grids.CellIn) -> str:
    path = reverse("runs:conversation", args=[run_id, cell.index])
    return f"{path}?{urlencode({'iteration': cell.iteration})}" if cell.iteration else path


def _reason(cell: grids.CellIn) -> str:
    """Why a cell has no verdict, on one line; a cell that reads "not started" gives the rest alone ("cost
    limit $5.00 reached"), so that a screen reader does not say it twice."""
    reason = cell.reason.removeprefix(f"{grids.NOT_STARTED}: ") if cell.unstarted else cell.reason
    return " ".join(reason.split())


def _context(matrix: RunMatrix, runs: list[Run], grid: grids.Grid) -> dict:
    total = sum(stats.total for stats in grid.stats)
    done = sum(stats.finished for stats in grid.stats)
    columns = [
        {"column": column, "stats": stats, "run": run, "best": number in grid.best,
         "partial": column.status not in grids.FINISHED,  # its run still plays: its figures are so far
         "rate": grids.rate_text(stats), "p50": grids.ms_text(stats.p50_ms), "p95": grids.ms_text(stats.p95_ms),
         "cost": column.cost_text(stats.cost),
         # A run stopped short (its cost limit) says so and why, as its own page does, not a bare "cancelled".
         "stop": {"label": "stopping" if run.is_active else "stopped", "text": grids.stop_text(column, stats)}
         if run.stop_reason else None}
        for number, (column, stats, run) in enumerate(zip(grid.columns, grid.stats, runs, strict=True))
    ]  # fmt: skip
    rows = [
        {
            "row": row,
            "cells": [
                None if cell is None else {
                    "cell": cell, "text": grids.cell_text(cell), "url": _cell_url(column.key, cell),
                    # Why it has no verdict, on one line for its title; autoescaped, as it is an endpoint's text.
                    "reason": _reason(cell),
                    "value": f"{column.key}:{cell.index}:{cell.iteration}", "label": column.label,
                    # An id htmx can find again after a refresh (it looks it up unescaped: no colon).
                    "id": f"pick-{column.key}-{cell.index}-{cell.iteration}",
                }
                for cell, column in zip(row.cells, grid.columns, strict=True)
            ],
        }
        for row in grid.rows
    ]  # fmt: skip
    base = reverse("matrices:detail", args=[matrix.pk])
    return {
        "section": "runs",
        "matrix": matrix,
        "runs": runs,
        "grid": grid,
        "columns": columns,
        "rows": rows,
        "differences": grids.difference_lines(grid),
        # In the words the terminal's table and the Markdown export say it.
        "agreement": grids.agreement_line(grid),
        # A column of the simulated user's tokens only when a variant has some, as on a run's page.
        "user_tokens": any(stats.user_tokens for stats in grid.stats),
        "progress": {"done": done, "total": total},
        "cache": {
            "calls": sum(stats.cached_calls for stats in grid.stats),
            "saved": sum(stats.saved_cost for stats in grid.stats),
        },
        "live": not grid.finished,
        "urls": {
            "poll": f"{reverse('matrices:poll', args=[matrix.pk])}?{urlencode({'sort': grid.sort})}",
            "compare": reverse("matrices:compare", args=[matrix.pk]),
            "sorts": [(f"{base}?{urlencode({'sort': sort})}", sort) for sort in grids.SORTS],
            "exports": [
                (label, reverse("matrices:export", args=[matrix.pk, key]))
                for key, (label, _, _) in EXPORTS.items()
            ],
        },
    }


def _page(request: HttpRequest, matrix_id) -> tuple[dict, bool]:
    matrix = matrices.get_matrix_for_user(request.user, matrix_id)
    runs = matrices.runs_of(matrix)
    grid = matrices.grid(matrix, runs, sort=_sort(request))
    return _context(matrix, runs, grid), not grid.finished


def _limit(matrix: RunMatrix, runs: list[Run]) -> dict | None:
    """The header's cost limit, when the runs have one: each variant's run has it on its own, so the matrix
    may spend it once a variant."""
    limit = matrices.cost_limit(matrix, runs)
    if limit is None:
        return None
    return {"each": money(limit), "together": money(limit * len(runs)), "variants": len(runs)}


@needs(Can.VIEW)
@login_required
@require_GET
def detail(request: HttpRequest, matrix_id) -> HttpResponse:
    context, _ = _page(request, matrix_id)
    # Said once, in the header: which endpoints' slots the variants share (the poll leaves the header be).
    context["shared_slots"] = matrices.shared_slots([column["run"] for column in context["columns"]])
    context["limit"] = _limit(context["matrix"], context["runs"])
    return render(request, "runs/matrix.html", context)


@needs(Can.VIEW)
@login_required
@require_GET
def poll(request: HttpRequest, matrix_id) -> HttpResponse:
    """The grid again while the runs play; the last answer, once every run has ended, stops the polling."""
    context, live = _page(request, matrix_id)
    response = render(request, "runs/matrix/_body.html", context)
    return response if live else HttpResponseStopPolling(response.content)


def _junit(matrix: RunMatrix, runs: list[Run], grid: grids.Grid) -> str:
    system = specs.suite(matrix.suite_version).system
    return grids.matrix_junit(
        [(matrices.label_of(run), junit_xml(selectors.report(run), system)) for run in runs]
    )


# key: (the page's link, the file's suffix, its media type)
EXPORTS = {
    "csv": ("CSV, the grid", "csv", "text/csv; charset=utf-8"),
    "md": ("Markdown table", "md", "text/markdown; charset=utf-8"),
    "junit": ("JUnit XML, a testsuite per variant", "junit.xml", "application/xml"),
}


def export_text(matrix: RunMatrix, form: str) -> str:
    runs = matrices.runs_of(matrix)
    grid = matrices.grid(matrix, runs)
    if form == "csv":
        return grids.grid_csv(grid)
    if form == "md":
        return grids.grid_markdown(grid)
    return _junit(matrix, runs, grid)


@needs(Can.VIEW)
@login_required
@require_GET
def export(request: HttpRequest, matrix_id, form: str) -> HttpResponse:
    if form not in EXPORTS:
        raise Http404("no such export")
    matrix = matrices.get_matrix_for_user(request.user, matrix_id)
    _, suffix, media_type = EXPORTS[form]
    response = HttpResponse(export_text(matrix, form), content_type=media_type)
    version = matrix.suite_version
    name = f"{slugify(version.suite.name) or 'suite'}-v{version.number}-matrix-{str(matrix.pk)[:8]}.{suffix}"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    return response


def _chosen_cell(value: str, runs: dict[str, Run]) -> tuple[Run, int, int] | None:
    run_id, _, rest = value.partition(":")
    index, _, iteration = rest.partition(":")
    if run_id not in runs or not index.isdigit() or not iteration.isdigit():
        return None
    return runs[run_id], int(index), int(iteration)


@needs(Can.VIEW)
@login_required
@require_GET
def compare(request: HttpRequest, matrix_id) -> HttpResponse:
    """Two cells of one eval open that eval side by side; two columns (or cells of two evals) open the runs'
    compare. The first chosen is the left, "before", side."""
    matrix = matrices.get_matrix_for_user(request.user, matrix_id)
    runs = {str(run.pk): run for run in matrices.runs_of(matrix)}
    back = reverse("matrices:detail", args=[matrix.pk])
    cells = [_chosen_cell(value, runs) for value in request.GET.getlist("cell")]
    if cells:
        if len(cells) != 2 or None in cells:
            messages.info(request, "Choose two cells to compare, in two columns.")
            return redirect(back)
        (first, first_index, first_iteration), (second, second_index, second_iteration) = cells
        if first.pk == second.pk:
            messages.info(request, "Those two cells are one variant's: choose cells in two columns.")
            return redirect(back)
        if (first_index, first_iteration) == (second_index, second_iteration):
            eval_id = selectors.get_conversation(first, first_index, first_iteration).eval_id
            url = reverse("runs:compare_eval", args=[second.pk, first.pk, eval_id])
            return redirect(f"{url}?{urlencode({'iteration': first_iteration})}" if first_iteration else url)
        return redirect("runs:compare_with", second.pk, first.pk)
    first, second = runs.get(request.GET.get("a", "")), runs.get(request.GET.get("b", ""))
    if first is None or second is None or first.pk == second.pk:
        messages.info(request, "Choose two different variants to compare.")
        return redirect(back)
    return redirect("runs:compare_with", second.pk, first.pk)
