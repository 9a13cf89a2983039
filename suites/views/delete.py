"""Deleting a suite no run points at, for its project's admins: a page that says what goes, or why it stays."""

from __future__ import annotations

import uuid

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
def delete_suite(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    suite = selectors.get_suite_for_user(request.user, public_id, Can.MANAGE)
    deletion = Deletion(
        title="Delete this suite?",
        what=suite.name,
        said=f"the suite {suite.name}",
        goes="Every version of it and its attached files go with it. A suite that has runs stays until they "
        "are deleted: each run keeps the version it ran.",
        button="Delete the suite",
        back=reverse("suites:detail", args=[suite.public_id]),
        done="suites:list",
        delete=lambda: services.delete_suite(suite, by=request.user),
        kept=services.why_kept(suite),
    )
    return confirm_delete(request, deletion)
