"""Fixtures every layer shares: the fake OpenAI server, a named endpoint pointing at it, the users, and the
repository paths. Each layer (engine/, web/, e2e/) adds its own in its conftest.py."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest
from django.conf import settings

from tests.fakeopenai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
FAKE_KEY_ENV = "EVALSITE_TEST_FAKE_KEY"
FAKE_KEY = "sk-test-fake"


def pytest_sessionfinish(session, exitstatus):
    # The var dir is this process's own (tests/settings.py); a worker subprocess may set it too, so only the
    # process that created it removes it.
    var_dir = Path(settings.VAR_DIR)
    if var_dir.name == str(os.getpid()):
        shutil.rmtree(var_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, and before it drops the test database, no session is left on it: PostgreSQL refuses to
    drop a database others are connected to, and the test database is then left behind with a warning."""
    yield
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        return
    import psycopg

    with django_db_blocker.unblock():
        connections.close_all()
        for each in connections.all():
            if getattr(each, "pool", None) is not None:
                each.close_pool()
        # A connection of its own, outside Django's pool, which the query would otherwise open again.
        database = connection.settings_dict
        with psycopg.connect(
            dbname=database["NAME"], user=database["USER"], password=database["PASSWORD"],
            host=database["HOST"], port=database["PORT"] or None, autocommit=True,
        ) as own:  # fmt: skip
            left = own.execute(
                "SELECT pid, application_name, state, left(query, 120), pg_terminate_backend(pid)"
                " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
    for pid, application, state, query, _ in left:
        # Said, so that what keeps a connection past the tests can be found and mended.
        warnings.warn(
            f"ended a session left on the test database: pid {pid} {application!r} {state}: {query}",
            stacklevel=1,
        )


@pytest.fixture(scope="session")
def fake_openai_server():
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _default_endpoint_on_the_fake(settings, fake_openai_server):
    """The default endpoint is the fake server, which answers a call without its key (the tests set no
    OPENAI_API_KEY) with a 401, never retried: a test that plays a run no fixture serves (a `fake/` model without
    the `fake` endpoint goes whole to the default one) ends in that error at once, rather than calling out of the
    machine and retrying for EVALSITE_RETRY_SECONDS while its transaction holds SQLite's writer lock, on which
    the worker's heartbeat and the endpoint pauses then wait. A test that means the default endpoint sets it."""
    settings.OPENAI_BASE_URL = fake_openai_server.base_url


@pytest.fixture
def fake_openai(fake_openai_server):
    """The fake OpenAI-compatible endpoint, clean for each test."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture(autouse=True)
def _heartbeat_stopped_after_test():
    """A test that plays a conversation in this process (runs.worker.pump.execute) starts the worker heartbeat
    thread; it must not outlive the test's database."""
    yield
    from runs.worker.claims import heartbeat

    heartbeat.stop()


@pytest.fixture
def user(django_user_model):
    """Alice, an admin of the default project (where suites made without naming a project go)."""
    from tests.factories import join  # Django's apps are ready only once a test asks for the database

    alice = django_user_model.objects.create_user(username="alice", password="pw-alice-123")
    join(alice, role="admin")
    return alice


@pytest.fixture
def other_user(django_user_model):
    """Mallory, an admin of another project only: alice's suites and runs are a 404 for her, and hers for alice."""
    from tests.factories import join, other_project

    mallory = django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")
    join(mallory, other_project(), role="admin")
    return mallory


@pytest.fixture
def fake_endpoint(db, fake_openai):
    """A named endpoint `fake` pointing at the fake server; its key comes from an environment variable."""
    from endpoints.models import Endpoint

    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    return Endpoint.objects.create(
        name="fake", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_concurrency=50, timeout=5
    )
