"""The server's response cache (engine.cache): one store every worker shares, in the database or in Redis.

The database's is a table (runs.models.CachedAnswer) unless EVALSITE_CACHE_URL names a Redis: then Django's
`responses` cache (RedisCache) gives the connection and the key prefix, and the answers are kept as JSON
under it with an index of their keys by the time each was kept. Either way every answer is kept with that
time and refused once older than EVALSITE_CACHE_TTL as it is now (a TTL shortened holds for answers kept
before it), and a put that passes EVALSITE_CACHE_MAX_ENTRIES drops the answers past the TTL, then the oldest,
until a tenth of the bound is free. The admin's page (runs.admin) reads `size` and calls `purge`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.db import connections, router
from django.db.models import Count, Min, Sum
from django.db.models.functions import Length
from django.utils import timezone

from engine.cache import GuardedStore

from .models import CachedAnswer

log = logging.getLogger(__name__)

ALIAS = "responses"
# The Redis sorted set of the cache's keys, scored by the time each answer was kept (under the key prefix).
INDEX = "kept"


def _pepper() -> bytes:
    # The site's secret key, never stored, keys the digest of secrets' values (engine.cache.secrets_digest).
    return hmac.new(settings.SECRET_KEY.encode(), b"evalsite response cache", hashlib.sha256).digest()


def _redis() -> RedisCache | None:
    """Django's `responses` cache when the settings name a Redis for it (EVALSITE_CACHE_URL), else None."""
    if ALIAS not in settings.CACHES:
        return None
    cache = caches[ALIAS]
    return cache if isinstance(cache, RedisCache) else None


