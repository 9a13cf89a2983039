"""Past one machine: worker processes with hostnames, var folders and settings of their own, as
separate worker hosts have them, sharing nothing but PostgreSQL and Redis, play one run together against
the real fake endpoint. Every conversation is played exactly once, by more than one host; a host lost
mid-run is replaced by the others. The embedded defaults (SQLite, a folder broker) are one machine's, so
this runs on the PostgreSQL + Redis pass (make test-pg)."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connection

from endpoints.models import Endpoint
from runs import services
from runs.models import Status, Turn
from suites.services import create_suite
from tests.conftest import FAKE_KEY_ENV
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

CONVERSATIONS = 60
HOSTS = [  # (hostname, threads, pool size): each "machine" set up its own way
    ("evalsite1@host-a", 8, "6"),
    ("evalsite1@host-b", 12, "9"),
    ("evalsite2@host-b", 4, "4"),
]


def test_worker_hosts_share_one_run_and_replace_a_lost_one(user, fake_openai, start_worker, tmp_path):
    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("separate hosts share PostgreSQL and Redis; make test-pg runs this")
    fake_openai.latency = 0.15
    for i in range(CONVERSATIONS):
        fake_openai.script(f"question {i}", ["not yet", f"OK {i}"])
    Endpoint.objects.create(name="fake", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV,
                            max_concurrency=24)  # fmt: skip
    hosts = []
    for hostname, threads, pool in HOSTS:
        var_dir = tmp_path / hostname.replace("@", "-")
        var_dir.mkdir()
        hosts.append(
            start_worker(
                concurrency=threads,
                hostname=hostname,
                EVALSITE_VAR_DIR=str(var_dir),
                EVALSITE_DB_POOL_MAX=pool,
                EVALSITE_WORKER_DEAD_SECONDS="2",
            )  # fmt: skip
        )
    evals = "\n".join(
        f"  - {{id: q{i}, prompt: question {i}, checks: [{{contains: OK, prompt: again?, checks: [{{contains: OK}}]}}]}}"
        for i in range(CONVERSATIONS)
    )
    suite = create_suite(owner=user, source=f"name: hosts\nmodel: fake/test-model\nevals:\n{evals}\n")
    run = services.create_run(version=suite.latest_version, user=user, concurrency=24)

    # Host a is lost mid-run, as a machine is: its conversations go to the others.
    deadline = time.monotonic() + 30
    while not run.conversations.filter(worker__startswith="evalsite1@host-a:", turn_count__gte=1).exists():
        assert time.monotonic() < deadline, "host a never played a turn"
        time.sleep(0.05)
    hosts[0].kill()
    run = wait_for_run(run, timeout=90)

    assert run.status == Status.PASSED, list(run.conversations.exclude(status=Status.PASSED).values("error"))
    conversations = list(run.conversations.all())
    assert all(c.turn_count == 2 for c in conversations)
    turns = Turn.objects.filter(conversation__run=run)
    assert turns.count() == 2 * CONVERSATIONS  # exactly once: none lost, none played twice
    assert sorted(t.record["response"] for t in turns if t.position == 2) == sorted(
        f"OK {i}" for i in range(CONVERSATIONS)
    )
    # Each conversation names the worker that finished it by its node name: both processes of host b.
    nodes = {c.worker.split(":", 1)[0] for c in conversations}
    assert {"evalsite1@host-b", "evalsite2@host-b"} <= nodes, nodes
    assert nodes <= {hostname for hostname, _, _ in HOSTS}
