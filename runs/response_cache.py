"""The server's response cache (engine.cache): one store every worker shares, Django's `responses` cache.

That is the database (DatabaseCache: a size bound culls the oldest keys, entries expire after
EVALSITE_CACHE_TTL) unless EVALSITE_CACHE_URL names a Redis (RedisCache, under a key prefix of its own).
The admin's page (runs.admin) reads `size` and calls `purge`.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.db import DatabaseCache
from django.db import connections, router
from django.utils import timezone

from engine.cache import GuardedStore

log = logging.getLogger(__name__)

ALIAS = "responses"


class DjangoStore:
    """engine.cache.ResponseStore over the `responses` cache. A worker reads it from threads of its own, so
    a database connection opened for it goes back to the pool at once (a pool needs its connections back)."""

    def __init__(self) -> None:
        self.cache = caches[ALIAS]
        # The site's secret key, never stored, keys the digest of secrets' values (engine.cache.secrets_digest).
        self.pepper = hmac.new(
            settings.SECRET_KEY.encode(), b"evalsite response cache", hashlib.sha256
        ).digest()

    def get(self, key: str) -> dict | None:
        try:
            return self.cache.get(key)
        finally:
            _release(self.cache)

    def put(self, key: str, value: dict) -> None:
        try:
            self.cache.set(key, value)
        finally:
            _release(self.cache)


def _release(cache) -> None:
    if isinstance(cache, DatabaseCache):
        connection = connections[router.db_for_write(cache.cache_model_class)]
        if connection.settings_dict.get("CONN_MAX_AGE") == 0 and not connection.in_atomic_block:
            connection.close()


class SaidSeldom:
    """`say`, at most once every `seconds` in this process, with how many were left unsaid meanwhile: every
    conversation a worker plays meets a cache that is away, and each says so (engine.cache.GuardedStore)."""

    def __init__(self, say: Callable[[str], None], seconds: float) -> None:
        self.say = say
        self.seconds = seconds
        self.lock = threading.Lock()
        self.last: float | None = None
        self.unsaid = 0

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        with self.lock:
            if self.last is not None and now - self.last < self.seconds:
                self.unsaid += 1
                return
            self.last, unsaid, self.unsaid = now, self.unsaid, 0
        self.say(f"{message} (and {unsaid} more like it since)" if unsaid else message)


# A cache that stays away is said once a minute in a worker's log, not once per conversation.
SAY_AGAIN_SECONDS = 60.0
_say = SaidSeldom(log.warning, SAY_AGAIN_SECONDS)


def store() -> GuardedStore:
    """The shared cache for one conversation: a failure costs a miss, and is said seldom (SaidSeldom)."""
    return GuardedStore(DjangoStore(), _say)


@dataclass(frozen=True)
class Size:
    """What the cache holds: entries, their approximate bytes, when the oldest was stored (None: empty)."""

    backend: str
    entries: int
    bytes: int
    oldest: datetime | None


def size() -> Size:
    cache = caches[ALIAS]
    if isinstance(cache, DatabaseCache):
        table = connections["default"].ops.quote_name(cache._table)
        with connections["default"].cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*), SUM(LENGTH(value)), MIN(expires) FROM {table}")  # noqa: S608
            entries, size_bytes, first_expiry = cursor.fetchone()
        if isinstance(first_expiry, str):  # SQLite hands the timestamp back as text
            first_expiry = datetime.fromisoformat(first_expiry)
        if first_expiry is not None and timezone.is_naive(first_expiry):
            first_expiry = timezone.make_aware(first_expiry, UTC)
        stored = first_expiry - timedelta(seconds=settings.EVALSITE_CACHE_TTL) if first_expiry else None
        return Size("database", entries or 0, int(size_bytes or 0), stored)
    client = cache._cache.get_client(write=False)
    entries = size_bytes = 0
    least_ttl: int | None = None
    for key in client.scan_iter(match=f"{cache.key_prefix}:*", count=1000):
        entries += 1
        size_bytes += client.strlen(key)
        ttl = client.ttl(key)
        least_ttl = ttl if least_ttl is None or 0 <= ttl < least_ttl else least_ttl
    oldest = None
    if least_ttl is not None and least_ttl >= 0:
        oldest = timezone.now() - timedelta(seconds=settings.EVALSITE_CACHE_TTL - least_ttl)
    return Size("redis", entries, size_bytes, oldest)


def purge() -> int:
    """Empty the cache; how many entries it held. Only the cache's own keys go: a Redis may hold others."""
    held = size().entries
    cache = caches[ALIAS]
    if isinstance(cache, DatabaseCache):
        cache.clear()
    else:
        client = cache._cache.get_client(write=True)
        keys = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    return held
