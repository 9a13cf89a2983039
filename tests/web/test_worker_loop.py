"""A worker's pump (runs.worker.pump): many conversations on the process's event loop (runs.worker.loop), their
database work done by one thread in batches, within the pump's slots; played here against the fake OpenAI
server, with the messages dispatch would publish recorded instead of sent."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from engine.results import TurnRecord
from runs import services
from runs.models import Conversation, Status, Turn
from runs.worker import sql
from runs.worker.claims import claim, heartbeat
from runs.worker.loop import event_loop
from runs.worker.messages import StoreTurn
from runs.worker.pump import Pump
from runs.worker.writes import write_turns
from suites.services import create_suite


@pytest.fixture
def published(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("runs.worker.tasks.run_conversation.delay", sent.append)
    return sent


def _launch(user, evals: int, concurrency: int):
    lines = ["name: pumped", "model: fake/m", "evals:"]
    lines += [f"  - {{id: e{i}, prompt: question {i}, checks: [{{contains: x}}]}}" for i in range(evals)]
    version = create_suite(owner=user, source="\n".join(lines) + "\n").latest_version
    return services.create_run(version=version, user=user, concurrency=concurrency)


def _claims(queries) -> list[str]:
    return [q["sql"] for q in queries if "attempt = attempt + 1" in q["sql"]]


@pytest.mark.django_db(transaction=True)
def test_offered_conversations_are_claimed_in_one_statement_and_played_together(
    user, fake_endpoint, fake_openai, published
):
    fake_openai.latency = 0.2
    run = _launch(user, evals=6, concurrency=6)
    pump = Pump(capacity=6)
    assert all(pump.offer(pk) for pk in published)

    started = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        pump.serve(until_idle=True)
    took = time.monotonic() - started

    assert len(_claims(queries.captured_queries)) == 1  # six conversations, one claim
    assert took < 6 * 0.2  # together, not one after another
    conversations = list(run.conversations.all())
    assert {c.status for c in conversations} == {Status.FAILED}  # no reply contains "x"
    assert all(c.attempt == 1 and c.turn_count == 1 for c in conversations)
    assert pump.outcomes == dict.fromkeys(published, Status.FAILED)
    run.refresh_from_db()
    assert run.status == Status.FAILED


@pytest.mark.django_db(transaction=True)
def test_a_full_pump_refuses_and_takes_the_refused_conversation_when_a_slot_frees(
    user, fake_endpoint, published
):
    run = _launch(user, evals=3, concurrency=2)
    first, second = published
    pump = Pump(capacity=1)

    assert pump.offer(first)
    assert not pump.offer(second)  # its message is dropped: the conversation stays sent, unclaimed
    pump.serve(until_idle=True)

    # The first's end kept the third (marked sent for the slot it freed); the third's end took the second,
    # whose message had been dropped. Nothing went through the broker after the launch.
    assert published == [first, second]
    conversations = list(run.conversations.all())
    assert {c.status for c in conversations} == {Status.FAILED}
    assert {c.worker for c in conversations} == {heartbeat.name}
    assert all(c.attempt == 1 for c in conversations)


@pytest.mark.django_db(transaction=True)
def test_a_worker_pump_with_free_slots_takes_what_a_full_one_dropped(user, fake_endpoint, published):
    run = _launch(user, evals=2, concurrency=2)
    assert Pump(capacity=1).offer(published[0])  # a full pump elsewhere, which never plays (nor serves)
    idle = Pump(capacity=4)
    # As a worker's: serving forever, looking for waiting conversations while it has room.
    _serve_until_failed(idle, run, 2)
    assert run.conversations.filter(status=Status.FAILED).count() == 2
    assert idle.held() == 0


def _serve_until_failed(pump: Pump, run, count: int) -> None:
    """Serve as a worker's pump does (forever, in its own thread) until `count` of the run's conversations
    have failed, or 20 s; then stop."""
    pump.start()
    try:
        deadline = time.monotonic() + 20
        while run.conversations.filter(status=Status.FAILED).count() < count and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        pump.stop()


@pytest.mark.django_db(transaction=True)
def test_a_pump_that_loses_its_claims_to_another_worker_looks_again_at_once(
    user, fake_endpoint, published, monkeypatch
):
    # At a launch every pump with room reaches for the same conversations. One that loses them must take the
    # others still waiting in the same round, not a poll interval later (set here to a minute).
    monkeypatch.setattr(Pump, "POLL_SECONDS", 60)
    run = _launch(user, evals=4, concurrency=4)
    first, second, third, fourth = published
    pump = Pump(capacity=2)
    assert pump.offer(first) and pump.offer(second)  # full: its first poll finds no room
    now = timezone.now()
    taken = sql.claim([first, second], now, now + timedelta(minutes=5), "other@host")
    assert len(taken) == 2  # another worker won both before this pump's claim

    _serve_until_failed(pump, run, 2)
    ours = run.conversations.filter(worker=heartbeat.name)
    assert {c.pk for c in ours} == {third, fourth}
    assert {c.status for c in ours} == {Status.FAILED}
    assert run.conversations.filter(worker="other@host").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_run_stops_its_conversations_within_the_run_check(
    user, fake_endpoint, fake_openai, published
):
    fake_openai.latency = 0.3
    lines = ["name: long", "model: fake/m", "evals:"]
    turns = ", ".join(f"{{input: turn {n}}}" for n in range(6))
    lines += [f"  - {{id: e{i}, checks: [{{not_match: '*zzz*'}}], turns: [{turns}]}}" for i in range(4)]
    version = create_suite(owner=user, source="\n".join(lines) + "\n").latest_version
    run = services.create_run(version=version, user=user, concurrency=4)
    pump = Pump(capacity=4)
    for pk in published:
        pump.offer(pk)
    threading.Timer(0.5, lambda: services.cancel(run)).start()

    pump.serve(until_idle=True)

    conversations = list(run.conversations.all())
    assert {c.status for c in conversations} == {Status.CANCELLED}
    assert all(c.turn_count < 6 for c in conversations)


def test_a_call_after_the_pump_stopped_serving_fails_instead_of_waiting_forever():
    pump = Pump(capacity=1)
    pump.serve(until_idle=True)  # nothing held: returns at once, and serves nothing more

    async def late() -> None:
        await pump.call(lambda: None)

    with pytest.raises(RuntimeError, match="ended"):
        asyncio.run_coroutine_threadsafe(late(), event_loop()).result(timeout=5)


def test_as_many_conversations_as_the_worker_holds_can_grade_beside_the_loop_at_once(monkeypatch):
    """Grading that may call a model (a judge) runs in a thread beside the loop; asyncio's default pool (6
    threads on two cores) would hold a worker of 50 conversations to six judges at a time. Every one of
    them waits at a barrier here, which opens only once all are in it at the same time."""
    from runs.worker import loop as loop_module

    monkeypatch.setattr(loop_module, "_loop", None)  # a fresh loop, sized as a worker of 40 sizes it
    monkeypatch.setattr(loop_module, "grading_threads", 40)
    barrier = threading.Barrier(40, timeout=20)

    async def all_grading_at_once() -> list[int]:
        return await asyncio.gather(*(asyncio.to_thread(barrier.wait) for _ in range(40)))

    arrived = asyncio.run_coroutine_threadsafe(all_grading_at_once(), event_loop()).result(timeout=30)
    assert sorted(arrived) == list(range(40))


def _three_turns(user):
    source = (
        "name: piped\nmodel: fake/m\nevals:\n"
        "  - {id: e0, checks: [{not_match: '*zzz*'}], turns: [{input: one}, {input: two}, {input: three}]}\n"
    )
    version = create_suite(owner=user, source=source).latest_version
    return services.create_run(version=version, user=user, concurrency=1)


def _when_the_fake_has(fake_openai, count: int, then) -> threading.Thread:
    """In the background: once the fake has received `count` chat requests, run `then`."""

    def wait() -> None:
        deadline = time.monotonic() + 10
        while len(fake_openai.chat_requests()) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        then()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_the_next_model_call_goes_out_while_the_last_turns_write_waits_for_the_pump(
    user, fake_endpoint, fake_openai, published
):
    """A turn's write does not hold its conversation up: the pump's thread is kept busy from the first call
    until the second call reaches the fake, so the first turn can only be written after the second call went
    out. Turns are still written in order, each once, and the end after the last."""
    fake_openai.latency = 0.3
    run = _three_turns(user)
    pump = Pump(capacity=1)
    assert pump.offer(published[0])
    second_call_while_busy = []

    def busy_until_the_second_call() -> None:  # in the pump's thread: turn 1's write queues behind this
        deadline = time.monotonic() + 3
        while len(fake_openai.chat_requests()) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        second_call_while_busy.append(len(fake_openai.chat_requests()) >= 2)

    _when_the_fake_has(fake_openai, 1, lambda: pump.post(busy_until_the_second_call))
    pump.serve(until_idle=True)

    assert second_call_while_busy == [True]
    conversation = run.conversations.get()
    assert (conversation.status, conversation.turn_count) == (Status.PASSED, 3)
    turns = list(conversation.turns.order_by("position"))
    assert [turn.position for turn in turns] == [1, 2, 3]
    assert [turn.record["prompt"] for turn in turns] == ["one", "two", "three"]
    assert turns[0].created_at < turns[1].created_at < turns[2].created_at <= conversation.finished_at


@pytest.mark.django_db(transaction=True)
def test_a_claim_lost_before_the_last_turns_write_ends_the_conversation_as_lost(
    user, fake_endpoint, fake_openai, published
):
    """The last turn's write is confirmed when the conversation ends: taken over by another worker during its
    last call, it writes neither that turn nor its end."""
    from django.db.models import F

    fake_openai.latency = 0.3
    run = _three_turns(user)
    pump = Pump(capacity=1)
    assert pump.offer(published[0])
    conversation = run.conversations.get()

    def taken_over() -> None:  # in the pump's thread, as another worker's claim would do it
        run.conversations.update(attempt=F("attempt") + 1, worker="elsewhere")

    _when_the_fake_has(fake_openai, 3, lambda: pump.post(taken_over))
    pump.serve(until_idle=True)

    assert pump.outcomes == {conversation.pk: "lost"}
    conversation.refresh_from_db()
    assert (conversation.status, conversation.turn_count, conversation.worker) == (
        Status.RUNNING,
        2,
        "elsewhere",
    )
    assert conversation.finished_at is None


def _postgres(**options):
    """A connection of its own to the test database, beside Django's."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, **options)


