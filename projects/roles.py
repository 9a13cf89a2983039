"""What each role of a project's members may do: the one table every permission check reads.

Roles are ordered; each may do all that the ones before it may. A user who is not a member of a project
finds nothing of it (a 404, as for something that does not exist); a member whose role is too low is told
so (a 403).
"""

from __future__ import annotations

from enum import StrEnum

from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    REVIEWER = "reviewer", "Reviewer"
    EDITOR = "editor", "Editor"
    ADMIN = "admin", "Admin"


ORDER = [Role.VIEWER, Role.REVIEWER, Role.EDITOR, Role.ADMIN]


class Can(StrEnum):
    """An action a member takes, named by what it needs rather than by the page that offers it."""

    VIEW = "view"  # suites, versions, runs, transcripts, compare, exports, calibration figures, the audit log
    LABEL = "label"  # labels, overrides, the review queue
    EDIT = "edit"  # save and import suites, launch, cancel, retry, re-grade, pin, share, tokens
    MANAGE = "manage"  # members, endpoints, deleting suites and runs, others' links, tokens and overrides


LEAST_ROLE = {
    Can.VIEW: Role.VIEWER,
    Can.LABEL: Role.REVIEWER,
    Can.EDIT: Role.EDITOR,
    Can.MANAGE: Role.ADMIN,
}


def allows(role: str | None, action: Can) -> bool:
    """Whether a member of this role may take the action; None is not a member."""
    if role is None:
        return False
    return ORDER.index(Role(role)) >= ORDER.index(LEAST_ROLE[action])
