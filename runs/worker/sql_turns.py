"""The worker's hot path in plain SQL, for turns (see runs.worker.sql): one turn, a batch of them, and whether a
turn is stored already. A batch is one JSON array taken apart by the database, so its statement's text is the
same for any number of turns and its parameters are one string per statement.
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
            f"""UPDATE {CONVERSATION}
                SET turn_count = %s, prompt_tokens = prompt_tokens + %s,
                    completion_tokens = completion_tokens + %s, judge_tokens = judge_tokens + %s,
                    user_tokens = user_tokens + %s, cost = cost + %s, tokens_estimated = %s,
                    waiting_until = NULL, waiting_reason = ''
                WHERE id = %s AND attempt = %s AND status = %s""",
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
            f"INSERT INTO {TURN} (conversation_id, position, record, passed, created_at) "
            f"VALUES (%s, %s, {_json_placeholder()}, %s, %s)",
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
# The same on SQLite (3.38+, for ->>), which has no data-modifying CTE: the conditional update of every
# conversation, then the insert of the turns of those it updated.
_STORE_TURNS_SQLITE_UPDATE = f"""UPDATE {CONVERSATION}
    SET turn_count = v.position, prompt_tokens = {CONVERSATION}.prompt_tokens + v.pt,
        completion_tokens = {CONVERSATION}.completion_tokens + v.ct,
        judge_tokens = {CONVERSATION}.judge_tokens + v.jt, user_tokens = {CONVERSATION}.user_tokens + v.ut,
        cost = {CONVERSATION}.cost + v.cost, tokens_estimated = v.est, waiting_until = NULL, waiting_reason = ''
    FROM (SELECT value ->> 'id' AS cid, value ->> 'attempt' AS attempt, value ->> 'position' AS position,
                 value ->> 'pt' AS pt, value ->> 'ct' AS ct, value ->> 'jt' AS jt, value ->> 'ut' AS ut,
                 value ->> 'cost' AS cost, value ->> 'est' AS est
          FROM json_each(%s)) AS v
    WHERE {CONVERSATION}.id = v.cid AND {CONVERSATION}.attempt = v.attempt AND {CONVERSATION}.status = %s
    RETURNING id"""
_STORE_TURNS_SQLITE_INSERT = f"""INSERT INTO {TURN} (conversation_id, position, record, passed, created_at)
    SELECT value ->> 'id', value ->> 'position', value -> 'record', value ->> 'passed', %s FROM json_each(%s)"""
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
    transaction; whether each was stored. Two statements for them all on SQLite, one on PostgreSQL; a second
    insert of a position raises IntegrityError for the lot (the caller's transaction then has to be rolled
    back)."""
    rows = [_batch_row(turn) for turn in turns]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_STORE_TURNS_PG, [f"[{', '.join(rows)}]", Status.RUNNING, _when(now)])
            stored = {row[0] for row in cursor.fetchall()}
        else:
            cursor.execute(_STORE_TURNS_SQLITE_UPDATE, [f"[{', '.join(rows)}]", Status.RUNNING])
            stored = {row[0] for row in cursor.fetchall()}
            ours = [row for row, turn in zip(rows, turns, strict=True) if turn["conversation_id"] in stored]
            if ours:
                cursor.execute(_STORE_TURNS_SQLITE_INSERT, [_when(now), f"[{', '.join(ours)}]"])
    return [turn["conversation_id"] in stored for turn in turns]
