"""A run its cost limit stopped, as the pages and the API say it ("stopped: cost limit $X reached", not a plain
"cancelled"), stopped through the workers' own path (runs.worker.budget) after one conversation has ended and
another is playing."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Status
from runs.worker import budget, scheduling, sql
from tests.factories import ADD_EVAL, CAPITAL_EVAL, DEMO_MOCK, MULTIPLY_EVAL, body, demo_suite, launch

pytestmark = pytest.mark.django_db

SUITE = demo_suite("name: budgeted\nmodel: mock\n" + DEMO_MOCK, (ADD_EVAL, MULTIPLY_EVAL, CAPITAL_EVAL))


def text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


@pytest.fixture
def stopped(user):
    run = launch(user, SUITE)
    run.conversations.filter(index=0).update(status=Status.PASSED, verdict="passed on turn 1", cost=0.3)
    run.conversations.filter(index=1).update(status=Status.RUNNING)
    assert budget.spend([run.pk]) == {sql.run_key(run.pk): pytest.approx(0.3)}
    assert budget.stop(run.pk, 0.25)
    assert not budget.stop(run.pk, 0.25)  # once: a second worker finds it stopped
    run.refresh_from_db()
    return run


def test_stopping_cancels_the_queued_conversations_and_lets_the_playing_one_finish(stopped):
    assert stopped.is_active and stopped.stop_reason == "cost limit $0.25 reached"
    assert dict(stopped.conversations.values_list("index", "status")) == {
        0: Status.PASSED, 1: Status.RUNNING, 2: Status.CANCELLED
    }  # fmt: skip
    assert stopped.conversations.get(index=2).verdict == "not started: cost limit $0.25 reached"
    stopped.conversations.filter(index=1).update(status=Status.PASSED)
    assert scheduling.finalize(stopped.pk)
    stopped.refresh_from_db()
    assert stopped.status == Status.CANCELLED  # every conversation it played passed, but not every one was


def test_the_run_page_list_and_api_say_stopped_at_the_cost_limit(user, stopped):
    client = Client()
    client.force_login(user)
    page = text(client.get(reverse("runs:detail", args=[stopped.pk])).content.decode())
    assert "stopping cost limit $0.25 reached; 1 finishing" in page
    assert "stopping: cost limit $0.25 reached" in text(client.get(reverse("runs:list")).content.decode())
    stopped.conversations.filter(index=1).update(status=Status.PASSED)
    scheduling.finalize(stopped.pk)
    page = text(client.get(reverse("runs:detail", args=[stopped.pk])).content.decode())
    assert "stopped cost limit $0.25 reached; 2 of 3 conversations finished" in page
    listed = text(client.get(reverse("runs:list")).content.decode())
    assert "stopped: cost limit $0.25 reached" in listed
    # The suite's page lists it as stopped, the reason in the badge's title, never as a plain "cancelled".
    suite_page = client.get(
        reverse("suites:detail", args=[stopped.suite_version.suite.public_id])
    ).content.decode()
    assert 'title="stopped: cost limit $0.25 reached">stopped</span>' in suite_page
    api = client.get(f"/api/runs/{stopped.pk}").json()
    assert (api["status"], api["state"], api["stop_reason"]) == (
        "cancelled", "stopped: cost limit $0.25 reached", "cost limit $0.25 reached"
    )  # fmt: skip
    results = json.loads(body(client.get(f"/api/runs/{stopped.pk}/results")))
    assert results["stop_reason"] == "cost limit $0.25 reached"


def test_a_run_with_every_conversation_started_has_nothing_to_stop(user):
    run = launch(user, SUITE)
    run.conversations.update(status=Status.RUNNING)
    assert not budget.stop(run.pk, 0.25)
    run.refresh_from_db()
    assert run.stop_reason == "" and run.conversations.filter(status=Status.RUNNING).count() == 3
