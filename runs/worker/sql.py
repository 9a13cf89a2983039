"""The worker's hot path, in plain SQL.

Every conversation passes through a claim, one write per turn, a finish and a dispatch of the next one, many
times a second on a busy worker. The ORM spends far more CPU compiling each of these statements than the
database takes to run it, and a worker's conversations share one interpreter, so that CPU is time every
other conversation waits. Written out here they cost a fraction of it. The ORM does the rest.

The statements run unchanged on SQLite (3.35+, for RETURNING) and PostgreSQL, but for a batch of turns. Values go through the
fields' own database preparation, so dates, UUIDs and JSON are stored exactly as the ORM stores them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.db import connection, transaction

from runs.models import Conversation, Run, Status, Turn
from suites.models import SuiteVersion

CONVERSATION = Conversation._meta.db_table
RUN = Run._meta.db_table
TURN = Turn._meta.db_table
VERSION = SuiteVersion._meta.db_table
ACTIVE_SQL = f"('{Status.QUEUED}', '{Status.RUNNING}')"
INSERT_BATCH = 5_000  # conversations per executemany when a run is created


def release_connection() -> None:
    """Hand this thread's connection back to the pool before it waits on a model (seconds, where a database
    moment is milliseconds), so a worker's threads share a few connections. Without a pool, or inside a
    transaction, the thread keeps it."""
    if connection.settings_dict["OPTIONS"].get("pool") and not connection.in_atomic_block:
        connection.close()


def _when(value: datetime | None):
    return connection.ops.adapt_datetimefield_value(value)


def run_key(run_id):
    """A run's primary key as the database takes it (SQLite keeps UUIDs as hex text)."""
    return Run._meta.pk.get_db_prep_value(run_id, connection)


class VersionKey(NamedTuple):
    """A suite version as runs.specs.suite takes it, without loading the row."""

    pk: int
    sha256: str


@dataclass(frozen=True)
class Claimed:
    """What a worker needs to play the conversation it has just claimed."""

    conversation_id: int
    attempt: int  # the fencing token: every later write is conditional on it
    index: int
    eval_id: str
    run_id: object  # as the database returned it, so it can be passed back unchanged
    run_status: str
    model: str
    endpoint_name: str
    version_id: int
    version_sha256: str
    system: str  # what the model is sent before the live turns, as stored at launch
    history: list[dict]
    iteration: int = 0
    regraded_from: object = None  # the run whose stored conversation a re-grade replays, if any
    run_vars: dict | None = None  # the run's suite variables (Run.vars)
    run_options: dict | None = None  # what its launch set over the suite (Run.options, engine.options)

    @property
    def version(self) -> VersionKey:
        """The suite version, as runs.specs.suite takes it."""
        return VersionKey(self.version_id, self.version_sha256)


