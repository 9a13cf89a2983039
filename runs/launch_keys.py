"""Idempotency keys of the launch routes (`POST /api/runs`, `POST /api/matrices`): a client that lost the answer
to a launch (a dropped connection, a timeout) sends it again with the same `Idempotency-Key` and gets the run
or matrix the first one made, not a second version and launch. Keys are per user, kept for
EVALSITE_IDEMPOTENCY_HOURS; the same key with another body is refused, since returning the first launch for it
would answer a launch that was never made."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import LaunchKey, Run, RunMatrix

MAX_KEY_CHARS = 200
HEADER = "Idempotency-Key"

Launched = TypeVar("Launched", Run, RunMatrix)


class KeyRefused(Exception):
    """The key cannot be used for this launch; the message says why."""


def once(request, project, body: dict, launch: Callable[[], Launched]) -> tuple[Launched, bool]:
    """What `launch` makes, in one transaction with the request's key (if it sent one), and True; or, when an
    unexpired earlier launch of the same body sent that key, what it made and False. KeyRefused for a key that
    is malformed or was sent with another body."""
    raw = request.headers.get(HEADER)
    if raw is None:
        with transaction.atomic():
            return launch(), True
    user, key = request.user, clean_key(raw)
    # The project is part of what was asked: the same key and body from two projects' tokens are two launches.
    body_fingerprint = fingerprint({**body, "project": project.slug})
    earlier = _earlier(user, key, body_fingerprint)
    if earlier is not None:
        return earlier, False
    try:
        # The key, then the launch (a new version, its runs and conversations): all committed, or none. The
        # runs' dispatch waits for the commit (create_run's on_commit).
        with transaction.atomic():
            claimed = _claim(user, key, body_fingerprint)
            made = launch()
            _attach(claimed, made)
    except IntegrityError:
        # The same key, launched at the same moment by another request, which committed first.
        earlier = _earlier(user, key, body_fingerprint)
        if earlier is None:
            raise
        return earlier, False
    return made, True


def clean_key(raw: str) -> str:
    key = raw.strip()
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise KeyRefused(f"{HEADER} must be 1 to {MAX_KEY_CHARS} printable characters")
    return key


def fingerprint(body: dict) -> str:
    """What identifies a launch's body, whatever the order of its keys."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _earlier(user, key: str, body_fingerprint: str) -> Run | RunMatrix | None:
    """The run or matrix an unexpired earlier launch with this key made, or None. KeyRefused when that launch
    had another body."""
    LaunchKey.objects.filter(user=user, expires_at__lte=timezone.now()).delete()
    found = (
        LaunchKey.objects.filter(user=user, key=key)
        .select_related("run__suite_version__suite", "matrix__suite_version__suite", "matrix__project")
        .first()
    )
    if found is None:
        return None
    if found.fingerprint != body_fingerprint:
        raise KeyRefused(
            f"this {HEADER} was used for a launch with another body: send a new key for a new launch"
        )
    return found.matrix if found.matrix_id is not None else found.run


def _claim(user, key: str, body_fingerprint: str) -> LaunchKey:
    """Store the key first in the launch's transaction: a concurrent launch with the same key waits on its
    unique index until this one commits (then fails with IntegrityError) or rolls back (then goes on)."""
    now = timezone.now()
    return LaunchKey.objects.create(
        user=user,
        key=key,
        fingerprint=body_fingerprint,
        created_at=now,
        expires_at=now + timedelta(hours=settings.EVALSITE_IDEMPOTENCY_HOURS),
    )


def _attach(claimed: LaunchKey, made: Run | RunMatrix) -> None:
    if isinstance(made, RunMatrix):
        claimed.matrix = made
        claimed.save(update_fields=["matrix"])
    else:
        claimed.run = made
        claimed.save(update_fields=["run"])
