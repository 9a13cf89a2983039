"""The project an API request acts in, and the permission check for it.

A bearer token acts only in its own project (the API's authentication puts it on the request as
`token_project`); a session acts in the project a request names by slug, else the current one
(projects.current). Either way the user's role there decides, through projects.access.check.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest

from .access import check
from .current import current_project
from .models import Project
from .roles import Can, Role

TOKEN_PROJECT = "token_project"


class TokenElsewhere(Http404):
    """A token asked to act in a project other than its own: nothing is found there, and the answer says why
    (the token's own project is no secret to its holder)."""


def token_project(request: HttpRequest) -> Project | None:
    """The project of the token the request came with; None for a session."""
    return getattr(request, TOKEN_PROJECT, None)


def request_project(request: HttpRequest, can: Can, slug: str | None = None) -> Project:
    """The project the request acts in, once the user's role there allows `can`.

    Raises Http404 for a project the user is not a member of (or no project at all) and TokenElsewhere for a
    token asked to act in another project than its own; PermissionDenied for a role too low."""
    own = token_project(request)
    if own is not None:
        if slug and slug != own.slug:
            raise TokenElsewhere(f"this token acts only in the project {own.slug!r}")
        project = own
    elif slug:
        project = Project.objects.filter(slug=slug).first()
    else:
        project = current_project(request)
    if project is None:
        raise Http404("No such project")
    check(request.user, project.pk, can)
    return project


def check_request(request: HttpRequest, project_id: int, can: Can) -> Role:
    """projects.access.check for an API request: a token's request finds nothing outside its project."""
    own = token_project(request)
    if own is not None and own.pk != project_id:
        raise Http404("No such page")
    return check(request.user, project_id, can)