def claim(
    conversation_ids: list[int], now: datetime, lease_until: datetime, worker: str, *, again: bool = False
) -> list[Claimed]:
    """Take these queued conversations (or ones whose worker's lease has lapsed) of active runs, for `worker`,
    in one statement; those it took, in the order given. A worker's pump claims every conversation it can
    start at once (runs.worker.pump): one statement, one commit and on SQLite one turn of the write lock for
    all of them.

    `again`: the same claim once more, after the connection failed while it ran. It may have committed then:
    a conversation the worker holds already, under an unexpired lease, is taken as it is, with its attempt
    not bumped a second time (never pass one the worker is playing)."""
    if not conversation_ids:
        return []
    attempt, mine = "attempt + 1", ""
    if again:
        held = "status = %s AND worker = %s AND lease_expires_at >= %s"
        attempt = f"CASE WHEN {held} THEN attempt ELSE attempt + 1 END"
        mine = "OR (status = %s AND worker = %s)"
    # What the worker needs of the run and its suite version comes back with the claim.
    run = f"(SELECT {{}} FROM {RUN} r WHERE r.id = {CONVERSATION}.run_id)"
    version = f"(SELECT {{}} FROM {RUN} r JOIN {VERSION} v ON v.id = r.suite_version_id WHERE r.id = {CONVERSATION}.run_id)"
    ids = ", ".join(["%s"] * len(conversation_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE {CONVERSATION}
                SET status = %s, attempt = {attempt}, started_at = %s, lease_expires_at = %s, worker = %s,
                    calling_since = NULL
                WHERE id IN ({ids})
                  AND (status = %s OR (status = %s AND lease_expires_at < %s) {mine})
                  AND run_id IN (SELECT id FROM {RUN} WHERE status IN {ACTIVE_SQL})
                RETURNING id, attempt, "index", eval_id, run_id, {run.format("r.status")}, {run.format("r.model")},
                          {run.format("r.endpoint_name")}, {version.format("v.id")}, {version.format("v.sha256")},
                          "system", history, iteration, {run.format("r.regraded_from_id")}, {run.format("r.vars")},
                          {run.format("r.options")}""",
            [
                Status.RUNNING,
                *([Status.RUNNING, worker, _when(now)] if again else []),
                _when(now),
                _when(lease_until),
                worker,
                *conversation_ids,
                Status.QUEUED,
                Status.RUNNING,
                _when(now),
                *([Status.RUNNING, worker] if again else []),
            ],  # fmt: skip
        )
        # In Claimed's field order, so that a row makes one with its history decoded.
        rows = {row[0]: row for row in cursor.fetchall()}
        started = {row[4] for row in rows.values() if row[5] == Status.QUEUED}
        for run_id in started:
            cursor.execute(
                f"UPDATE {RUN} SET status = %s, started_at = %s WHERE id = %s AND status = %s",
                [Status.RUNNING, _when(now), run_id, Status.QUEUED],
            )
    history = Conversation._meta.get_field("history")
    run_vars = Run._meta.get_field("vars")
    return [
        Claimed(
            *row[:11],
            history.from_db_value(row[11], None, connection),
            *row[12:14],
            run_vars.from_db_value(row[14], None, connection),
            run_vars.from_db_value(row[15], None, connection),  # a JSON field, read as Run.vars is
        )
        for row in (rows[pk] for pk in conversation_ids if pk in rows)
    ]


def claims(conversation_ids: list[int]) -> dict[int, tuple[int, str, int]]:
    """Each of these conversations' attempt, status and stored turns, as the database has them now."""
    if not conversation_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, attempt, status, turn_count FROM {CONVERSATION} "
            f"WHERE id IN ({', '.join(['%s'] * len(conversation_ids))})",
            conversation_ids,
        )
        return {row[0]: tuple(row[1:]) for row in cursor.fetchall()}


def durable() -> None:
    """Make the caller's transaction wait until its commit is on disk (PostgreSQL), whatever the session's
    synchronous_commit. A worker's sessions do not wait for their turns to be flushed: it keeps them in memory
    and stores again what a crashed server forgot. What it does not keep (its claim, how a conversation
    ended) must not be forgotten. The flush takes every earlier write with it."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = on")


@contextmanager
def bounded_transaction(seconds: float):
    """A transaction that waits at most `seconds` for a lock, then raises: PostgreSQL's lock_timeout for its
    row locks, and on SQLite the wait for the writer lock (evalsite.sqlite), which another thread's open
    transaction holds."""
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{int(seconds * 1000)}ms'")
            yield
        return
    from evalsite.sqlite.base import writes_wait_at_most

    with writes_wait_at_most(seconds), transaction.atomic():
        yield


def renew_leases(conversation_ids: list[int], worker: str, until: datetime) -> set[int]:
    """Extend the leases of these conversations that this worker still runs; the ids it extended.

    On PostgreSQL a row locked by another transaction is skipped, not waited for. The worker's heartbeat renews
    on a connection of its own while its pump writes the same conversations' turns in one statement, and two
    updates of the same rows, each in the order its plan gives, can deadlock. A renewal that never waits
    cannot be part of a deadlock; what it skipped, the heartbeat renews at its next beat, well within the
    lease."""
    if not conversation_ids:
        return set()
    ids = ", ".join(["%s"] * len(conversation_ids))
    mine = f"id IN ({ids}) AND worker = %s AND status = %s"
    if connection.vendor == "postgresql":
        mine = f"id IN (SELECT id FROM {CONVERSATION} WHERE {mine} FOR UPDATE SKIP LOCKED)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CONVERSATION} SET lease_expires_at = %s WHERE {mine} RETURNING id",
            [_when(until), *conversation_ids, worker, Status.RUNNING],
        )
        return {row[0] for row in cursor.fetchall()}


def active_run_limits(run_id) -> tuple[str, int] | None:
    """An active run's endpoint name and concurrency; None when the run has ended."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT endpoint_name, concurrency FROM {RUN} WHERE id = %s AND status IN {ACTIVE_SQL}",
            [run_id],
        )
        return cursor.fetchone()


LOCK_ENDPOINT = "SELECT pg_advisory_xact_lock(%s)"


