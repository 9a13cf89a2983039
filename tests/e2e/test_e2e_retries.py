"""Short endpoint trouble through a real worker: an outage and a 429/500 storm end with no errored
conversation, a waiting conversation says so and keeps its lease, and "Retry errored conversations"
resumes each errored one after its last stored turn."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Conversation, Status, Turn
from tests.e2e.conftest import wait_for_run
from tests.factories import launch
from tests.fakeopenai import Reply

pytestmark = [pytest.mark.e2e]

# No count cap (conftest sets one for the tests that want quick errors): only the time budget counts.
PATIENT = {"EVALSITE_MAX_RETRIES": "", "EVALSITE_RETRY_SECONDS": "30"}


def _suite(count: int) -> str:
    evals = "".join(f"  - prompt: question {i}\n    checks: [{{contains: OK}}]\n" for i in range(count))
    return f"name: flaky\nmodel: fake/m\nevals:\n{evals}"


def test_a_four_second_outage_errors_no_conversation(user, fake_endpoint, fake_openai, start_worker):
    """The endpoint is down for 4 s as a 20-conversation run starts: every conversation waits, says so, keeps
    its lease (2 s here, swept every 0.5 s: nobody takes a waiting conversation over), and passes."""
    start_worker(**PATIENT, EVALSITE_LEASE_SECONDS="2", EVALSITE_SWEEP_SECONDS="0.5")
    fake_openai.down()
    timer = threading.Timer(4, fake_openai.up)
    timer.start()
    try:
        run = launch(user, _suite(20), concurrency=10)
        noted = set()
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            noted |= set(
                Conversation.objects.filter(run=run, waiting_until__isnull=False).values_list(
                    "waiting_reason", flat=True
                )
            )
            time.sleep(0.2)
        run = wait_for_run(run, timeout=60)
    finally:
        timer.cancel()
        fake_openai.up()
    assert run.status == Status.PASSED
    assert list(run.conversations.filter(status=Status.ERROR).values_list("error", flat=True)) == []
    assert noted == {"endpoint unavailable (HTTP 503)"}  # the run page had something to say meanwhile
    assert not run.conversations.filter(attempt__gt=1).exists()  # the leases held through the waits
    assert not run.conversations.exclude(waiting_until=None).exists()  # cleared when they went on


def test_a_storm_of_429s_and_500s_errors_no_conversation(user, fake_endpoint, fake_openai, start_worker):
    """30% of answers are 429 with Retry-After: 1 and 10% are 500, across two worker processes; and two
    unlucky conversations meet five failures in a row, which the retry budget, a time and not a count, rides out."""
    storm = [
        "OK",
        Reply(status=429, retry_after=1),
        "OK",
        Reply(status=500),
        Reply(status=429, retry_after=1),
    ]
    storm += ["OK", "OK", Reply(status=429, retry_after=1), "OK", "OK"]
    fake_openai.rule("question", storm)
    for unlucky in ("question 3", "question 11"):
        fake_openai.fail_next(4, status=429, retry_after=1, first_user=unlucky)
        fake_openai.fail_next(1, status=500, first_user=unlucky)
    fake_openai.latency = 0.05
    start_worker(concurrency=5, **PATIENT)
    start_worker(concurrency=5, **PATIENT)
    run = wait_for_run(launch(user, _suite(20), concurrency=10), timeout=90)
    statuses = [request["status"] for request in fake_openai.requests]
    assert statuses.count(429) >= 10 and statuses.count(500) >= 3  # the storm did blow
    assert list(run.conversations.filter(status=Status.ERROR).values_list("error", flat=True)) == []
    assert run.status == Status.PASSED


RESUMABLE = """
name: resumable
model: fake/m
evals:
  - id: steps
    turns:
      - input: first question
        checks: [{contains: one}]
      - input: second question
        checks: [{contains: two}]
      - input: third question
        checks: [{contains: three}]
  - id: unreachable
    prompt: lonely question
    checks: [{contains: OK}]
  - id: fine
    prompt: fine question
    checks: [{contains: OK}]
"""


def test_retry_errored_conversations_resumes_them_after_their_last_stored_turn(
    user, fake_endpoint, fake_openai, start_worker
):
    """Two conversations error (one on its 2nd turn, one on its 1st); the endpoint recovers; the user retries
    them from the run page. They go on after their stored turns, none asked twice, and the run passes."""
    fake_openai.script("first question", ["one", Reply(status=503), "three"])
    fake_openai.script("lonely question", [Reply(status=503)])
    start_worker(EVALSITE_MAX_RETRIES="", EVALSITE_RETRY_SECONDS="1")
    run = wait_for_run(launch(user, RESUMABLE), timeout=60)
    assert run.status == Status.ERROR
    steps = run.conversations.get(eval_id="steps")
    assert (steps.status, steps.turn_count) == (Status.ERROR, 1)
    assert "HTTP 503" in steps.error and "gave up after" in steps.error
    assert run.conversations.get(eval_id="unreachable").status == Status.ERROR
    first_turn = Turn.objects.get(conversation=steps, position=1)

    fake_openai.script("first question", ["one", "two", "three"])  # the endpoint is back
    fake_openai.script("lonely question", ["OK"])
    browser = Client()
    browser.force_login(user)
    response = browser.post(reverse("runs:retry_errored", args=[run.pk]))
    assert response.status_code == 302
    run = wait_for_run(run, timeout=60)

    assert run.status == Status.PASSED
    steps.refresh_from_db()
    assert (steps.status, steps.verdict, steps.error, steps.attempt) == (
        Status.PASSED,
        "every turn passed: 3 of 3",
        "",
        2,
    )
    assert list(steps.turns.values_list("position", flat=True)) == [1, 2, 3]
    assert Turn.objects.get(conversation=steps, position=1).pk == first_turn.pk  # stored once, kept
    asked_first = [body for body in fake_openai.chat_requests("first question") if len(body["messages"]) == 1]
    assert len(asked_first) == 1  # turn 1 was replayed from the database, not asked again
    assert run.conversations.get(eval_id="unreachable").turn_count == 1
    assert run.conversations.get(eval_id="fine").attempt == 1  # untouched by the retry
