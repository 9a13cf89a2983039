"""Deleting a suite no run points at, for its project's admins: a page that says what goes, or why it stays."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from projects import access
from projects.roles import Can

from .. import selectors, services


@access.needs(Can.MANAGE)
@login_required
@require_http_methods(["GET", "POST"])
def delete_suite(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    suite = selectors.get_suite_for_user(request.user, public_id, Can.MANAGE)
    name = suite.name
    error = services.why_kept(suite)
    if request.method == "POST" and not error:
        try:
            services.delete_suite(suite, by=request.user)
        except services.DeleteRefused as exc:
            error = str(exc)
        else:
            messages.success(request, f"Deleted the suite {name}. The project's audit log keeps its name.")
            return redirect("suites:list")
    context = {
        "title": "Delete this suite?",
        "what": name,
        "goes": "Every version of it and its attached files go with it. A suite that has runs stays until they "
        "are deleted: each run keeps the version it ran.",
        "error": error,
        "back": reverse("suites:detail", args=[suite.public_id]),
        "button": "Delete the suite",
    }
    return render(
        request,
        "projects/confirm_delete.html",
        context,
        status=409 if error and request.method == "POST" else 200,
    )
