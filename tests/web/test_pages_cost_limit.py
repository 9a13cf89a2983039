"""A run its cost limit stopped, as the pages and the API say it ("stopped: cost limit $X reached", not a plain
"cancelled"), stopped through the workers' own path (runs.worker.budget) after one conversation has ended and
another is playing; and that path itself: the conversations in flight told to stop, a conversation played by a
worker's pump stopping at the turn that reaches the limit, or between two of a turn's judges' calls, and what a
round's check costs."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run, Status
from runs.worker import budget, scheduling, sql
from tests.factories import ADD_EVAL, CAPITAL_EVAL, DEMO_MOCK, MULTIPLY_EVAL, body, demo_suite, launch, play

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
    # How its conversations ended, counted as the terminal counts them; the unplayed row short, the header says why.
    assert "stopped cost limit $0.25 reached; 2 passed, 1 not started of 3 conversations" in page
    assert "cancelled not started 0 0 $0.0000" in page and "2 / 3 done, 1 not started" in page
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


def test_a_run_with_every_conversation_started_stops_them_in_flight(user):
    run = launch(user, SUITE)
    run.conversations.update(status=Status.RUNNING)
    assert budget.stop(run.pk, 0.25)
    run.refresh_from_db()
    assert run.is_active and run.stop_reason == "cost limit $0.25 reached"
    # Every worker asking whether the run goes on hears why it does not: its conversations stop there.
    key = sql.run_key(run.pk)
    assert sql.stopped_runs([key]) == {key: "cost limit $0.25 reached"}
    assert run.conversations.filter(status=Status.RUNNING).count() == 3


def test_a_run_whose_every_conversation_has_ended_has_nothing_to_stop(user):
    run = launch(user, SUITE)
    run.conversations.update(status=Status.PASSED)
    assert not budget.stop(run.pk, 0.25)
    run.refresh_from_db()
    assert run.stop_reason == ""


def test_a_limit_reached_as_the_last_turns_are_played_cuts_nothing_short(user):
    run = launch(user, SUITE)
    run.conversations.update(status=Status.RUNNING)
    assert budget.stop(run.pk, 0.25)
    run.conversations.update(status=Status.PASSED)  # each was on its last turn: none had a next one to stop
    assert scheduling.finalize(run.pk)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Status.PASSED, "")


def test_running_and_cancelled_runs_are_told_apart_from_those_stopped_short(user):
    going, cancelled = launch(user, SUITE), launch(user, SUITE.replace("name: budgeted", "name: other"))
    Run.objects.filter(pk=cancelled.pk).update(status=Status.CANCELLED)
    keys = [sql.run_key(going.pk), sql.run_key(cancelled.pk)]
    assert sql.stopped_runs(keys) == {keys[1]: ""}


LONG = "name: long\nmodel: fake/test-model\nmax_cost: 0.25\nevals:\n" + "".join(
    f"  - id: e{n}\n    turns:\n"
    + "".join(f"      - input: question {n} turn {t}\n" for t in range(1, 7))
    + "    checks: [{contains: OK}]\n"
    for n in range(2)
)


def test_a_conversation_stops_at_the_turn_that_reaches_the_limit_with_its_turns_kept(
    user, fake_endpoint, fake_openai
):
    """Played by a worker's pump in this process: the third turn's $0.30 reaches the $0.25 limit, so the
    conversation makes no fourth call, and the run's other conversation never starts."""
    fake_endpoint.price_output = 100_000  # USD per million: each one-token "OK" costs $0.10
    fake_endpoint.save()
    run = play(launch(user, LONG))
    assert (run.status, run.stop_reason) == (Status.CANCELLED, "cost limit $0.25 reached")
    first, second = run.conversations.order_by("index")
    assert (first.status, first.turn_count, first.verdict) == (
        Status.CANCELLED, 3, "stopped after 3 turns: cost limit $0.25 reached"
    )  # fmt: skip
    assert first.cost == pytest.approx(0.3) and first.turns.count() == 3
    assert len(fake_openai.chat_requests()) == 3
    assert (second.status, second.verdict) == (Status.CANCELLED, "not started: cost limit $0.25 reached")


JUDGED = "name: judged\nmodel: fake/m\nmax_cost: 0.6\nevals:\n  - prompt: Question\n    checks:\n" + "".join(
    f"      - llm_judge: {{criteria: Criterion {n}}}\n" for n in range(5)
)


def test_a_worker_stops_a_turns_judges_once_the_limit_is_reached_between_their_calls(
    user, fake_endpoint, fake_openai
):
    """Each call answers with four tokens, $0.40: the model's reply and the first judge's reach the $0.60
    limit, so the four other judges are never asked, and the turn is kept ungraded with what it cost."""
    fake_endpoint.price_output = 100_000
    fake_endpoint.save()
    fake_openai.default_reply = '{"score": 1, "reason": "ok"}'
    run = play(launch(user, JUDGED))
    assert len(fake_openai.chat_requests()) == 2
    conversation = run.conversations.get()
    assert (conversation.status, conversation.verdict) == (
        Status.CANCELLED, "stopped after 1 turn: cost limit $0.60 reached"
    )  # fmt: skip
    assert conversation.cost == pytest.approx(0.8)
    (turn,) = conversation.turns.all()
    assert turn.passed is None and turn.record["checks"] == []


def claimed(run: Run) -> sql.Claimed:
    """A claim of the run's first conversation, as a worker's pump holds it."""
    version = run.suite_version
    first = run.conversations.order_by("index").first()
    return sql.Claimed(
        conversation_id=first.pk, attempt=1, index=0, eval_id=first.eval_id, run_id=sql.run_key(run.pk),
        run_status=run.status, model=run.model, endpoint_name=run.endpoint_name, version_id=version.pk,
        version_sha256=version.sha256, system="", history=[], run_options=run.options,
    )  # fmt: skip


def test_a_rounds_turns_cost_one_aggregate_query_for_every_run_with_a_limit(
    user, django_assert_num_queries, monkeypatch
):
    now = [1000.0]
    monkeypatch.setattr(budget, "clock", lambda: now[0])
    runs = [launch(user, SUITE.replace("name: budgeted", f"name: run-{n}\nmax_cost: 100")) for n in range(3)]
    claims = [claimed(run) for run in runs]
    for each in claims:
        budget.limit_of(each)  # read once per run and worker, at its first claim
    written = [(each, 0.01) for each in claims]
    # Until the runs' rate of spending is known, from two sums a second apart, every round sums them.
    for moment in (1000.0, 1000.1, 1001.1):
        now[0] = moment
        with django_assert_num_queries(1):
            assert budget.check((), written) == []
    # Known now, and far from their limits: a round sums them only a second after the last sum.
    now[0] = 1001.5
    with django_assert_num_queries(0):
        assert budget.check((), written) == []
    now[0] = 1002.2
    with django_assert_num_queries(1):
        assert budget.check((), written) == []
