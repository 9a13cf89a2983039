"""What a worker writes of the conversations it plays: their turns, in batches, a note while a call waits to
retry, and their ends. Every write is conditional on the conversation's claim (its `attempt`), so a worker
that lost the claim writes nothing, and a write made again after its connection dropped changes nothing more.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from engine.conversation import ResumeMismatch
from engine.redact import redact
from engine.results import EvalResult, TurnRecord
from runs import outage
from runs.models import Run, Status

from . import sql, sql_turns
from .claims import LostClaim, heartbeat
from .messages import StoreTurn
from .playing import Playing, StartFailed

log = logging.getLogger(__name__)

# PostgreSQL's codes for a transaction it aborted to break a deadlock or a serialization conflict.
RETRYABLE_SQLSTATES = ("40P01", "40001")


def turn_row(conversation_id: int, attempt: int, turn: TurnRecord) -> dict:
    """What sql_turns.store_turn writes of a turn."""
    return {
        "conversation_id": conversation_id,
        "attempt": attempt,
        "position": turn.turn,
        # JSON text straight from pydantic's serialiser: a dict dumped by the json module costs ten times more.
        "record": turn.model_dump_json(),
        "passed": turn.passed,
        "prompt_tokens": turn.usage.prompt_tokens,
        "completion_tokens": turn.usage.completion_tokens,
        "judge_tokens": turn.judge_usage.total_tokens,
        "user_tokens": turn.user_usage.total_tokens,
        "cost": turn.spent,
        "tokens_estimated": turn.usage.estimated,
    }


def store_turn(conversation_id: int, attempt: int, turn: TurnRecord) -> None:
    """One turn, on its own (the factories' and benchmarks' way in); LostClaim when the conversation is not
    ours."""
    if not _store_row(turn_row(conversation_id, attempt, turn), timezone.now()):
        raise LostClaim()
    sql.release_connection()  # the next turn's model call follows


def _store_row(row: dict, now) -> bool:
    """One turn in a transaction of its own: whether it is stored (False: the conversation is not ours)."""
    try:
        with transaction.atomic():
            return sql_turns.store_turn(now=now, **row)
    except IntegrityError:
        # Its position is taken: by this very write, committed as the connection dropped, if the claim is
        # still ours and the turn the same; else by the worker that took the conversation over.
        return sql_turns.turn_is_ours(row["conversation_id"], row["attempt"], row["position"], row["record"])


def write_turns(
    batch: list[StoreTurn], *, stop: threading.Event | None = None, on_back: Callable | None = None
) -> None:
    """Store many turns in one transaction and answer each on its `stored` future: True once committed, False
    when its conversation is no longer ours, or what the database raised. Never raises itself.

    The turns that arrive together share one commit, and on SQLite one turn of the write lock. A database
    that is away is waited for (outage.patiently, with `stop` and `on_back`) and the batch written again: a
    turn its first try did store is found stored, not stored twice."""
    now = timezone.now()
    rows = [turn_row(message.conversation_id, message.attempt, message.turn) for message in batch]
    try:
        outcomes = outage.patiently(
            lambda: _store_rows(rows, now), what=f"storing {len(rows)} turn(s)", stop=stop, on_back=on_back
        )
    except Exception as exc:  # noqa: BLE001 - every conversation of the batch hears it
        outcomes = [exc] * len(batch)
    for message, outcome in zip(batch, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            message.stored.set_exception(outcome)
        else:
            message.stored.set_result(outcome)


def _store_rows(rows: list[dict], now) -> list:
    """Each turn's outcome: stored, not ours (False), or what the database raised for that one alone."""
    try:
        return _retrying_deadlocks(lambda: sql_turns.store_turns(rows, now=now))
    except IntegrityError:
        # A turn already stored at its position (a conversation taken over and replayed meanwhile, or a write
        # that committed as its connection dropped): one transaction each.
        outcomes = []
        for row in rows:
            try:
                outcomes.append(_store_row(row, now))
            except Exception as exc:
                if outage.unavailable(exc):
                    raise  # the whole batch is written again once the database is back
                outcomes.append(exc)  # handed to the conversation, which records it
        return outcomes


def _retrying_deadlocks(write: Callable, tries: int = 3):
    """write() in a transaction, run again if PostgreSQL aborted it to break a deadlock or a serialization
    conflict, as its manual asks of the application; without it one such abort would fail every conversation
    whose turn was in the batch."""
    for attempt in range(1, tries + 1):
        try:
            with transaction.atomic():
                return write()
        except DatabaseError as exc:
            if attempt == tries or getattr(exc.__cause__, "sqlstate", None) not in RETRYABLE_SQLSTATES:
                raise
            log.warning(
                "PostgreSQL aborted the turns' write (%s); writing them again (%d of %d)",
                exc.__cause__.sqlstate,
                attempt + 1,
                tries,
            )


def restore_turns(conversation_id: int, attempt: int, turns: list[TurnRecord]) -> None:
    """Store again, in order, turns this claim stored that the database has forgotten (a crash loses a
    worker's unflushed commits, see sql.durable)."""
    now = timezone.now()
    with transaction.atomic():
        for turn in turns:
            sql_turns.store_turn(now=now, **turn_row(conversation_id, attempt, turn))


def note_unpriced(run_id, names: set[str]) -> None:
    """Name on the run endpoints without prices that its calls went to (Run.unpriced, which its pages read), in
    a transaction of its own: the run's row is locked only as long as it takes, and two workers that name
    endpoints at once each keep the other's."""
    with transaction.atomic():
        known = Run.objects.select_for_update().filter(pk=run_id).values_list("unpriced", flat=True).first()
        if known is None:  # the run is gone
            return
        merged = sorted({*known, *names})
        if merged != sorted(known):
            Run.objects.filter(pk=run_id).update(unpriced=merged)


