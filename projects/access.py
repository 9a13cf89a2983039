"""Who may do what in a project: every permission check of the site and the API goes through `check`.

A user who is not a member of an object's project finds nothing (a 404, the same answer as for something
that does not exist, so nothing is learnt of other projects); a member whose role is too low for the action
gets a 403 that names the role it needs. Superusers act as admins of every project.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from .models import Membership, Project
from .roles import LEAST_ROLE, Can, Role, allows

_ROLES = "_project_roles"  # a user's roles by project id, kept on the user object for one request


def roles_of(user) -> dict[int, Role]:
    """Every project the user is a member of, with their role there: read once per request."""
    if not user.is_authenticated:
        return {}
    roles = getattr(user, _ROLES, None)
    if roles is None:
        if user.is_superuser:
            roles = {pk: Role.ADMIN for pk in Project.objects.values_list("pk", flat=True)}
        else:
            roles = {
                pk: Role(role)
                for pk, role in Membership.objects.filter(user=user).values_list("project_id", "role")
            }
        setattr(user, _ROLES, roles)
    return roles


def role_of(user, project_id: int) -> Role | None:
    """The user's role in the project; None when they are not a member."""
    return roles_of(user).get(project_id)


def check(user, project_id: int, can: Can) -> Role:
    """The user's role in the project, when it allows the action; otherwise Http404 for a non-member and
    PermissionDenied for a member whose role is too low."""
    role = role_of(user, project_id)
    if role is None:
        raise Http404("No such page")
    if not allows(role, can):
        raise PermissionDenied(f"This needs the {LEAST_ROLE[can].label.lower()} role in this project.")
    return role


def projects_for(user) -> QuerySet[Project]:
    """The projects the user may see, by name."""
    return Project.objects.filter(pk__in=list(roles_of(user)))


def needs(can: Can, *, to_post: Can | None = None) -> Callable:
    """Marks a view with the action it takes (`to_post`: what a POST to a page that also shows a form
    takes, when it is more). The view itself checks it against the project of what it finds (`check`);
    the mark lets the tests hold every URL to a declared action."""

    def mark(view):
        view.needs = can
        view.needs_to_post = to_post or can
        return view

    return mark
