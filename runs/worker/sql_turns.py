"""The worker's hot path in plain SQL, for turns (see runs.worker.sql): one turn, a batch of them, and whether a
turn is stored already. On PostgreSQL a batch is one JSON array taken apart by the server, so its statement's
text is the same for any number of turns and its one parameter is one string.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connection

from runs.models import Status, Turn

from .sql import CONVERSATION, TURN


def _when(value: datetime):
    return connection.ops.adapt_datetimefield_value(value)


def _json_placeholder() -> str:
    """Where a statement takes JSON text for a JSON column: PostgreSQL is told it is jsonb; SQLite keeps the
    text as it is."""
    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


# A turn's counts added to its conversation, and the turn itself: one turn (store_turn) or many (SQLite's batch).
_ADD_COUNTS = f"""UPDATE {CONVERSATION}
    SET turn_count = %s, prompt_tokens = prompt_tokens + %s, completion_tokens = completion_tokens + %s,
        judge_tokens = judge_tokens + %s, user_tokens = user_tokens + %s, cost = cost + %s, tokens_estimated = %s,
        waiting_until = NULL, waiting_reason = ''"""
_INSERT_TURN = f"INSERT INTO {TURN} (conversation_id, position, record, passed, created_at) VALUES "


def store_turn(
    conversation_id: int,
    attempt: int,
    *,
    position: int,
    record: str,
    passed: bool | None,
    now: datetime,
    prompt_tokens: int,
    completion_tokens: int,
    judge_tokens: int,
    user_tokens: int,
    cost: float,
    tokens_estimated: bool,
) -> bool:
    """Add one turn's counts to the conversation and insert the turn, in the caller's transaction. False when
        the conversation is no longer ours: then nothing is written (the conditional update comes first, so a
        batch of turns needs no savepoint per turn). A second insert of the same position raises IntegrityError.
    `record` is the TurnRecord's JSON text, stored as it is.

        The lease is not renewed here: the worker's heartbeat renews the leases of all its conversations at once
        (runs.worker.claims). Renewed with every turn, it would change an indexed column (conversation_lease), so
        each turn's update would write a new entry in every index of the conversation table."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"{_ADD_COUNTS} WHERE id = %s AND attempt = %s AND status = %s",
            [
                position,
                prompt_tokens,
                completion_tokens,
                judge_tokens,
                user_tokens,
                cost,
                tokens_estimated,
                conversation_id,
                attempt,
                Status.RUNNING,
            ],  # fmt: skip
        )
        if cursor.rowcount != 1:
            return False
        cursor.execute(
            f"{_INSERT_TURN}(%s, %s, {_json_placeholder()}, %s, %s)",
            [conversation_id, position, record, passed, _when(now)],
        )
        return True


def turn_is_ours(conversation_id: int, attempt: int, position: int, record: str) -> bool:
    """Whether this very turn is stored at its position and the conversation is still ours: a write that
    failed as it committed went through. With the claim unchanged and the same record, the row is the one
    this worker sent, since no other worker writes past the turns its claim found stored."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT t.record FROM {CONVERSATION} c JOIN {TURN} t ON t.conversation_id = c.id
                WHERE c.id = %s AND c.attempt = %s AND c.status = %s AND t.position = %s""",
            [conversation_id, attempt, Status.RUNNING, position],
        )
        row = cursor.fetchone()
    field = Turn._meta.get_field("record")
    return row is not None and field.from_db_value(row[0], None, connection) == json.loads(record)


