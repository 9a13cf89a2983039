"""Personal API tokens: made (shown once), checked on each API request, revoked.

A token is `evs_` + 256 random bits; the database keeps its SHA-256 digest only, so a leaked database or
backup holds no usable token. Checking hashes the presented token and looks the digest up by its unique
index, which takes the same time whatever the token, so there is nothing to learn from timing.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from .models import TOKEN_PREFIX, ApiToken

# last_used_at is written at most this often per token: a CI job polling progress every second must not
# turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`: the row, and the token itself, which is never shown again."""
    name = name.strip()
    if not name:
        raise ValueError("give the token a name, e.g. ci")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(user=user, name=name[:100], digest=digest(token), hint=token[:10])
    return row, token


def user_for(token: str):
    """The active user a presented token acts as, or None (unknown, revoked, or the user is inactive)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    row = (
        ApiToken.objects.select_related("user").filter(digest=digest(token), revoked_at__isnull=True).first()
    )
    if row is None or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def tokens_of(user) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user))


def revoke(user, token_id: int) -> bool:
    """Revoke one of `user`'s tokens at once; False when it is not theirs or was already revoked."""
    return bool(
        ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )
