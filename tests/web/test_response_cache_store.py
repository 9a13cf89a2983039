"""The server's store (runs.response_cache): the database's, bounded and expiring; Redis's, whose purge takes
only the cache's own keys."""

from __future__ import annotations

import os
import time

import pytest
from django.conf import settings
from django.test import override_settings

from runs import response_cache

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = {"text": "hello", "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cost": 0.5}


def test_the_database_store_keeps_answers_until_their_ttl_and_within_its_bound():
    response_cache.purge()
    store = response_cache.store()
    store.put("a" * 64, ANSWER)
    assert store.get("a" * 64) == ANSWER and store.get("b" * 64) is None
    size = response_cache.size()
    assert size.backend == "database" and size.entries == 1 and size.bytes > 0 and size.oldest is not None

    store.inner.cache.default_timeout = 1  # as EVALSITE_CACHE_TTL=1 sets it
    store.put("c" * 64, ANSWER)
    time.sleep(1.2)
    assert store.get("c" * 64) is None  # expired
    store.inner.cache.default_timeout = settings.EVALSITE_CACHE_TTL

    store.inner.cache._max_entries, store.inner.cache._cull_frequency = (
        3,
        3,
    )  # as EVALSITE_CACHE_MAX_ENTRIES=3 bounds it
    for n in range(6):
        store.put(f"{n:064d}", ANSWER)
    assert response_cache.size().entries <= 3 + 1  # a cull comes before the entry that set it off
    assert response_cache.purge() >= 1 and response_cache.size().entries == 0


REDIS = os.environ.get("TEST_CACHE_REDIS_URL", "redis://127.0.0.1:6379/11")


def _redis():
    import redis

    client = redis.Redis.from_url(REDIS, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {REDIS}")
    return client


def test_the_redis_store_counts_and_purges_its_own_keys_only():
    client = _redis()
    client.set("someone-elses-key", "kept")
    redis_cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS,
        "KEY_PREFIX": "evalsite-responses-test",
        "TIMEOUT": 60,
    }
    with override_settings(CACHES={**settings.CACHES, "responses": redis_cache}):
        response_cache.purge()
        store = response_cache.store()
        store.put("a" * 64, ANSWER)
        store.put("b" * 64, ANSWER)
        assert store.get("a" * 64) == ANSWER
        size = response_cache.size()
        assert size.backend == "redis" and size.entries == 2 and size.bytes > 0 and size.oldest is not None
        assert response_cache.purge() == 2
        assert store.get("a" * 64) is None and response_cache.size().entries == 0
    assert client.get("someone-elses-key") == b"kept"
    client.delete("someone-elses-key")


def test_a_cache_that_is_away_costs_misses_and_is_said_once_for_every_conversation(caplog):
    away = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        "OPTIONS": {"socket_connect_timeout": 1},
    }
    caplog.set_level("WARNING", logger="runs.response_cache")
    with override_settings(CACHES={**settings.CACHES, "responses": away}):
        for _ in range(3):  # three conversations, each with its own store
            store = response_cache.store()
            assert store.get("a" * 64) is None
            store.put("a" * 64, ANSWER)
    said = [record.getMessage() for record in caplog.records if record.name == "runs.response_cache"]
    assert len(said) == 1 and "could not be read" in said[0]


def test_what_is_said_seldom_counts_what_it_left_unsaid():
    said = []
    seldom = response_cache.SaidSeldom(said.append, seconds=0.2)
    for _ in range(3):
        seldom("away")
    time.sleep(0.25)
    seldom("away")
    assert said == ["away", "away (and 2 more like it since)"]
