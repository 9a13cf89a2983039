"""Personal API tokens: made (shown once), checked on each API request, revoked.

A token belongs to a project and acts only there, as its user with their role there; a user who is no longer a
member of that project finds the token refused until they are again.

A token is `evs_` + 256 random bits; the database keeps its SHA-256 digest only, so a leaked database or
backup holds no usable token. Checking hashes the presented token and looks the digest up by its unique
index, which takes the same time whatever the token, so there is nothing to learn from timing.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from projects import audit
from projects.access import role_of
from projects.models import Action, Project

from .models import TOKEN_PREFIX, ApiToken

# last_used_at is written at most this often per token: a CI job polling progress every second must not
# turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def create_token(user, name: str, project: Project | None = None, *, by=None) -> tuple[ApiToken, str]:
    """A new token for `user` in `project` (the default project when None): the row, and the token itself,
    which is never shown again. Whether the user may make one there is the caller's check. `by`: who made it,
    for the audit log (None: the system, e.g. the command line)."""
    name = name.strip()
    if not name:
        raise ValueError("give the token a name, e.g. ci")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user,
        project=project or Project.default(),
        name=name[:100],
        digest=digest(token),
        hint=token[:10],
    )
    audit.record(by, row.project_id, Action.TOKEN_CREATED, row, user=user.get_username())
    return row, token


def token_for(token: str) -> ApiToken | None:
    """The active token row a presented token is, with its user and project; None when it is unknown or
    revoked, its user is inactive, or its user is no longer a member of its project."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    row = (
        ApiToken.objects.select_related("user", "project")
        .filter(digest=digest(token), revoked_at__isnull=True)
        .first()
    )
    if row is None or not row.user.is_active or role_of(row.user, row.project_id) is None:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


def user_for(token: str):
    """The active user a presented token acts as, or None (see token_for)."""
    row = token_for(token)
    return None if row is None else row.user


def tokens_of(user, project: Project | None = None) -> list[ApiToken]:
    """`user`'s tokens: in `project`, or in every project when None."""
    tokens = ApiToken.objects.filter(user=user).select_related("project")
    return list(tokens if project is None else tokens.filter(project=project))


def tokens_in(project: Project) -> list[ApiToken]:
    """Every member's tokens in `project`, for its admins."""
    return list(ApiToken.objects.filter(project=project).select_related("user", "project"))


def revoke(user, token_id: int, project: Project | None = None, *, by=None) -> bool:
    """Revoke one of `user`'s tokens at once (in `project`, when given); False when it is not theirs or was
    already revoked."""
    tokens = ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True)
    if project is not None:
        tokens = tokens.filter(project=project)
    return _revoke(tokens, by)


def revoke_in(project: Project, token_id: int, *, by=None) -> bool:
    """Revoke any member's token in `project` (what its admins may do); False when there is no such active
    token there."""
    return _revoke(ApiToken.objects.filter(pk=token_id, project=project, revoked_at__isnull=True), by)


@transaction.atomic
def _revoke(tokens, by) -> bool:
    row = tokens.select_related("user").select_for_update().first()
    if row is None or not tokens.filter(pk=row.pk).update(revoked_at=timezone.now()):
        return False
    audit.record(by, row.project_id, Action.TOKEN_REVOKED, row, user=row.user.get_username())
    return True
