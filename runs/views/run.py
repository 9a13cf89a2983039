"""A run's page: live progress, gates, repeated evals' statistics, cancel, retry, share links, results.json,
and its shared read-only twin. What the page shows comes from runs.run_page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh, HttpResponseStopPolling

from engine.text import plural
from projects.access import check, needs
from projects.roles import Can

from .. import page_cache, run_page, selectors, services
from ..access import Access
from ..models import Run
from .common import owner, share_view, visitor
from .exports import export_links

# Rows changed this close before the last poll are sent again: a worker's clock may lag the web server's a
# little (separate hosts), and sending a row twice costs nothing.
SINCE_MARGIN = timedelta(seconds=5)
# While a run is live, the sections that read many rows (repeated evals' strips and statistics, gates) come
# with a poll this long apart, not every second. The last poll, when the run ends, has them all.
WHOLE_EVERY = timedelta(seconds=5)


def _stamp(request: HttpRequest, name: str) -> datetime | None:
    """A time the page sent back (ms since the epoch, as the poll's URL gave it), or None."""
    value = request.GET.get(name, "")
    if not value.isdigit() or len(value) > 15:
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):  # past the year 9999: not a time the page sent
        return None


def _since(request: HttpRequest) -> datetime | None:
    """When the page last heard from the server (the poll's `since`), less the margin."""
    since = _stamp(request, "since")
    return since - SINCE_MARGIN if since is not None else None


def _context(request: HttpRequest, page: run_page.RunPage, *, oob: bool = False) -> dict:
    """The page's template context, with a settled run's conversation table rendered once and cached."""
    context = page.context()
    if page.table_key and page.conversations_html is None:
        html = render_to_string("runs/run/_conversations.html", {**context, "oob": oob}, request)
        page_cache.store_table(page.table_key, str(html), page.triage["page"].number)
        context["conversations_html"] = html
    return context


def _run_page(request: HttpRequest, access: Access) -> HttpResponse:
    page = run_page.build(
        access,
        request.GET,
        exports=export_links(access),
        absolute_uri=request.build_absolute_uri,
        viewer=request.user,
    )
    return render(request, "runs/detail.html", _context(request, page))


def _progress(request: HttpRequest, access: Access) -> HttpResponse:
    run = access.run
    progress = run_page.progress_of(run, selectors.suite_facts(run))
    live = run_page.is_live(run, progress)
    if live and request.GET.get("fp") == run_page.fingerprint(run, progress):
        return HttpResponse(status=204)  # nothing changed: htmx keeps what it shows and polls again
    whole = _stamp(request, "whole")
    due = not live or whole is None or timezone.now() - whole >= WHOLE_EVERY
    page = run_page.build(
        access,
        request.GET,
        exports=export_links(access),
        absolute_uri=request.build_absolute_uri,
        progress=progress,
        since=_since(request),
        whole_sent=None if due else whole,
        oob=True,
        viewer=request.user,
    )
    html = render_to_string("runs/run/_poll.html", _context(request, page, oob=True), request)
    return HttpResponse(html) if live else HttpResponseStopPolling(html)


@needs(Can.VIEW)
@login_required
@require_GET
def detail(request: HttpRequest, run_id) -> HttpResponse:
    return _run_page(request, owner(request, run_id))


@needs(Can.VIEW)
@login_required
@require_GET
def progress(request: HttpRequest, run_id) -> HttpResponse:
    return _progress(request, owner(request, run_id))


@needs(Can.EDIT)
@login_required
@require_POST
def cancel(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id, Can.EDIT)
    if services.cancel(run, by=request.user):
        messages.success(
            request, "Run cancelled. Conversations already talking to the model stop after this turn."
        )
    else:
        messages.info(request, "The run had already finished.")
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("runs:detail", run_id=run.pk)


@needs(Can.EDIT)
@login_required
@require_POST
def retry_errored(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id, Can.EDIT)
    try:
        count = services.retry_errored(run, by=request.user)
    except services.RetryRefused as exc:
        messages.info(request, f"Nothing retried: {exc}.")
    else:
        messages.success(
            request,
            f"Retrying {plural(count, 'errored conversation')}: each resumes after its last stored turn.",
        )
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("runs:detail", run_id=run.pk)


def _json(access: Access) -> HttpResponse:
    run = access.run
    version = run.suite_version
    response = selectors.streamed_report(run)
    filename = f"{slugify(version.suite.name) or 'suite'}-v{version.number}-{str(run.pk)[:8]}.json"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    return response


@needs(Can.VIEW)
@login_required
@require_GET
def results_json(request: HttpRequest, run_id) -> HttpResponse:
    return _json(owner(request, run_id))


def _share_panel(request: HttpRequest, run: Run, *, created=None) -> HttpResponse:
    if request.htmx:
        context = {
            "run": run,
            "share_links": run_page.share_links(run, request.build_absolute_uri, request.user),
            "created": created,
            "share_open": True,
            "share_oob": True,  # the count on the header's Share button follows
        }
        return render(request, "runs/run/_share.html", context)
    return redirect(reverse("runs:detail", args=[run.pk]) + "#share")


@needs(Can.EDIT)
@login_required
@require_POST
def share(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id, Can.EDIT)
    lifetime = request.POST.get("expires", "")
    if lifetime not in services.LINK_LIFETIMES:
        return HttpResponseBadRequest("expires: choose never, 7 or 30 (days)")
    link = services.create_share_link(run, request.user, lifetime=services.LINK_LIFETIMES[lifetime])
    if not request.htmx:
        messages.success(request, "Share link created. Anyone with the link can view this run, read-only.")
    return _share_panel(request, run, created=link.pk)


@needs(Can.VIEW)
@login_required
@require_POST
def revoke(request: HttpRequest, run_id, link_id: int) -> HttpResponse:
    """A member revokes the links they made whatever their role now (revoking only takes access away: a
    member made a viewer keeps no way in for strangers); another member's takes an admin."""
    run = selectors.get_run_for_user(request.user, run_id)
    link = get_object_or_404(run.share_links, pk=link_id)
    if link.created_by_id != request.user.pk:  # another member's link
        check(request.user, run.project_id, Can.MANAGE)
    services.revoke_share_link(link, by=request.user)
    if not request.htmx:
        messages.success(request, "Share link revoked. It no longer opens this run.")
    return _share_panel(request, run)


@share_view
def shared_run(request: HttpRequest, token: str) -> HttpResponse:
    return _run_page(request, visitor(token))


@share_view
def shared_progress(request: HttpRequest, token: str) -> HttpResponse:
    return _progress(request, visitor(token))


@share_view
def shared_json(request: HttpRequest, token: str) -> HttpResponse:
    return _json(visitor(token))
