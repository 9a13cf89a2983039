"""The runs list: filtered by status, suite, a search over suite and model names, the CI ref it was launched
from, and launch dates; paged.

Every filter is in the URL, so a filtered list can be shared and reloaded."""

from __future__ import annotations

import uuid
from datetime import date
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from projects.access import needs
from projects.current import current_project
from projects.roles import Can
from suites.models import Suite

from .. import selectors
from ..models import ACTIVE, Run, Status
from ..timing import with_durations

RUNS_PER_PAGE = 50
REFS_SHOWN = 100  # the ref filter's choices: the most recent refs


LIST_FILTERS = {
    "": ("All", None),
    "active": ("Active", Q(status__in=ACTIVE)),
    "passed": ("Passed", Q(status=Status.PASSED)),
    "failed": ("Failed", Q(status=Status.FAILED)),
    "error": ("Error", Q(status=Status.ERROR)),
    "cancelled": ("Cancelled", Q(status=Status.CANCELLED)),
}


def _suite_filter(request: HttpRequest, project) -> tuple[Suite | None, bool]:
    """The suite named by ?suite=<public_id>, if it is the project's; and whether one was asked for at all."""
    value = request.GET.get("suite", "")
    if not value:
        return None, False
    try:
        public_id = uuid.UUID(value)
    except ValueError:
        return None, True
    return Suite.objects.filter(project=project, public_id=public_id).only("public_id", "name").first(), True


def _list_url(suite: Suite | None, status: str, search: dict | None = None) -> str:
    query = {"suite": suite.public_id if suite else None, "status": status or None, **(search or {})}
    query = {key: value for key, value in query.items() if value}
    return reverse("runs:list") + (f"?{urlencode(query)}" if query else "")


def _date(value: str) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _search(request: HttpRequest) -> dict[str, str]:
    """The search box and date fields as given (kept in every link of the page)."""
    return {key: request.GET.get(key, "").strip()[:200] for key in ("q", "model", "ref", "since", "until")}


def _refs(project) -> list[str]:
    """The CI refs of the project's runs, the most recently launched first (over the index of its CI runs)."""
    latest = (
        Run.objects.filter(project=project)
        .exclude(ref="")
        .values("ref")
        .annotate(last=Max("created_at"))
        .order_by("-last")
    )
    return [row["ref"] for row in latest[:REFS_SHOWN]]


@needs(Can.VIEW)
@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None:
        return render(request, "projects/none_yet.html")
    current = request.GET.get("status", "")
    if current not in LIST_FILTERS:
        current = ""
    suite, suite_asked = _suite_filter(request, project)
    runs = selectors.runs_in(project).order_by("-created_at")
    condition = LIST_FILTERS[current][1]
    if condition is not None:
        runs = runs.filter(condition)
    if suite is not None:
        runs = runs.filter(suite_version__suite=suite)
    search = _search(request)
    if search["q"]:  # a suite's name or a model, as people remember a run
        runs = runs.filter(
            Q(suite_version__suite__name__icontains=search["q"]) | Q(model__icontains=search["q"])
        )
    if search["model"]:
        runs = runs.filter(model__icontains=search["model"])
    if search["ref"]:
        runs = runs.filter(ref=search["ref"])
    since, until = _date(search["since"]), _date(search["until"])
    if since:
        runs = runs.filter(created_at__date__gte=since)
    if until:
        runs = runs.filter(created_at__date__lte=until)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = with_durations(selectors.with_counts(page.object_list))
    context = {
        "page": page,
        "runs": page.object_list,
        "any_active": any(run.is_active or run.in_flight_count for run in page.object_list),
        # Runs waiting with no worker to play them: said above the table, which the poll refreshes.
        "no_worker": any(run.is_active for run in page.object_list) and not selectors.live_workers()["count"],
        "filters": [(key, label, _list_url(suite, key, search)) for key, (label, _) in LIST_FILTERS.items()],
        "search": search,
        "searching": any(search.values()),
        "clear_search_url": _list_url(suite, current),
        "current": current,
        "suite": suite,
        "suite_unknown": suite_asked and suite is None,
        "every_suite_url": _list_url(None, current, search),
        "refs": _refs(project),
    }
    if request.htmx:
        return render(request, "runs/list/_table.html", context)
    return render(request, "runs/list.html", context)
