"""A hung endpoint through a real worker: while its calls hang, the run page's poll says "N calls waiting on
the model for N s"; once they are answered it says nothing of the kind, and no conversation errors."""

from __future__ import annotations

import re
import time

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Status
from tests.e2e.conftest import wait_for_run
from tests.factories import launch

pytestmark = [pytest.mark.e2e]

WAITING = re.compile(r"(\d+) calls? waiting on the model for (\d+) s")


def test_a_workers_hung_calls_are_said_on_the_run_page_while_they_hang(
    user, fake_endpoint, fake_openai, start_worker
):
    start_worker(EVALSITE_SLOW_CALL_SECONDS="1")
    fake_openai.latency = 0.05
    fake_openai.fail_next(3, hang=4)  # under the endpoint's 5 s timeout: answered late, not retried
    evals = "".join(f"  - prompt: question {i}\n    checks: [{{contains: OK}}]\n" for i in range(6))
    run = launch(user, f"name: hung\nmodel: fake/m\nevals:\n{evals}", concurrency=6)
    client = Client()
    client.force_login(user)
    url = reverse("runs:progress", args=[run.pk])
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status not in (Status.QUEUED, Status.RUNNING):
            break
        poll = client.get(url, HTTP_HX_REQUEST="true").content.decode()
        found = WAITING.search(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", poll)))
        if found:
            seen.append((int(found[1]), int(found[2])))
        time.sleep(0.2)
    run = wait_for_run(run, timeout=30)
    assert run.status == Status.PASSED
    assert seen, "the poll never said calls were waiting on the model"
    assert max(count for count, _ in seen) == 3 and all(1 <= seconds <= 4 for _, seconds in seen)
    assert not run.conversations.exclude(calling_since=None).exists()