# Many turns in one statement on PostgreSQL: the conditional updates, then the inserts of those that matched.
# The turns come as one JSON array, taken apart by jsonb_to_recordset, so the statement's text is the same for
# any number of turns and its one parameter is one string: Django binds parameters on the client, and psycopg
# would quote an array's every element in Python.
_STORE_TURNS_PG = f"""WITH v AS (
        SELECT * FROM jsonb_to_recordset(%s::jsonb)
            AS t(id bigint, attempt bigint, position bigint, pt bigint, ct bigint, jt bigint, ut bigint,
                 cost double precision, est boolean, record jsonb, passed boolean)),
    ours AS (
        UPDATE {CONVERSATION} c
        SET turn_count = v.position, prompt_tokens = c.prompt_tokens + v.pt,
            completion_tokens = c.completion_tokens + v.ct, judge_tokens = c.judge_tokens + v.jt,
            user_tokens = c.user_tokens + v.ut, cost = c.cost + v.cost, tokens_estimated = v.est,
            waiting_until = NULL, waiting_reason = ''
        FROM v WHERE c.id = v.id AND c.attempt = v.attempt AND c.status = %s
        RETURNING c.id)
    INSERT INTO {TURN} (conversation_id, position, record, passed, created_at)
    SELECT v.id, v.position, v.record, v.passed, %s FROM v JOIN ours ON ours.id = v.id
    RETURNING conversation_id"""
# Each turn's fields as the batch statements name them; its record goes in as the JSON text it already is.
_TURN_FIELDS = {"conversation_id": "id", "attempt": "attempt", "position": "position", "prompt_tokens": "pt",
                "completion_tokens": "ct", "judge_tokens": "jt", "user_tokens": "ut", "cost": "cost",
                "tokens_estimated": "est", "passed": "passed"}  # fmt: skip


def _batch_row(turn: dict) -> str:
    """A turn as one JSON object of the batch: its fields, and its record spliced in as the JSON text it is
    (parsing it only to write it out again would cost more than the rest of the write)."""
    fields = json.dumps({short: turn[name] for name, short in _TURN_FIELDS.items()})
    return f'{fields[:-1]}, "record": {turn["record"]}}}'


def store_turns(turns: list[dict], *, now: datetime) -> list[bool]:
    """store_turn for many turns (each a dict of its arguments; one per conversation), in the caller's
    transaction; whether each was stored. On PostgreSQL one statement for them all; a second insert of a
    position raises IntegrityError for the lot (the caller's transaction then has to be rolled back).

    SQLite takes them in three statements (_store_turns_sqlite)."""
    if connection.vendor != "postgresql":
        return _store_turns_sqlite(turns, now)
    rows = ", ".join(_batch_row(turn) for turn in turns)
    with connection.cursor() as cursor:
        cursor.execute(_STORE_TURNS_PG, [f"[{rows}]", Status.RUNNING, _when(now)])
        stored = {row[0] for row in cursor.fetchall()}
    return [turn["conversation_id"] in stored for turn in turns]


def _store_turns_sqlite(turns: list[dict], now: datetime) -> list[bool]:
    """store_turns on SQLite: which conversations are still ours, in one query, then the updates and the
    inserts of those, each one executemany. SQLite runs a statement in microseconds, in this process; what a
    turn cost was the wrapping of its two statements (a cursor each, the placeholder rewrite, the checks),
    which a batch now pays three times. The caller's transaction holds the writer lock (evalsite.sqlite), so
    no claim changes between the query and the writes."""
    if not turns:
        return []
    with connection.cursor() as cursor:
        ids = [turn["conversation_id"] for turn in turns]
        cursor.execute(
            f"SELECT id, attempt FROM {CONVERSATION} WHERE status = %s AND id IN ({', '.join(['%s'] * len(ids))})",
            [Status.RUNNING, *ids],
        )
        claims = dict(cursor.fetchall())
        ours = [turn for turn in turns if claims.get(turn["conversation_id"]) == turn["attempt"]]
        if ours:
            cursor.executemany(
                f"{_ADD_COUNTS} WHERE id = %s",
                [
                    (
                        t["position"],
                        t["prompt_tokens"],
                        t["completion_tokens"],
                        t["judge_tokens"],
                        t["user_tokens"],
                        t["cost"],
                        t["tokens_estimated"],
                        t["conversation_id"],
                    )
                    for t in ours
                ],  # fmt: skip
            )
            when = _when(now)
            cursor.executemany(
                f"{_INSERT_TURN}(%s, %s, %s, %s, %s)",
                [(t["conversation_id"], t["position"], t["record"], t["passed"], when) for t in ours],
            )
    stored = {turn["conversation_id"] for turn in ours}
    return [turn["conversation_id"] in stored for turn in turns]
