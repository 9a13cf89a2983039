"""The project a signed-in user is working in: the one they switched to last (kept in the session), else
their first. List pages show its items, and a new suite goes into it.
"""

from __future__ import annotations

from django.http import HttpRequest

from .access import projects_for, roles_of
from .models import Project

SESSION_KEY = "current_project_id"
_CACHE = "_current_project"


def switch_to(request: HttpRequest, project: Project) -> None:
    """Makes `project` the current one for the rest of this session (the caller has checked membership)."""
    session = getattr(request, "session", None)
    if session is not None:
        session[SESSION_KEY] = project.pk
    setattr(request, _CACHE, project)


def current_project(request: HttpRequest) -> Project | None:
    """The project this request works in; None for a visitor or a user who is a member of none.

    `?project=<slug>` switches to a project of the user's, so a list page's link can name its project."""
    cached = getattr(request, _CACHE, False)
    if cached is not False:
        return cached
    project = _find(request)
    setattr(request, _CACHE, project)
    return project


def _find(request: HttpRequest) -> Project | None:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    mine = roles_of(user)
    if not mine:
        return None
    slug = request.GET.get("project")
    if slug:
        asked = Project.objects.filter(slug=slug, pk__in=list(mine)).first()
        if asked is not None:
            switch_to(request, asked)
            return asked
    session = getattr(request, "session", None)
    kept = session.get(SESSION_KEY) if session is not None else None
    if kept in mine:
        project = Project.objects.filter(pk=kept).first()
        if project is not None:
            return project
    return projects_for(user).first()