def dispatch_next(
    run_id,
    endpoint_name: str,
    concurrency: int,
    cap: int | None,
    now: datetime,
    *,
    lock_key: int | None = None,
) -> list[int]:
    """Mark as sent as many of an active run's waiting conversations (first in suite order) as its
    concurrency and the endpoint's cap allow, counting what is in flight; their ids.

    Dispatches on an endpoint are serialised. On SQLite the caller's transaction does it (every transaction
    takes the write lock first). On PostgreSQL `lock_key` names the endpoint's advisory lock: inside the
    caller's transaction it is taken first; in autocommit this call does it all in one round trip: BEGIN,
    the lock, the update and COMMIT go as one message. Every conversation ending on the endpoint waits for
    that lock, and with a round trip per statement it would stay held while this thread waits for the
    interpreter.
    """
    in_run = f"""(SELECT COUNT(*) FROM {CONVERSATION}
                  WHERE run_id = %s AND dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL})"""
    if cap is None:
        room_on_endpoint, endpoint_params = "%s", [concurrency]  # never the smaller one
    else:
        room_on_endpoint = f"""%s - (SELECT COUNT(*) FROM {CONVERSATION} c JOIN {RUN} r ON r.id = c.run_id
                                     WHERE c.dispatched_at IS NOT NULL AND c.status IN {ACTIVE_SQL}
                                       AND r.endpoint_name = %s AND r.status IN {ACTIVE_SQL})"""
        endpoint_params = [cap, endpoint_name]
    # LIMIT must not go negative: SQLite reads a negative limit as none at all.
    slots = f"""(SELECT CASE WHEN n < 0 THEN 0 ELSE n END
                 FROM (SELECT CASE WHEN a < b THEN a ELSE b END AS n
                       FROM (SELECT %s - {in_run} AS a, {room_on_endpoint} AS b) room) bounded)"""
    update = f"""UPDATE {CONVERSATION} SET dispatched_at = %s
                 WHERE id IN (SELECT id FROM {CONVERSATION}
                              WHERE run_id = %s AND status = %s AND dispatched_at IS NULL
                                AND EXISTS (SELECT 1 FROM {RUN} WHERE id = %s AND status IN {ACTIVE_SQL})
                              ORDER BY "index", iteration
                              LIMIT {slots})
                 RETURNING id"""
    params = [_when(now), run_id, Status.QUEUED, run_id, concurrency, run_id, *endpoint_params]
    with connection.cursor() as cursor:
        if lock_key is None or not connection.get_autocommit():
            if lock_key is not None:
                cursor.execute(LOCK_ENDPOINT, [lock_key])
            cursor.execute(update, params)
            return sorted(row[0] for row in cursor.fetchall())
        # Parameters are bound on the client (Django's psycopg cursor), so several statements can share
        # one execute; the update's snapshot is taken after the lock is granted.
        try:
            cursor.execute(f"BEGIN; {LOCK_ENDPOINT}; {update}; COMMIT", [lock_key, *params])
        except Exception:
            cursor.execute("ROLLBACK")
            raise
        cursor.nextset()  # the lock's result
        cursor.nextset()  # the update's
        return sorted(row[0] for row in cursor.fetchall())


def sent_unclaimed_besides(ids: list[int], sent_before: datetime) -> bool:
    """Whether a conversation other than these was sent before `sent_before` and is not claimed yet: its
    message waits for a worker thread. Read from the small in-flight index (conversation_in_flight)."""
    others = ", ".join(["%s"] * len(ids))
    query = f"""SELECT EXISTS (SELECT 1 FROM {CONVERSATION}
                               WHERE dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL}
                                 AND status = %s AND id NOT IN ({others}) AND dispatched_at < %s
                                 AND run_id IN (SELECT id FROM {RUN} WHERE status IN {ACTIVE_SQL}))"""
    with connection.cursor() as cursor:
        cursor.execute(query, [Status.QUEUED, *ids, _when(sent_before)])
        return bool(cursor.fetchone()[0])


def oldest_sent_unclaimed(limit: int = 1, besides: Iterable[int] = ()) -> list[int]:
    """Up to `limit` conversations sent longest ago and still not claimed, of any run, other than `besides`:
    their messages wait for a thread. Read from the small in-flight index (conversation_in_flight)."""
    besides = list(besides)
    others = f"AND id NOT IN ({', '.join(['%s'] * len(besides))})" if besides else ""
    query = f"""SELECT id FROM {CONVERSATION}
                WHERE dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL} AND status = %s {others}
                  AND run_id IN (SELECT id FROM {RUN} WHERE status IN {ACTIVE_SQL})
                ORDER BY dispatched_at, id LIMIT %s"""
    with connection.cursor() as cursor:
        cursor.execute(query, [Status.QUEUED, *besides, limit])
        return [row[0] for row in cursor.fetchall()]


def stopped_runs(run_ids: Iterable) -> dict:
    """Which of these runs no longer go on, each with why (its stop_reason; "" when it gives none: cancelled,
    ended or deleted), in one query. A run goes on while it is queued or running and nothing stopped it short:
    a run its cost limit stopped (runs.worker.budget) is still running while its conversations stop."""
    run_ids = list(run_ids)
    if not run_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, status IN {ACTIVE_SQL}, stop_reason FROM {RUN} "
            f"WHERE id IN ({', '.join(['%s'] * len(run_ids))})",
            run_ids,
        )
        found = {run_id: (bool(active), reason) for run_id, active, reason in cursor.fetchall()}
    stopped = {}
    for run_id in run_ids:
        active, reason = found.get(run_id, (False, ""))
        if not active or reason:
            stopped[run_id] = reason
    return stopped


