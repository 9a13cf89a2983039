"""What every page's navigation shows: the current project and the user's projects to switch between."""

from __future__ import annotations

from django.http import HttpRequest

from .current import current_project, projects_of


def projects(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    # Lazy: a page that never shows the navigation (an htmx partial) reads nothing.
    return {
        "current_project": lambda: current_project(request),
        "my_projects": lambda: projects_of(request),
    }
