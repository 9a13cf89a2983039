"""API tokens of the current project: list, create (the token is shown once, on the page that made it), revoke.

A member sees their own tokens in the project; an admin sees every member's and may revoke them. Making one
needs the editor role there, as a token acts with its user's role in its project only.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from projects.access import check, needs
from projects.current import current_project
from projects.roles import Can, allows

from .. import tokens as token_service


def _project(request: HttpRequest):
    project = current_project(request)
    if project is None:
        raise Http404("You are a member of no project yet.")
    return project


@needs(Can.VIEW, to_post=Can.EDIT)
@never_cache  # the one response that holds a new token must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    project = _project(request)
    role = check(request.user, project.pk, Can.VIEW)
    created = error = None
    name = ""
    if request.method == "POST":
        check(request.user, project.pk, Can.EDIT)
        name = request.POST.get("name", "")
        try:
            row, token = token_service.create_token(request.user, name, project, by=request.user)
        except ValueError as exc:
            error = str(exc)
        else:
            created = {"row": row, "token": token}
            name = ""
    manages = allows(role, Can.MANAGE)
    context = {
        "section": "tokens",
        "project": project,
        "tokens": token_service.tokens_in(project)
        if manages
        else token_service.tokens_of(request.user, project),
        "all_members": manages,
        "may_create": allows(role, Can.EDIT),
        "created": created,
        "error": error,
        "name": name,
        "api_base": request.build_absolute_uri("/api/"),
    }
    return render(request, "runs/tokens.html", context, status=422 if error else 200)


@needs(Can.VIEW)
@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    """Anyone may revoke their own token in the project (giving up access needs no role); another member's
    needs the admin role there."""
    project = _project(request)
    role = check(request.user, project.pk, Can.VIEW)
    if allows(role, Can.MANAGE):
        revoked = token_service.revoke_in(project, token_id, by=request.user)
    else:
        revoked = token_service.revoke(request.user, token_id, project, by=request.user)
    if revoked:
        messages.success(request, "Token revoked: it no longer works anywhere.")
    else:
        messages.info(request, "No such active token in this project: it may have been revoked already.")
    return redirect("tokens")