def insert_conversations(run_id, rows: Iterable[dict]) -> None:
    """A new run's conversations, by COPY on PostgreSQL and INSERT_BATCH rows to an executemany on SQLite.
    Each row gives index, iteration, eval_id, prompt, style, system and history; every other column takes
    the model's default.

    bulk_create would prepare every default of every row one by one before the first conversation can start;
    the defaults are the same for every row, so they are prepared once. Rows are read from an iterator in
    batches, so a large run's conversations never sit in memory at once.
    """
    fields = [field for field in Conversation._meta.concrete_fields if not field.primary_key]
    given = {"index", "iteration", "eval_id", "prompt", "style", "system", "history"}
    values = {
        field.name: field.get_db_prep_save(field.get_default(), connection)
        for field in fields
        if field.name not in given
    }
    values["run"] = run_key(run_id)
    history = Conversation._meta.get_field("history")
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    statement = f"INSERT INTO {CONVERSATION} ({columns}) VALUES ({placeholders})"
    # Encoding a history as JSON is much of a launch's work; an eval's iterations share theirs, so it is
    # encoded once per eval (once in all for the empty one most evals have).
    empty = history.get_db_prep_save([], connection)
    last, encoded = None, empty

    def prepared(row: dict) -> list:
        nonlocal last, encoded
        if row["history"] is not last:
            last = row["history"]
            encoded = history.get_db_prep_save(last, connection) if last else empty
        values.update(row, history=encoded)
        return [values[field.name] for field in fields]

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # psycopg's COPY streams the rows as they come, many times faster than executemany.
            with cursor.cursor.copy(f"COPY {CONVERSATION} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(prepared(row))
            return
        rows = iter(rows)
        while batch := list(itertools.islice(rows, INSERT_BATCH)):
            cursor.executemany(statement, [prepared(row) for row in batch])


# Values the database driver takes as they are: no field needs to prepare them.
_PLAIN = frozenset({str, int, float, bool, type(None)})


def update_owned_many(rows: list[tuple[int, int, dict]]) -> None:
    """update_owned for many conversations, each (conversation id, attempt, values), all with the same fields,
    in one executemany: a round's ended conversations. A conversation no longer owned is left as it is."""
    if not rows:
        return
    names = list(rows[0][2])
    fields = [Conversation._meta.get_field(name) for name in names]
    assignments = ", ".join(f"{field.column} = %s" for field in fields)
    params = [
        [
            *(
                value if type(value) in _PLAIN else field.get_db_prep_save(value, connection)
                for field, value in zip(fields, (values[name] for name in names), strict=True)
            ),
            conversation_id,
            attempt,
            Status.RUNNING,
        ]
        for conversation_id, attempt, values in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {CONVERSATION} SET {assignments} WHERE id = %s AND attempt = %s AND status = %s", params
        )


def update_owned(conversation_id: int, attempt: int, **values) -> bool:
    """Update a conversation this worker still owns (running, this attempt); False when it does not."""
    fields = [Conversation._meta.get_field(name) for name in values]
    assignments = ", ".join(f"{field.column} = %s" for field in fields)
    params = [field.get_db_prep_save(values[field.name], connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CONVERSATION} SET {assignments} WHERE id = %s AND attempt = %s AND status = %s",
            [*params, conversation_id, attempt, Status.RUNNING],
        )
        return cursor.rowcount == 1


def has_unfinished(run_id) -> bool:
    """Whether any conversation of the run is still queued or running."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {CONVERSATION} WHERE run_id = %s AND status IN {ACTIVE_SQL} LIMIT 1", [run_id]
        )
        return cursor.fetchone() is not None


def runs_waiting_on(endpoint_name: str, exclude=None) -> list:
    """Active runs on the endpoint with conversations not yet sent, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT r.id FROM {RUN} r
                WHERE r.status IN {ACTIVE_SQL} AND r.endpoint_name = %s
                  AND EXISTS (SELECT 1 FROM {CONVERSATION} c
                              WHERE c.run_id = r.id AND c.status = %s AND c.dispatched_at IS NULL)
                ORDER BY r.created_at""",
            [endpoint_name, Status.QUEUED],
        )
        waiting = [row[0] for row in cursor.fetchall()]
    excluded = run_key(exclude) if exclude is not None else None
    return [run_id for run_id in waiting if run_id != excluded]
