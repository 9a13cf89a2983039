"""Deleting a finished run, for its project's admins: a page that says what goes, then the deletion."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from projects import access
from projects.deleting import Deletion, confirm_delete
from projects.roles import Can

from .. import selectors, services


@access.needs(Can.MANAGE)
@login_required
@require_http_methods(["GET", "POST"])
def delete_run(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id, Can.MANAGE)
    deletion = Deletion(
        title="Delete this run?",
        what=run.audit_label,
        goes="Its conversations, turns, labels, overrides and share links go with it.",
        button="Delete the run",
        back=reverse("runs:detail", args=[run.pk]),
        done="runs:list",
        delete=lambda: services.delete_run(run, by=request.user),
        kept=services.STILL_GOING if run.is_active else "",
    )
    return confirm_delete(request, deletion)