@pytest.mark.sql
@pytest.mark.django_db(transaction=True)
def test_turn_writes_that_postgresql_aborts_in_a_deadlock_are_written_again(user, fake_endpoint, published):
    # Another connection holds one of the batch's rows, then reaches for a row the batch holds: PostgreSQL
    # breaks the cycle by aborting the batch, whose conversations must not end as errors for it.
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time: no deadlock")
    _launch(user, evals=2, concurrency=2)
    first, second = sorted(published)
    claimed = {c.conversation_id: c.attempt for c in claim([first, second])}
    batch = [
        StoreTurn(pk, claimed[pk], TurnRecord(turn=1, prompt="q", response="a"), concurrent.futures.Future())
        for pk in (first, second)
    ]

    def write() -> None:
        write_turns(batch)
        connection.close()  # this thread's own

    writing = threading.Thread(target=write)
    with _postgres() as other, _postgres(autocommit=True) as watcher:
        # Only the batch's wait reaches PostgreSQL's deadlock check (after its own deadlock_timeout, 1 s).
        other.execute("SET deadlock_timeout = '60s'")
        other.execute("UPDATE runs_conversation SET waiting_reason = '' WHERE id = %s", [second])
        writing.start()
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline
            and not watcher.execute(
                # This database's waits only: another test process may be waiting on a lock of its own.
                "SELECT count(*) FROM pg_locks JOIN pg_stat_activity USING (pid) WHERE NOT granted"
                " AND locktype = 'transactionid' AND datname = current_database()"
            ).fetchone()[0]
        ):
            time.sleep(0.02)  # until the batch, holding the first row, waits for the second
        other.execute("UPDATE runs_conversation SET waiting_reason = '' WHERE id = %s", [first])
        other.commit()
        writing.join(timeout=30)
    assert [message.stored.result(timeout=0) for message in batch] == [True, True]
    assert sorted(Turn.objects.filter(position=1).values_list("conversation_id", flat=True)) == [
        first,
        second,
    ]


