"""The server's store (runs.response_cache), the database's and a real Redis's alike: an answer is kept with the
time it was kept and refused once older than the TTL as it is now; a put past EVALSITE_CACHE_MAX_ENTRIES
drops the oldest; the admin's figures read the times kept; Redis's purge takes only the cache's own keys."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from runs import response_cache
from runs.models import CachedAnswer

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = {"text": "hello", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
AGED = 67  # seconds an answer has been kept when the TTL is shortened to a minute

# The Redis database these tests have to themselves: the test brokers take REDIS_URL's and the next (7 and 8
# under `make test-pg`, tests/settings.py), the benchmarks 9, 10, 13 and 14. Each test process keeps its keys
# under a prefix of its own there, so that two on the machine never count or purge each other's.
REDIS = os.environ.get("TEST_CACHE_REDIS_URL", "redis://127.0.0.1:6379/11")
PREFIX = f"evalsite-responses-test-{os.getpid()}"


def _redis_client():
    import redis

    client = redis.Redis.from_url(REDIS, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {REDIS}")
    return client


@pytest.fixture(params=["database", "redis"])
def backend(request):
    """Each test on the database's store and on a real Redis's (skipped, saying so, without one)."""
    if request.param == "database":
        response_cache.purge()
        yield None
        return
    client = _redis_client()
    redis_cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS,
        "KEY_PREFIX": PREFIX,
    }
    with override_settings(CACHES={**settings.CACHES, "responses": redis_cache}):
        response_cache.purge()
        yield client
        response_cache.purge()
    client.close()


def _age(client, key: str, seconds: float) -> None:
    """The answer under `key` as if kept `seconds` ago: its stored time moved back, as the clock would."""
    if client is None:
        CachedAnswer.objects.filter(key=key).update(kept_at=timezone.now() - timedelta(seconds=seconds))
        return
    import json

    name = f"{PREFIX}:{key}"
    value = json.loads(client.get(name))
    value["kept_at"] -= seconds
    client.set(name, json.dumps(value), keepttl=True)
    client.zadd(f"{PREFIX}:{response_cache.INDEX}", {name: value["kept_at"]})


def test_an_answer_is_kept_and_counted_with_the_time_it_was_kept(backend):
    store = response_cache.store()
    before = timezone.now()
    store.put("a" * 64, ANSWER)
    found = store.get("a" * 64)
    assert found is not None and found["text"] == "hello" and store.get("b" * 64) is None
    size = response_cache.size()
    assert size.backend == ("database" if backend is None else "redis")
    assert size.entries == 1 and size.bytes > 0 and size.bound == settings.EVALSITE_CACHE_MAX_ENTRIES
    assert before - timedelta(seconds=1) <= size.oldest <= timezone.now()


def test_a_shortened_ttl_holds_for_answers_kept_before_it_and_the_oldest_is_when_it_was_kept(backend):
    store = response_cache.store()
    store.put("a" * 64, ANSWER)
    store.put("b" * 64, ANSWER)
    _age(backend, "a" * 64, AGED)
    kept_at = timezone.now() - timedelta(seconds=AGED)
    assert store.get("a" * 64) is not None  # within the TTL it was kept under
    oldest = response_cache.size().oldest
    assert abs((oldest - kept_at).total_seconds()) < 2

    with override_settings(EVALSITE_CACHE_TTL=60):
        shortened = response_cache.store()
        assert shortened.get("a" * 64) is None  # kept 67 s ago: too old for a TTL of a minute
        assert shortened.get("b" * 64) is not None
        size = response_cache.size()
        assert size.entries == 1 and size.oldest <= timezone.now()  # the answer it can still give: b's


def test_the_admin_page_says_when_the_oldest_answer_was_kept_whatever_the_ttl_is_now(backend, admin_client):
    import re

    response_cache.store().put("a" * 64, ANSWER)
    _age(backend, "a" * 64, AGED)
    with override_settings(EVALSITE_CACHE_TTL=600, EVALSITE_CACHE_MAX_ENTRIES=3):
        page = admin_client.get(reverse("admin_response_cache")).content.decode()
    cell = re.search(r'data-testid="cache-oldest">kept ([0-9-]+ [0-9:]+) \((.*?) ago\)', page)
    assert cell is not None, page
    shown = timezone.make_aware(
        datetime.strptime(cell.group(1), "%Y-%m-%d %H:%M"), timezone.get_current_timezone()
    )
    kept_at = timezone.now() - timedelta(seconds=AGED)
    assert kept_at - timedelta(minutes=1) <= shown <= kept_at  # to the minute, never later than it was kept
    assert cell.group(2).replace("\xa0", " ") == "1 minute"
    assert 'data-testid="cache-entries">1<' in page and "at most 3 answers" in page


def test_a_ttl_of_0_keeps_nothing(backend):
    with override_settings(EVALSITE_CACHE_TTL=0):
        store = response_cache.store()
        store.put("a" * 64, ANSWER)
        assert store.get("a" * 64) is None
    assert response_cache.size().entries == 0


def test_the_cache_holds_at_most_its_bound_and_drops_the_oldest(backend):
    with override_settings(EVALSITE_CACHE_MAX_ENTRIES=3):
        store = response_cache.store()
        for n in range(10):
            store.put(f"{n:064d}", {**ANSWER, "text": f"answer {n}"})
            assert response_cache.size().entries <= 3
        assert store.get(f"{9:064d}")["text"] == "answer 9"  # the newest stay
        assert store.get(f"{0:064d}") is None and store.get(f"{5:064d}") is None
    if backend is None:
        assert CachedAnswer.objects.count() <= 3
    else:  # the answers themselves are gone from Redis, not only from the count
        answers = [key for key in backend.scan_iter(match=f"{PREFIX}:*") if not key.endswith(b":kept")]
        assert 0 < len(answers) <= 3


def test_a_damaged_entry_is_a_miss(backend):
    store = response_cache.store()
    store.put("a" * 64, ANSWER)
    if backend is None:
        CachedAnswer.objects.filter(key="a" * 64).update(answer="{not json")
    else:
        backend.set(f"{PREFIX}:{'a' * 64}", b"\x80\x05not json")
    assert store.get("a" * 64) is None


def test_the_redis_store_purges_its_own_keys_only():
    client = _redis_client()
    theirs = f"someone-elses-key-{os.getpid()}"
    client.set(theirs, "kept")
    redis_cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS,
        "KEY_PREFIX": PREFIX,
    }
    try:
        with override_settings(CACHES={**settings.CACHES, "responses": redis_cache}):
            response_cache.purge()
            store = response_cache.store()
            store.put("a" * 64, ANSWER)
            store.put("b" * 64, ANSWER)
            assert response_cache.purge() == 2
            assert store.get("a" * 64) is None and response_cache.size().entries == 0
            assert not list(client.scan_iter(match=f"{PREFIX}:*"))  # the index went with them
        assert client.get(theirs) == b"kept"
    finally:
        client.delete(theirs)
        client.close()


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
