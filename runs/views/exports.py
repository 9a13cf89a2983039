"""A run's results as files, in each format of engine.exports.FORMATS: downloaded from the run page and its
share link, and served by the API (runs/api.py)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from engine.compare import Comparison
from engine.exports import FORMATS, ExportFormat, RunExport
from engine.results import RunReport
from projects.access import needs
from projects.roles import Can

from .. import selectors, specs
from ..access import Access
from ..models import Run
from .common import owner, share_view, visitor


def stored_run(
    run: Run,
    *,
    report: RunReport | None = None,
    run_url: str | None = None,
    comparison: Comparison | None = None,
    baseline_url: str | None = None,
) -> RunExport:
    """A stored run as the writers read it; `report` when the caller has read it already."""
    return RunExport(
        report=(lambda: report) if report is not None else (lambda: selectors.report(run)),
        evals=lambda: selectors.eval_results(run),
        grader_names=lambda: selectors.grader_columns(run),
        system=lambda: specs.suite(run.suite_version).system,
        run_url=run_url,
        comparison=comparison,
        baseline_url=baseline_url,
    )


def export_response(entry: ExportFormat, run: RunExport) -> HttpResponse:
    # The CSVs stream, a chunk of conversations at a time; JUnit and the summary need the whole report.
    if entry.streams:
        return StreamingHttpResponse(entry.write(run), content_type=entry.media_type)
    return HttpResponse(entry.text(run), content_type=entry.media_type)


def export_links(access: Access) -> list[tuple[str, str]]:
    """The run page's download links: (label, URL) for each format."""
    return [(entry.label, access.url("export", entry.key)) for entry in FORMATS.values()]


def _export(request: HttpRequest, access: Access, form: str) -> HttpResponse:
    entry = FORMATS.get(form)
    if entry is None:
        raise Http404("no such export")
    run = access.run
    response = export_response(
        entry, stored_run(run, run_url=request.build_absolute_uri(access.url("detail")))
    )
    version = run.suite_version
    filename = f"{slugify(version.suite.name) or 'suite'}-v{version.number}-{str(run.pk)[:8]}.{entry.suffix}"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    return response


@needs(Can.VIEW)
@login_required
@require_GET
def results_export(request: HttpRequest, run_id, form: str) -> HttpResponse:
    return _export(request, owner(request, run_id), form)


@share_view
def shared_export(request: HttpRequest, token: str, form: str) -> HttpResponse:
    return _export(request, visitor(token), form)
