"""A worker's turns in batches (runs.worker.writes.write_turns): the turns of many conversations in one
transaction, each conversation's claim still fencing its own turn."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest

from engine.results import CheckResult, EvalResult, ToolCall, ToolRound, Totals, TurnRecord, Usage
from runs.models import Conversation, Status, Turn
from runs.worker.messages import StoreTurn
from runs.worker.writes import fail, finish, write_ends, write_turns
from tests.factories import launch

# Marked e2e so that the PostgreSQL + Redis pass (make test-pg) runs it again: there a batch is one round trip
# of PostgreSQL's own SQL (runs.worker.sql_turns.store_turns).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

SUITE = "name: writer\nmodel: mock\nevals:\n" + "".join(
    f"  - {{id: e{i}, prompt: q{i}, checks: [{{contains: x}}]}}\n" for i in range(30)
)


def _turn(position: int, text: str = "a reply") -> TurnRecord:
    return TurnRecord(turn=position, prompt=f"prompt {position}", response=text, passed=True)


def _running(user) -> list[Conversation]:
    run = launch(user, SUITE)
    run.conversations.update(status=Status.RUNNING, attempt=1)
    return list(run.conversations.order_by("index"))


def _write(turns: list[tuple[Conversation, int, TurnRecord]]) -> list[bool]:
    """One batch, as a pump's round writes it; what each turn's future says."""
    futures = [concurrent.futures.Future() for _ in turns]
    write_turns(
        [StoreTurn(c.pk, attempt, turn, f) for (c, attempt, turn), f in zip(turns, futures, strict=True)]
    )
    return [future.result(timeout=0) for future in futures]


def test_turns_of_many_conversations_are_stored_each_once_with_their_counts(user):
    conversations = _running(user)

    # As a pump's rounds do: each conversation's next turn comes in the next batch, after its store.
    for position in (1, 2, 3):
        assert _write([(c, 1, _turn(position)) for c in conversations]) == [True] * 30

    assert Turn.objects.filter(conversation__in=conversations).count() == 90
    assert set(
        Conversation.objects.filter(pk__in=[c.pk for c in conversations]).values_list("turn_count", flat=True)
    ) == {3}


def test_a_conversation_whose_claim_moved_on_writes_nothing_and_the_others_are_stored(user):
    mine, taken, *_ = _running(user)
    Conversation.objects.filter(pk=taken.pk).update(attempt=2)  # another worker claimed it meanwhile

    assert _write([(taken, 1, _turn(1)), (mine, 1, _turn(1))]) == [False, True]
    assert not Turn.objects.filter(conversation=taken).exists()
    assert Turn.objects.filter(conversation=mine).count() == 1


def test_a_turn_already_stored_fails_alone_without_sinking_its_batch(user):
    first, second, third, *_ = _running(user)
    assert _write([(first, 1, _turn(1))]) == [True]

    # The same position again (a replay gone wrong) next to two good turns: the batch is written again one
    # turn at a time, and only the duplicate is refused.
    assert _write([(second, 1, _turn(1)), (first, 1, _turn(1, "a second answer")), (third, 1, _turn(1))]) == [
        True,
        False,
        True,
    ]
    assert list(Turn.objects.filter(conversation=first).values_list("record__response", flat=True)) == [
        "a reply"
    ]
    assert Turn.objects.filter(conversation__in=[second, third]).count() == 2


def test_a_batched_turn_reads_back_as_the_record_written_with_its_counts(user):
    # The record goes into the batch as pydantic's JSON text: quotes, newlines, non-ASCII, nested checks and
    # tool calls, floats and nulls must come back exactly, and the conversation's counters must add up.
    conversation, other, *_ = _running(user)
    record = TurnRecord(
        turn=1,
        prompt='say "hi"\nand a backslash \\ then é ✓',
        response="<b>ok</b> 💡",
        usage=Usage(prompt_tokens=12, completion_tokens=5),
        cost=0.25,
        judge_usage=Usage(prompt_tokens=3, completion_tokens=4),
        judge_cost=0.125,
        latency_ms=101,
        checks=[CheckResult(type="contains", label='contains "ok"', passed=True, score=0.5, reason="found")],
        passed=None,
        tool_rounds=[ToolRound(calls=[ToolCall(id="c1", name="lookup", arguments={"q": [1, 2.5, None]})])],
    )

    assert _write([(conversation, 1, record), (other, 1, _turn(1))]) == [True, True]

    stored = Turn.objects.get(conversation=conversation)
    assert TurnRecord.model_validate(stored.record) == record
    assert stored.passed is None and stored.position == 1
    conversation.refresh_from_db()
    assert (conversation.turn_count, conversation.prompt_tokens, conversation.completion_tokens) == (1, 12, 5)
    assert (conversation.judge_tokens, conversation.cost, conversation.tokens_estimated) == (7, 0.375, False)
    assert Turn.objects.get(conversation=other).passed is True


def test_a_rounds_ends_are_written_together_and_a_lost_claim_is_left_alone(user):
    # As a pump's round ends its conversations (writes.write_ends): the finishes in one statement, a failure
    # beside them, and a conversation another worker claimed meanwhile keeps what that worker wrote.
    passed, failed, taken, errored, *_ = _running(user)
    Conversation.objects.filter(pk=taken.pk).update(attempt=2)

    def result(status: str, score: float | None) -> EvalResult:
        verdict = f"{status} on turn 1"
        return EvalResult(index=0, id="e", kind="single-turn", prompt="q", status=status, score=score,
                          verdict=verdict, reason=verdict, turns=[_turn(1)], totals=Totals(turns=1, cost=0.5))  # fmt: skip

    ends = [
        (SimpleNamespace(conversation_id=passed.pk, attempt=1), finish, result("passed", 1.0)),
        (SimpleNamespace(conversation_id=failed.pk, attempt=1), finish, result("failed", None)),
        (SimpleNamespace(conversation_id=taken.pk, attempt=1), finish, result("passed", 1.0)),
        (SimpleNamespace(conversation_id=errored.pk, attempt=1), fail, "the endpoint said no"),
    ]
    write_ends(ends, lambda work, what: work())

    rows = {c.pk: c for c in Conversation.objects.filter(pk__in=[passed.pk, failed.pk, taken.pk, errored.pk])}
    assert (rows[passed.pk].status, rows[passed.pk].score, rows[passed.pk].cost) == (Status.PASSED, 1.0, 0.5)
    assert rows[passed.pk].finished_at is not None and rows[passed.pk].verdict == "passed on turn 1"
    assert (rows[failed.pk].status, rows[failed.pk].score) == (Status.FAILED, None)
    assert (rows[taken.pk].status, rows[taken.pk].finished_at) == (Status.RUNNING, None)
    assert (rows[errored.pk].status, rows[errored.pk].error) == (Status.ERROR, "the endpoint said no")
