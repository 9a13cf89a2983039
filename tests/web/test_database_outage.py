"""What a worker writes again after the database went away (runs.outage): a write that committed as its
connection dropped is found done, not done twice or taken for another worker's; turns a crashed server forgot
are stored again from the pump's memory. The whole of it, through a real PostgreSQL crash, is the fault
harness's `pgrestart` scenario (tests/e2e/test_faults.py)."""

from __future__ import annotations

import concurrent.futures

import pytest
from django.utils import timezone

from engine.calls import Latencies
from engine.results import TurnRecord
from runs.models import Conversation, Status, Turn
from runs.worker import sql
from runs.worker.messages import StoreTurn
from runs.worker.playing import Playing
from runs.worker.pump import Pump
from runs.worker.writes import write_turns
from tests.factories import launch

# Hand-written SQL: the PostgreSQL + Redis pass (make test-pg) runs it again.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sql]

SUITE = "name: outage\nmodel: mock\nevals:\n" + "".join(
    f"  - {{id: e{i}, prompt: q{i}, checks: [{{contains: x}}]}}\n" for i in range(3)
)
WORKER = "w1@host:1:abc"


def _turn(position: int, text: str = "a reply") -> TurnRecord:
    return TurnRecord(turn=position, prompt=f"prompt {position}", response=text, passed=True)


def _write(conversation: Conversation, attempt: int, turn: TurnRecord) -> bool:
    future: concurrent.futures.Future = concurrent.futures.Future()
    write_turns([StoreTurn(conversation.pk, attempt, turn, future)])
    return future.result(timeout=0)


def _claim(ids: list[int], *, again: bool = False) -> list[sql.Claimed]:
    now = timezone.now()
    return sql.claim(ids, now, now + timezone.timedelta(seconds=60), WORKER, again=again)


def test_a_turn_written_again_after_its_commit_went_through_is_stored_once(user):
    conversation = launch(user, SUITE).conversations.order_by("index").first()
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.RUNNING, attempt=1)
    assert _write(conversation, 1, _turn(1))

    # The same batch again, as the pump writes it once the database is back: its first commit had gone
    # through before the connection dropped.
    assert _write(conversation, 1, _turn(1))
    assert Turn.objects.filter(conversation=conversation).count() == 1
    assert Conversation.objects.get(pk=conversation.pk).turn_count == 1


def test_a_claim_made_again_after_its_commit_went_through_takes_it_as_it_is(user):
    ids = list(launch(user, SUITE).conversations.order_by("index").values_list("pk", flat=True))
    first = {c.conversation_id: c.attempt for c in _claim(ids)}
    assert set(first) == set(ids)

    assert _claim(ids) == []  # taken: a claim of the same conversations, not made again, gets nothing
    again = {c.conversation_id: c.attempt for c in _claim(ids, again=True)}
    assert again == first  # the same fencing tokens: not bumped a second time
    assert set(Conversation.objects.filter(pk__in=ids).values_list("attempt", flat=True)) == {1}


def test_a_claim_made_again_leaves_another_workers_conversation_alone(user):
    ids = list(launch(user, SUITE).conversations.order_by("index").values_list("pk", flat=True))
    _claim(ids)
    Conversation.objects.filter(pk=ids[0]).update(worker="w2@host:2:def", attempt=2)  # taken over meanwhile

    assert [c.conversation_id for c in _claim(ids, again=True)] == ids[1:]
    assert Conversation.objects.get(pk=ids[0]).attempt == 2


def test_turns_a_crashed_server_forgot_are_stored_again_and_a_lost_claim_stops(user):
    ids = list(launch(user, SUITE).conversations.order_by("index").values_list("pk", flat=True))
    claimed = _claim(ids)
    pump = Pump(capacity=3)
    for c in claimed:
        playing = pump._playing[c.conversation_id] = Playing(c, Latencies())
        for position in (1, 2):
            assert _write(Conversation(pk=c.conversation_id), c.attempt, _turn(position))
            playing.stored.append(_turn(position))
    kept, forgot, taken = ids
    # The server comes back without the last turn of one conversation (its commit was not flushed), and another
    # conversation was taken over meanwhile.
    Turn.objects.filter(conversation_id=forgot, position=2).delete()
    Conversation.objects.filter(pk=forgot).update(turn_count=1)
    Conversation.objects.filter(pk=taken).update(attempt=5, worker="w2@host:2:def")

    pump._reconcile()

    assert list(
        Turn.objects.filter(conversation_id=forgot).values_list("position", flat=True).order_by("position")
    ) == [1, 2]
    assert Conversation.objects.get(pk=forgot).turn_count == 2
    assert Turn.objects.filter(conversation_id=kept).count() == 2
    assert not pump._playing[kept].lost.is_set()
    assert not pump._playing[forgot].lost.is_set()
    assert pump._playing[taken].lost.is_set()  # it stops, writing nothing more
