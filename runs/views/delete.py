"""Deleting a finished run, for its project's admins: a page that says what goes, then the deletion."""

from __future__ import annotations

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
def delete_run(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id, Can.MANAGE)
    label = run.audit_label
    error = "the run is still going: cancel it first" if run.is_active else ""
    if request.method == "POST" and not error:
        try:
            services.delete_run(run, by=request.user)
        except services.DeleteRefused as exc:
            error = str(exc)
        else:
            messages.success(request, f"Deleted {label}. The project's audit log keeps its name.")
            return redirect("runs:list")
    context = {
        "title": "Delete this run?",
        "what": label,
        "goes": "Its conversations, turns, labels, overrides and share links go with it.",
        "error": error,
        "back": reverse("runs:detail", args=[run.pk]),
        "button": "Delete the run",
    }
    return render(
        request,
        "projects/confirm_delete.html",
        context,
        status=409 if error and request.method == "POST" else 200,
    )
