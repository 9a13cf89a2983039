"""A project's audit log: who did what to which, and when; newest first, by action and by member."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from .. import access
from ..audit import target_links
from ..models import Action, Project
from ..roles import Can

EVENTS_PER_PAGE = 50


def _kind(event) -> str:
    """What the target is ("suite", "user"), unless its label already says so ("run 1a2b3c4d of …")."""
    kind = event.target_kind.rpartition(".")[2]
    return "" if event.target_label.startswith(f"{kind} ") else kind


@access.needs(Can.VIEW)
@login_required
@require_GET
def audit_log(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    access.check(request.user, project.pk, Can.VIEW)
    events = project.audit_events.all()
    action = request.GET.get("action", "")
    if action in Action.values:
        events = events.filter(action=action)
    else:
        action = ""
    member = request.GET.get("member", "")
    if member:
        events = events.filter(actor_name=member)
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    links = target_links(page.object_list)
    rows = [
        {
            "event": event,
            "kind": _kind(event),
            "url": links.get((event.target_kind, event.target_id)),
            # Said of a target that went later; the deletion's own row needs no such note.
            "gone": (event.target_kind, event.target_id) not in links and event.action != Action.DELETED,
            "detail": sorted(event.detail.items()) if isinstance(event.detail, dict) else [],
        }
        for event in page.object_list
    ]
    # Everyone who acted here, members past and present: the log outlives a membership.
    actors = (
        project.audit_events.exclude(actor_name="")
        .order_by("actor_name")
        .values_list("actor_name", flat=True)
        .distinct()
    )
    context = {
        "project": project,
        "page": page,
        "rows": rows,
        "actions": Action.choices,
        "action": action,
        "actors": list(actors),
        "member": member,
        "filtering": bool(action or member),
    }
    return render(request, "projects/audit.html", context)
