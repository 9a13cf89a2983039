"""Idempotency keys of `POST /api/runs`: a client that lost the answer to a launch (a dropped connection, a
timeout) sends it again with the same `Idempotency-Key` and gets the run the first one made, not a second
version and run. Keys are per user, kept for EVALSITE_IDEMPOTENCY_HOURS; the same key with another body is
refused, since returning the first run for it would answer a launch that was never made."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import LaunchKey, Run

MAX_KEY_CHARS = 200


class KeyRefused(Exception):
    """The key cannot be used for this launch; the message says why."""


def clean_key(raw: str) -> str:
    key = raw.strip()
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise KeyRefused(f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} printable characters")
    return key


def fingerprint(body: dict) -> str:
    """What identifies a launch's body, whatever the order of its keys."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def earlier_run(user, key: str, body_fingerprint: str) -> Run | None:
    """The run an unexpired earlier launch with this key made, or None. KeyRefused when that launch had
    another body."""
    LaunchKey.objects.filter(user=user, expires_at__lte=timezone.now()).delete()
    found = LaunchKey.objects.filter(user=user, key=key).select_related("run__suite_version__suite").first()
    if found is None:
        return None
    if found.fingerprint != body_fingerprint:
        raise KeyRefused(
            "this Idempotency-Key was used for a launch with another body: send a new key for a new launch"
        )
    return found.run


def claim(user, key: str, body_fingerprint: str) -> LaunchKey:
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


def attach(claimed: LaunchKey, run: Run) -> None:
    claimed.run = run
    claimed.save(update_fields=["run"])
