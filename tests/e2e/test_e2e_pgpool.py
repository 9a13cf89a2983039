"""PostgreSQL connections at scale: many worker threads share a few pooled connections.

Without the pool each worker thread kept a connection of its own, and 2 workers x 50 threads ran
PostgreSQL's default max_connections (100) out: "sorry, too many clients already", errored conversations
and a run 8x slower than ideal. `make test-pg` runs this; the default pass on SQLite skips it.
"""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connection

from endpoints.models import Endpoint
from runs import services
from runs.models import Status
from suites.services import create_suite
from tests.conftest import FAKE_KEY_ENV

pytestmark = [pytest.mark.e2e]

PROCESSES, THREADS, CONCURRENCY, CONVERSATIONS, LATENCY = 2, 50, 100, 200, 0.5
POOL_MAX = 15  # per process; the budget below is what 2 processes may hold, whatever their 100 threads do
# This test process (its own connection and pool) and a moment's overlap as a pool replaces a connection.
MARGIN = 5


def _sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_two_workers_of_fifty_threads_stay_within_their_pools(user, fake_openai, start_worker):
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL sessions; make test-pg runs this")
    if not settings.DATABASES["default"]["OPTIONS"].get("pool"):
        pytest.fail("the PostgreSQL connection pool is off (EVALSITE_DB_POOL_MAX=0)")
    fake_openai.latency = LATENCY
    # A second turn for every conversation: a thread must hand its connection back between model calls.
    for i in range(CONVERSATIONS):
        fake_openai.script(f"question {i}", ["not yet", "OK"])
    Endpoint.objects.create(
        name="fake", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_concurrency=CONCURRENCY
    )
    for _ in range(PROCESSES):
        start_worker(concurrency=THREADS, EVALSITE_DB_POOL_MAX=str(POOL_MAX))
    budget = PROCESSES * POOL_MAX + MARGIN
    evals = "\n".join(
        f"  - {{id: q{i}, prompt: question {i}, checks: [{{contains: OK, prompt: again?, checks: [{{contains: OK}}]}}]}}"
        for i in range(CONVERSATIONS)
    )
    suite = create_suite(owner=user, source=f"name: pool\nmodel: fake/test-model\nevals:\n{evals}\n")

    started = time.monotonic()
    run = services.create_run(version=suite.latest_version, user=user, concurrency=CONCURRENCY)
    peak = 0
    while time.monotonic() - started < 120:
        peak = max(peak, _sessions())
        # Stop at once over budget: the workers are killed at teardown instead of exhausting the server
        # every other client of this PostgreSQL shares.
        assert peak <= budget, f"{peak} PostgreSQL sessions, over the budget of {budget}"
        run.refresh_from_db()
        if not run.is_active:
            break
        time.sleep(0.05)
    wall = time.monotonic() - started

    assert run.status == Status.PASSED, list(run.conversations.exclude(status=Status.PASSED).values("error"))
    assert not run.conversations.filter(status=Status.ERROR).exists()
    assert run.conversations.filter(status=Status.PASSED, turn_count=2).count() == CONVERSATIONS
    # The pool did not become the bottleneck: threads waited on the model, not for a connection.
    assert fake_openai.max_in_flight >= CONCURRENCY * 0.9, fake_openai.max_in_flight
    ideal = CONVERSATIONS / CONCURRENCY * 2 * LATENCY
    print(f"peak {peak} sessions (budget {budget}); wall {wall:.1f} s against an ideal {ideal:.1f} s")
