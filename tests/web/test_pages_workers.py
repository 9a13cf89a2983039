"""What the run page and the launch panel say about the workers that play runs: none running, or fewer
conversations at once in all than a run asks. Worker rows stand for worker processes here (no process runs);
tests/web/test_evalserve.py sees real workers register theirs."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from runs.models import Conversation, Run, Status, Worker
from suites import services as suite_services
from tests.factories import ADD_EVAL, MULTIPLY_EVAL, demo_suite, mock_run

pytestmark = pytest.mark.django_db

SUITE = demo_suite("name: arithmetic\nmodel: mock\n", (ADD_EVAL, MULTIPLY_EVAL))


def make_run(user, statuses, *, status=Status.RUNNING, concurrency=100, suite=SUITE) -> Run:
    version = suite_services.create_suite(owner=user, source=suite).latest_version
    run = mock_run(version, user, status=status, concurrency=concurrency)
    for index, state in enumerate(statuses):
        Conversation.objects.create(run=run, index=index, eval_id=f"e{index}", status=state)
    return run


def worker(name: str, slots: int, *, beat_ago: float = 0.0) -> Worker:
    return Worker.objects.create(name=name, slots=slots, beat_at=timezone.now() - timedelta(seconds=beat_ago))


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def progress_card(page: str) -> str:
    return text(page.split('id="progress"', 1)[1].split("</section>", 1)[0])


def run_page(client, run: Run) -> str:
    return client.get(reverse("runs:detail", args=[run.pk])).content.decode()


def test_a_queued_run_with_no_worker_says_nothing_plays_and_how_to_start_one(logged_in, user):
    run = make_run(user, ["queued", "queued"])
    card = progress_card(run_page(logged_in, run))
    assert "No worker is running, so nothing plays until one starts." in card
    assert "celery -A evalsite worker --pool threads" in card


def test_a_worker_whose_beat_stopped_counts_as_none(logged_in, user):
    run = make_run(user, ["queued"])
    worker("gone@host:1", 50, beat_ago=settings.EVALSITE_WORKER_DEAD_SECONDS + 5)
    assert "No worker is running" in progress_card(run_page(logged_in, run))


def test_workers_with_fewer_slots_than_the_runs_concurrency_are_named(logged_in, user):
    run = make_run(user, ["running"] * 20 + ["queued"] * 100, concurrency=100)
    worker("w1@host:1", 10)
    worker("w2@host:2", 10)
    card = progress_card(run_page(logged_in, run))
    assert (
        "The workers running (2) play at most 20 conversations at once, fewer than this run's concurrency of 100."
        in card
    )
    assert "No worker" not in card


def test_a_run_with_fewer_conversations_left_than_its_concurrency_is_measured_by_those(logged_in, user):
    run = make_run(user, ["passed"] * 5 + ["running"] * 10 + ["queued"] * 20, concurrency=100)
    worker("w1@host:1", 20)
    card = progress_card(run_page(logged_in, run))
    assert (
        "play at most 20 conversations at once, fewer than the 30 conversations this run has left to play."
        in card
    )


@pytest.mark.parametrize(
    "statuses, slots",
    [
        (["running", "queued"], 100),  # enough slots for the run
        (["running", "queued"], 2),  # as many as the run has left, though fewer than its concurrency
        (["running", "passed"], 10),  # nothing left to wait for a slot
    ],
)
def test_nothing_is_said_when_the_workers_can_play_what_waits(logged_in, user, statuses, slots):
    run = make_run(user, statuses, concurrency=100)
    worker("w1@host:1", slots)
    assert 'data-testid="workers-note"' not in run_page(logged_in, run)


def test_slots_taken_by_other_runs_are_said_while_this_one_waits(logged_in, user):
    other_suite = demo_suite("name: another\nmodel: mock\n", (ADD_EVAL,))
    other = make_run(user, ["running"] * 10, concurrency=10, suite=other_suite)
    other.conversations.update(dispatched_at=timezone.now())
    run = make_run(user, ["queued"] * 5, concurrency=10)
    worker("w1@host:1", 10)
    card = progress_card(run_page(logged_in, run))
    assert (
        "All 10 slots of the workers running are in use, 10 by other runs: this run's queued conversations "
        "start as those end." in card
    )
    other.conversations.update(status=Status.PASSED)  # their slots free up
    assert 'data-testid="workers-note"' not in run_page(logged_in, run)


def test_a_finished_run_says_nothing_of_workers(logged_in, user):
    run = make_run(user, ["passed", "passed"], status=Status.PASSED)
    assert 'data-testid="workers-note"' not in run_page(logged_in, run)


def test_the_poll_updates_the_card_when_a_worker_starts(logged_in, user):
    run = make_run(user, ["queued", "queued"])
    page = run_page(logged_in, run)
    fingerprint = page.split('data-fingerprint="')[1].split('"')[0]
    poll = reverse("runs:progress", args=[run.pk])
    assert logged_in.get(poll, {"fp": fingerprint}, HTTP_HX_REQUEST="true").status_code == 204  # unchanged
    worker("w1@host:1", 100)
    body = logged_in.get(poll, {"fp": fingerprint}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="progress"' in body and "No worker" not in body


def test_the_launch_panel_says_how_many_workers_can_play(logged_in, user):
    suite = suite_services.create_suite(owner=user, source=SUITE)
    editor = reverse("suites:detail", args=[suite.public_id])

    def hint() -> str:
        page = logged_in.get(editor).content.decode()
        return text(re.search(r'data-testid="launch-workers">(.*?)</span>', page, re.S).group(1))

    assert hint() == "No worker is running: a run waits in the queue until one starts."
    worker("w1@host:1", 50)
    worker("w2@host:2", 50)
    assert hint() == "2 workers running: 100 conversations at once in all"


def test_the_api_progress_counts_the_workers_while_conversations_wait(logged_in, user):
    run = make_run(user, ["queued"])
    progress = logged_in.get(f"/api/runs/{run.pk}/progress").json()
    assert progress["workers"] == {"count": 0, "slots": 0, "playing": 0}
    worker("w1@host:1", 50)
    assert logged_in.get(f"/api/runs/{run.pk}").json()["progress"]["workers"] == {
        "count": 1,
        "slots": 50,
        "playing": 0,
    }
    Conversation.objects.filter(run=run).update(status=Status.RUNNING)
    assert logged_in.get(f"/api/runs/{run.pk}/progress").json()["workers"] is None  # nothing waits


def test_the_runs_list_says_when_runs_wait_for_a_worker_that_is_not_running(logged_in, user):
    make_run(user, ["queued", "queued"], status=Status.QUEUED)

    def banner() -> bool:
        return 'data-testid="no-worker"' in logged_in.get(reverse("runs:list")).content.decode()

    assert banner()
    worker("w1@host:1", 50)
    assert not banner()
    Worker.objects.all().delete()
    Run.objects.update(status=Status.PASSED)
    assert not banner()  # nothing waits