def note_slow_calls(changed: list[tuple[Playing, float | None]], now: float) -> bool:
    """Note on each conversation's row when its slow model call went out (`since`, on time.monotonic's clock
    as `now`; None: no call is slow), in one transaction; whether the notes were written."""
    wall = timezone.now()
    try:
        with transaction.atomic():
            for playing, since in changed:
                went_out = None if since is None else wall - timedelta(seconds=now - since)
                sql.update_owned(
                    playing.claimed.conversation_id, playing.claimed.attempt, calling_since=went_out
                )
    except DatabaseError:  # only the notes are lost; the next check writes them again
        log.warning("could not note %d conversation(s)' slow model calls", len(changed))
        return False
    return True


def tools_called(turns: list[TurnRecord]) -> str:
    """What Conversation.tools_called stores: every tool call's name in the order made, each between newlines;
    a name the model made up keeps to one line, so "called X" matches only X."""
    names = [" ".join(call.name.split()) for turn in turns for call in turn.tool_calls]
    return "\n" + "\n".join(names) + "\n" if names else ""


def finish(conversation_id: int, attempt: int, result: EvalResult) -> bool:
    return sql.update_owned(conversation_id, attempt, **finish_values(result))


def finish_values(result: EvalResult) -> dict:
    """What an ended conversation's row is given of its result."""
    return dict(
        status=result.status,
        kind=result.kind,
        style=result.conversation,
        turns_passed=result.turns_passed,
        termination=(result.termination or "")[:300],
        termination_kind=result.termination_kind or "",
        termination_detail=(result.termination_detail or "")[:300],
        turns_total=result.turns_total,
        diverged_at=result.diverged_at,
        passed_on_turn=result.passed_on_turn,
        score=result.score,
        graders=[item.model_dump(mode="json") for item in result.graders],
        tools_called=tools_called(result.turns),
        # Named graders that grade the conversation once judge after its last stored turn: their spend is in
        # the result's totals only.
        judge_tokens=result.totals.judge_tokens,
        cost=result.totals.cost,
        cached_calls=result.totals.cached_calls,
        saved_cost=result.totals.saved_cost,
        verdict=result.verdict[:300],
        reason=result.reason[:300],
        error=result.error or "",
        finished_at=timezone.now(),
        lease_expires_at=None,
        waiting_until=None,
        waiting_reason="",
        calling_since=None,
    )


def fail(conversation_id: int, attempt: int, message: str) -> bool:
    message = redact(message)  # it may quote an exception that quotes an endpoint
    return sql.update_owned(
        conversation_id,
        attempt,
        status=Status.ERROR,
        error=message,
        verdict=message[:300],
        reason=message[:300],
        finished_at=timezone.now(),
        lease_expires_at=None,
        waiting_until=None,
        waiting_reason="",
        calling_since=None,
    )


def end_of(playing: Playing, done: concurrent.futures.Future) -> tuple[str, tuple | None]:
    """How a conversation ended, and what to write of it: (finish or fail, its argument), or
    None."""
    conversation_id = playing.claimed.conversation_id
    try:
        result = done.result()
        # Its last turn's write was queued before its end, so a round has done it (never waits: a bug would
        # end the conversation in error, not stop the pump).
        if (playing.storing is not None and not playing.storing.result(timeout=0)) or playing.lost.is_set():
            raise LostClaim()
    except LostClaim:
        log.warning("conversation %s was taken over by another worker; stopping", conversation_id)
        return "lost", None
    except StartFailed as exc:
        return "error", (fail, f"could not start: {exc}")
    except ResumeMismatch as exc:
        return "error", (fail, f"cannot resume: {exc}")
    except Exception as exc:  # a bug must not leave the run hanging: record it on this conversation
        log.error("conversation %s crashed", conversation_id, exc_info=exc)
        return "error", (fail, f"internal error: {type(exc).__name__}: {exc}")
    if heartbeat.was_handed_back(conversation_id):
        return "handed back", None  # another worker resumes it; its claim fences this one out anyway
    return result.status, (finish, result)


def write_ends(ends: list, patiently: Callable) -> None:
    """Each ended conversation's final write, (claimed, finish or fail, its argument), all in one transaction
    flushed to disk (sql.durable); if that fails, one transaction each, so one bad row cannot keep the others
    from ending. A database that is away is waited out (`patiently`, the pump's). One that still fails stays
    running under its lease, which the heartbeat no longer renews: the sweepers requeue it and the next claim
    resumes it."""
    if not ends:
        return

    def end(some: list) -> None:
        with transaction.atomic():
            sql.durable()
            finished = []  # one statement for them all: the ends of a round are mostly finishes
            for claimed, write, argument in some:
                if write is finish:
                    finished.append((claimed.conversation_id, claimed.attempt, finish_values(argument)))
                else:
                    write(claimed.conversation_id, claimed.attempt, argument)
            sql.update_owned_many(finished)

    try:
        patiently(lambda: end(ends), f"ending {len(ends)} conversation(s)")
        return
    except Exception:
        log.exception("ending %d conversation(s) together failed; one at a time", len(ends))
    for one in ends:
        try:
            patiently(lambda one=one: end([one]), f"ending conversation {one[0].conversation_id}")
        except Exception:
            log.exception("conversation %s could not be ended", one[0].conversation_id)