@pytest.mark.sql
@pytest.mark.django_db(transaction=True)
def test_a_lease_renewal_skips_a_row_being_written_and_renews_it_next_time(user, published, fake_endpoint):
    # The heartbeat renews on a connection of its own while the pump writes turns: on PostgreSQL it must not
    # wait for their rows (two multi-row updates in different orders deadlocked), nor lose them.
    _launch(user, evals=2, concurrency=2)
    first, second = sorted(published)
    claim([first, second])
    me = heartbeat.name
    later = timezone.now() + timedelta(minutes=10)
    if connection.vendor != "postgresql":
        assert sql.renew_leases([first, second], me, later) == {first, second}
        return
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '5s'")  # a renewal that waited would fail here, not hang the test
    with _postgres() as other:
        # As the pump's write of a turn does.
        other.execute("UPDATE runs_conversation SET waiting_reason = '' WHERE id = %s", [first])
        assert sql.renew_leases([first, second], me, later) == {second}  # at once, not after the write
        other.commit()
    assert sql.renew_leases([first], me, later) == {first}
    assert sql.renew_leases([first, second], "another@host", later) == set()  # only this worker's
    assert _leases(first, second) == [later, later]


def _leases(*ids) -> list:
    return [Conversation.objects.get(pk=pk).lease_expires_at for pk in ids]
