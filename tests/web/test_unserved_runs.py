"""A test that plays a run no fixture serves ends at once, saying why: a model on the default endpoint (a bare id;
a `fake/` one without the `fake` endpoint is refused at launch) goes to the fake server, refusing a call without its key
(tests/conftest.py). Otherwise the call leaves the machine and is retried for the whole retry budget, while the
test's transaction holds SQLite's writer lock, on which the worker's heartbeat and the endpoint pauses then
wait: a test that seems to hang in play()."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from runs.models import Status
from tests.factories import launch, play

pytestmark = pytest.mark.django_db

UNSERVED = "name: unserved\nmodel: test-model\nevals:\n  - {prompt: Say hello, checks: [{contains: hello}]}\n"


def test_a_run_no_fixture_serves_ends_in_error_at_once_naming_the_default_endpoint(user):
    run = launch(user, UNSERVED)
    assert run.endpoint_name == "default"  # a bare model id goes to the default endpoint
    started = time.monotonic()
    run = play(run)
    took = time.monotonic() - started
    conversation = run.conversations.get()
    assert (run.status, conversation.status) == (Status.ERROR, Status.ERROR)
    assert "HTTP 401 from default" in conversation.error, conversation.error
    assert settings.OPENAI_BASE_URL.startswith("http://127.0.0.1:")  # nothing left the machine
    assert took < settings.EVALSITE_RETRY_SECONDS / 10, f"{took:.1f} s: the call was retried"
