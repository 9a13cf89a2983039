"""Finding runs: one of a project the user is a member of (projects.access.check: a non-member gets a 404, a
role too low a 403) or one shared by an active link, and the lists of runs the pages show, counted by status."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import Http404
from django.shortcuts import get_object_or_404

from endpoints.models import Endpoint
from projects.access import check, role_of, roles_of
from projects.roles import Can

from ..models import ACTIVE, Conversation, Run, ShareLink, Status


def _runs() -> QuerySet[Run]:
    # A list of runs needs none of their stored summaries (Run.summary, a line per eval for some suites), and
    # no page of a run needs its version's YAML, which a large suite makes large.
    return Run.objects.select_related("suite_version__suite", "created_by").defer(
        "summary", "suite_version__source"
    )


def runs_for(user) -> QuerySet[Run]:
    """Every run of every project the user is a member of."""
    return _runs().filter(project_id__in=list(roles_of(user)))


def runs_in(project) -> QuerySet[Run]:
    """The runs of one project, whoever launched them."""
    return _runs().filter(project=project)


def with_counts(runs: Iterable[Run]) -> list[Run]:
    """The runs of a page (already cut to it), each with its conversations counted by status, in one query
    over the (run, status) index. Counted in the list query itself, every conversation of every run of the
    user would be joined before the page is cut, and again for the paginator's count."""
    runs = list(runs)
    counts: dict = {run.pk: {} for run in runs}
    rows = (
        Conversation.objects.filter(run__in=[run.pk for run in runs])
        .order_by()
        .values_list("run_id", "status")
        .annotate(n=Count("pk"))
    )
    for run_id, status, n in rows:
        counts[run_id][status] = n
    for run in runs:
        by_status = counts[run.pk]
        run.conversation_count = sum(by_status.values())
        run.passed_count = by_status.get(Status.PASSED, 0)
        run.failed_count = by_status.get(Status.FAILED, 0)
        run.error_count = by_status.get(Status.ERROR, 0)
        # Still talking to the model: a cancelled run has some until their current turn ends.
        run.in_flight_count = sum(by_status.get(status, 0) for status in ACTIVE)
    return runs


def recent_runs(user, limit: int, **filters) -> list[Run]:
    """The newest runs the user may see matching `filters` (a suite's, a version's), counted by status."""
    return with_counts(runs_for(user).filter(**filters).order_by("-created_at")[:limit])


def with_last_run(suites: QuerySet, user) -> QuerySet:
    """Suites annotated with the last run of each, by any member: last_run_id, last_run_status, last_run_at."""
    last_run = Run.objects.filter(suite_version__suite=OuterRef("pk")).order_by("-created_at")
    return suites.annotate(
        last_run_id=Subquery(last_run.values("pk")[:1]),
        last_run_status=Subquery(last_run.values("status")[:1]),
        last_run_at=Subquery(last_run.values("created_at")[:1]),
    )


def recent_models(user, limit: int) -> list[tuple[str, str]]:
    """(endpoint name, model reference) of the user's `limit` newest runs, newest first."""
    return list(
        Run.objects.filter(created_by=user)
        .order_by("-created_at")
        .values_list("endpoint_name", "model")[:limit]
    )


def last_model_on(endpoint: Endpoint) -> str | None:
    """The model reference the newest run on this endpoint used, if any run did."""
    return (
        Run.objects.filter(endpoint_name=endpoint.name)
        .order_by("-created_at")
        .values_list("model", flat=True)
        .first()
    )


def get_run_for_user(user, run_id, can: Can = Can.VIEW) -> Run:
    """The run, when the user's role in its project allows `can` (a 404 for a non-member, a 403 for a role
    too low)."""
    run = get_object_or_404(_runs(), pk=run_id)
    check(user, run.project_id, can)
    return run


class ShareLinkGone(Http404):
    """The token names no active share link: it was revoked or expired, or never existed."""


def get_shared_run(token: str) -> tuple[Run, ShareLink]:
    """The run an active link shares. A link whose maker is no longer an active member of the run's project
    opens nothing, revoked or not: removing a member or deactivating a user revokes their links, and this
    holds for whatever path took their access away without doing so (a script, a database edit)."""
    link = (
        ShareLink.objects.active()
        .select_related("run__suite_version__suite", "created_by")
        .filter(token=token)
        .first()
    )
    if link is None or not link.created_by.is_active or role_of(link.created_by, link.run.project_id) is None:
        raise ShareLinkGone("no active share link with this token")
    return link.run, link


def get_conversation(run: Run, index: int, iteration: int = 0) -> Conversation:
    return get_object_or_404(run.conversations.all(), index=index, iteration=iteration)


def conversations(run: Run) -> list[Conversation]:
    """Every conversation of the run, in suite order (index, then iteration)."""
    return list(run.conversations.all())


def active_share_links(run: Run) -> list[ShareLink]:
    return list(run.share_links.active().select_related("created_by"))


def project_share_links(project_id: int) -> list[ShareLink]:
    """Every active link to the project's runs, newest first, with its maker and its run's suite."""
    links = ShareLink.objects.active().filter(run__project_id=project_id)
    return list(links.select_related("created_by", "run__suite_version__suite"))