def _kept(size: int) -> int:
    """How many answers a cull keeps: a tenth of the bound (at least one answer) is freed, so that the next
    puts do not cull again one by one."""
    return max(0, size - max(1, size // 10))


class DatabaseStore:
    """engine.cache.ResponseStore over the CachedAnswer table. A worker reads it from threads of its own, so
    a database connection opened for it goes back to the pool at once (a pool needs its connections back)."""

    def __init__(self) -> None:
        self.pepper = _pepper()
        self.ttl = settings.EVALSITE_CACHE_TTL
        self.max_entries = settings.EVALSITE_CACHE_MAX_ENTRIES

    def get(self, key: str) -> dict | None:
        if self.ttl <= 0:
            return None
        fresh = CachedAnswer.objects.filter(kept_at__gte=timezone.now() - timedelta(seconds=self.ttl))
        try:
            found = fresh.filter(key=key).values_list("answer", flat=True).first()
        finally:
            _release()
        return _read(found) if found is not None else None

    def put(self, key: str, value: dict) -> None:
        if self.ttl <= 0:  # a TTL of 0 keeps nothing
            return
        now = timezone.now()
        answer = CachedAnswer(key=key, answer=json.dumps(value, ensure_ascii=False), kept_at=now)
        try:
            CachedAnswer.objects.bulk_create(
                [answer], update_conflicts=True, unique_fields=["key"], update_fields=["answer", "kept_at"]
            )
            if CachedAnswer.objects.count() > self.max_entries:
                self._cull(now)
        finally:
            _release()

    def _cull(self, now: datetime) -> None:
        """The answers past the TTL go, then the oldest until a tenth of the bound is free. Two workers culling
        at once each delete what they found: the table ends at most as full as either left it."""
        CachedAnswer.objects.filter(kept_at__lt=now - timedelta(seconds=self.ttl)).delete()
        over = CachedAnswer.objects.count() - _kept(self.max_entries)
        if over > 0:
            oldest = CachedAnswer.objects.order_by("kept_at", "key").values("key")[:over]
            CachedAnswer.objects.filter(key__in=oldest).delete()


def _read(found: str | bytes) -> dict | None:
    """An entry as kept; None (a miss, which the model's answer then replaces) when it is no JSON object: an
    entry written otherwise, or damaged."""
    try:
        value = json.loads(found)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _release() -> None:
    connection = connections[router.db_for_write(CachedAnswer)]
    if connection.settings_dict.get("CONN_MAX_AGE") == 0 and not connection.in_atomic_block:
        connection.close()


# Keeps an answer and its place in the index in one step, and culls when the index passes the bound: the
# answers past the TTL, then the oldest, until a tenth of the bound is free. As one script it is atomic: no
# other put or read sees the index and the answers apart, and two workers never cull the same answers twice.
# KEYS: the index, the answer's key. ARGV: the answer, the TTL, now, the bound, how many a cull keeps.
PUT = """
local index, key = KEYS[1], KEYS[2]
local ttl, now, bound, keep = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('SET', key, ARGV[1], 'EX', ttl)
redis.call('ZADD', index, now, key)
if redis.call('ZCARD', index) <= bound then
  return 0
end
local function drop(keys)
  for first = 1, #keys, 1000 do
    redis.call('DEL', unpack(keys, first, math.min(first + 999, #keys)))
  end
  for first = 1, #keys, 1000 do
    redis.call('ZREM', index, unpack(keys, first, math.min(first + 999, #keys)))
  end
  return #keys
end
local dropped = drop(redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. (now - ttl)))
local over = redis.call('ZCARD', index) - keep
if over > 0 then
  dropped = dropped + drop(redis.call('ZRANGE', index, 0, over - 1))
end
return dropped
"""


class RedisStore:
    """engine.cache.ResponseStore in a Redis: each answer as JSON with the time it was kept, under the
    `responses` cache's key prefix, and the index that bounds them (PUT). Redis's own expiry drops an answer
    after the TTL it was kept with; a TTL shortened since holds at reading."""

    def __init__(self, cache: RedisCache) -> None:
        self.cache = cache
        self.pepper = _pepper()
        self.ttl = settings.EVALSITE_CACHE_TTL
        self.max_entries = settings.EVALSITE_CACHE_MAX_ENTRIES

    def _name(self, key: str) -> str:
        return f"{self.cache.key_prefix}:{key}"

    def get(self, key: str) -> dict | None:
        if self.ttl <= 0:
            return None
        found = self.cache._cache.get_client(write=False).get(self._name(key))
        if found is None:
            return None
        value = _read(found)
        kept = value.get("kept_at") if value is not None else None
        if not isinstance(kept, float) or time.time() - kept > self.ttl:
            return None
        return value

    def put(self, key: str, value: dict) -> None:
        if self.ttl <= 0:  # a TTL of 0 keeps nothing
            return
        now = time.time()
        client = self.cache._cache.get_client(write=True)
        answer = json.dumps({**value, "kept_at": now}, ensure_ascii=False)
        client.register_script(PUT)(
            keys=[self._name(INDEX), self._name(key)],
            args=[answer, self.ttl, now, self.max_entries, _kept(self.max_entries)],
        )


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
    cache = _redis()
    return GuardedStore(RedisStore(cache) if cache is not None else DatabaseStore(), _say)


@dataclass(frozen=True)
class Size:
    """The answers the cache can give (those within the TTL): how many, their approximate bytes, when the
    oldest was kept (None: none); the bound it keeps them under, and the TTL in seconds."""

    backend: str
    entries: int
    bytes: int
    oldest: datetime | None
    bound: int
    ttl: int


def size() -> Size:
    ttl, bound = settings.EVALSITE_CACHE_TTL, settings.EVALSITE_CACHE_MAX_ENTRIES
    cache = _redis()
    if cache is None:
        held = CachedAnswer.objects.filter(kept_at__gte=timezone.now() - timedelta(seconds=ttl)).aggregate(
            entries=Count("key"), bytes=Sum(Length("answer")), oldest=Min("kept_at")
        )
        return Size("database", held["entries"], int(held["bytes"] or 0), held["oldest"], bound, ttl)
    client = cache._cache.get_client(write=False)
    kept = client.zrangebyscore(f"{cache.key_prefix}:{INDEX}", time.time() - ttl, "+inf", withscores=True)
    entries = size_bytes = 0
    oldest: float | None = None
    for start in range(0, len(kept), 1000):
        chunk = kept[start : start + 1000]
        with client.pipeline(transaction=False) as pipe:
            for key, _ in chunk:
                pipe.strlen(key)
            lengths = pipe.execute()
        for (_, when), length in zip(chunk, lengths, strict=True):
            if length:  # an answer Redis has let go of before its index knew (an eviction) is no answer
                entries += 1
                size_bytes += length
                oldest = when if oldest is None else min(oldest, when)
    stored = datetime.fromtimestamp(oldest, UTC) if oldest is not None else None
    return Size("redis", entries, size_bytes, stored, bound, ttl)


def purge() -> int:
    """Empty the cache; how many answers it held. Only the cache's own keys go: a Redis may hold others."""
    cache = _redis()
    if cache is None:
        return CachedAnswer.objects.all().delete()[0]
    client = cache._cache.get_client(write=True)
    index = f"{cache.key_prefix}:{INDEX}".encode()
    keys = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])
    return sum(1 for key in keys if key != index)
