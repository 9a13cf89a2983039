"""In-place hand-over: a worker thread whose conversation ends plays the next one itself, with no broker
message, within the same caps; a kept conversation that its worker never claimed is recovered.

Conversations are played in this process (runs.worker.pump.execute, as the task calls it) against the fake
OpenAI server; the tasks dispatch would publish are recorded instead, so the test sees every message.
tests/test_e2e_recovery.py kills real workers mid-run, hand-overs included.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from endpoints.models import Endpoint
from runs import services
from runs.models import Conversation, Status, Worker
from runs.worker import pump, recovery, scheduling
from runs.worker.claims import heartbeat
from suites.services import create_suite

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def published(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("runs.worker.tasks.run_conversation.delay", sent.append)
    return sent


def _launch(user, name: str, evals: int, concurrency: int, model: str = "fake/m"):
    lines = [f"name: {name}", f"model: {model}", "evals:"]
    lines += [f"  - {{id: e{i}, prompt: question {i}, checks: [{{contains: x}}]}}" for i in range(evals)]
    version = create_suite(owner=user, source="\n".join(lines) + "\n").latest_version
    return services.create_run(version=version, user=user, concurrency=concurrency)


def test_an_ended_conversation_hands_the_next_to_its_thread_without_a_message(user, fake_endpoint, published):
    run = _launch(user, "chain", evals=4, concurrency=1)
    assert len(published) == 1  # the launch's dispatch: one slot, one message

    pump.execute(published[0])

    conversations = list(run.conversations.order_by("index"))
    assert [c.status for c in conversations] == [Status.FAILED] * 4  # every reply lacks "x"
    assert len(published) == 1, "the next conversations went through the broker"
    assert {c.worker for c in conversations} == {heartbeat.name}
    assert all(c.attempt == 1 for c in conversations)  # each claimed once, as a delivered task would be
    run.refresh_from_db()
    assert run.status == Status.FAILED and run.finished_at is not None


def test_the_kept_conversation_counts_against_the_runs_concurrency(user, fake_endpoint, published):
    run = _launch(user, "capped chain", evals=5, concurrency=2)
    first, second = published
    # Another worker is playing the second all along (its claim, without its thread).
    Conversation.objects.filter(pk=second).update(status=Status.RUNNING, worker="elsewhere")
    pump.execute(first)

    # One slot left to this thread: the chain played the other three one at a time and published nothing.
    assert published == [first, second]
    assert run.conversations.filter(status=Status.FAILED).count() == 4
    assert Conversation.objects.get(pk=second).status == Status.RUNNING


def test_nothing_is_kept_while_a_sent_conversation_waits_and_the_thread_takes_that_one(
    user, fake_endpoint, published
):
    """The second message was never delivered (every thread busy): its conversation waits, sent. The next
    conversation is published behind it, and the thread takes the one that waited longest, in order."""
    run = _launch(user, "waiting", evals=4, concurrency=2)
    first, second = published
    Conversation.objects.filter(pk=second).update(
        dispatched_at=timezone.now() - scheduling.IN_TRANSIT - timedelta(seconds=1)
    )
    pump.execute(first)

    conversations = list(run.conversations.order_by("started_at"))
    by_index = {c.index: c.pk for c in conversations}
    assert published[2] == by_index[2]  # e2 published behind the second, which was waiting already
    assert [c.index for c in conversations][:2] == [0, 1]  # and the thread took the second next
    assert all(c.status == Status.FAILED and c.attempt == 1 for c in conversations)
    assert {c.worker for c in conversations} == {heartbeat.name}


def test_a_message_sent_a_moment_ago_is_in_transit_and_does_not_stop_the_hand_over(
    user, fake_endpoint, published
):
    """The second message was published just now: it is on its way to a thread, not waiting for one. The
    thread keeps what its conversation's end dispatches (no message); once its chain ends, it takes the
    second too, its message never having arrived (in this test, nothing delivers it)."""
    run = _launch(user, "transit", evals=3, concurrency=2)
    first, second = published
    pump.execute(first)

    assert len(published) == 2, "the next conversation went through the broker"
    conversations = list(run.conversations.order_by("started_at"))
    assert [c.index for c in conversations] == [0, 2, 1]
    assert all(c.status == Status.FAILED and c.attempt == 1 for c in conversations)


def test_a_waiting_conversation_of_an_ended_run_is_not_taken(user, fake_endpoint, published):
    stopped = _launch(user, "stopped", evals=1, concurrency=1)
    stopped.__class__.objects.filter(pk=stopped.pk).update(
        status=Status.CANCELLED
    )  # its message still queued
    run = _launch(user, "going", evals=2, concurrency=1)

    pump.execute(published[-1])

    assert run.conversations.filter(status=Status.FAILED).count() == 2
    assert stopped.conversations.get().status == Status.QUEUED


def test_a_freed_endpoint_slot_is_kept_for_a_run_waiting_on_it(user, fake_endpoint, published):
    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=1)
    first = _launch(user, "first", evals=2, concurrency=1)
    second = _launch(user, "second", evals=2, concurrency=1)
    assert len(published) == 1  # the endpoint allows one conversation in flight across both runs

    pump.execute(published[0])

    assert len(published) == 1
    for run in (first, second):
        assert run.conversations.filter(status=Status.FAILED).count() == 2


def test_a_stopping_worker_publishes_what_it_dispatches_instead_of_keeping_it(user, fake_endpoint, published):
    run = _launch(user, "stopping", evals=3, concurrency=1)
    first = published[0]
    heartbeat.start()
    heartbeat.stopping.set()  # as hand_back sets it on SIGTERM

    assert pump.execute(first) == "skipped"

    # The delivery was sent again for another worker, and nothing was played here.
    assert published == [first, first]
    assert run.conversations.filter(status=Status.QUEUED).count() == 3


def test_a_dead_workers_kept_but_unclaimed_conversation_is_sent_again(
    user, fake_endpoint, published, settings
):
    """A worker killed between keeping a conversation and claiming it leaves it sent with no message: the
    others' WorkerWatch resends it as soon as they see that worker dead."""
    settings.EVALSITE_WORKER_DEAD_SECONDS = 0
    run = _launch(user, "killed", evals=3, concurrency=1)
    Conversation.objects.filter(pk=published[0]).update(status=Status.PASSED)  # it ended on the worker...
    freed = scheduling.FreedSlots(room=1)
    scheduling.conversation_ended(run.pk, "fake", freed=freed)  # ...which kept the next one, then died
    kept = freed.ids
    assert len(kept) == 1 and len(published) == 1
    Worker.objects.create(name="host:1:dead", beat_at="2026-01-01T00:00:00Z")

    watch = recovery.WorkerWatch("host:2:alive")
    assert watch.take_over()["dead"] == 0  # first sight of its beat
    stats = watch.take_over()

    assert stats["dead"] == 1 and stats["resent"] == 1
    assert published[1:] == kept  # published now, for any worker to claim
    assert Conversation.objects.get(pk=kept[0]).dispatched_at is not None


def test_inside_a_callers_transaction_nothing_is_kept(user, fake_endpoint, published):
    run = _launch(user, "atomic", evals=3, concurrency=1)
    Conversation.objects.filter(pk=published[0]).update(status=Status.PASSED)
    freed = scheduling.FreedSlots(room=1)
    with transaction.atomic():
        scheduling.conversation_ended(run.pk, "fake", freed=freed)
    assert freed.ids == [] and len(published) == 2


def test_what_a_dispatch_marks_beyond_the_freed_slots_is_left_to_the_pumps_not_published(
    user, fake_endpoint, published
):
    """Another worker's conversation ended at the same moment, so this worker's dispatch marks two: it keeps
    the one its own end freed and publishes nothing; the other waits, sent, for a pump with room, here this
    one's once the kept one ends (a message would only have been dropped by a full pump, or found it taken)."""
    run = _launch(user, "surplus", evals=4, concurrency=2)
    first, second = published
    Conversation.objects.filter(pk=second).update(status=Status.FAILED, finished_at=timezone.now())
    pump.execute(first)

    assert published == [first, second]
    conversations = list(run.conversations.all())
    assert {c.status for c in conversations} == {Status.FAILED}
    assert all(c.attempt == 1 for c in conversations if c.pk != second)
