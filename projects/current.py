"""The project a signed-in user is working in: the one they switched to last (kept in the session), else
their first. List pages show its items, and a new suite goes into it.
"""

from __future__ import annotations

from django.http import HttpRequest

from .access import projects_for
from .models import Project

SESSION_KEY = "current_project_id"
_CACHE = "_current_project"
_MINE = "_my_projects"


def projects_of(request: HttpRequest) -> list[Project]:
    """The user's projects by name, read once per request (the navigation's switcher lists them too)."""
    mine = getattr(request, _MINE, None)
    if mine is None:
        user = getattr(request, "user", None)
        mine = list(projects_for(user)) if user is not None and user.is_authenticated else []
        setattr(request, _MINE, mine)
    return mine


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
    mine = projects_of(request)
    if not mine:
        return None
    slug = request.GET.get("project")
    asked = next((project for project in mine if project.slug == slug), None) if slug else None
    if asked is not None:
        switch_to(request, asked)
        return asked
    session = getattr(request, "session", None)
    kept = session.get(SESSION_KEY) if session is not None else None
    return next((project for project in mine if project.pk == kept), mine[0])
