"""Which conversations are sent to the workers and when, and when a run is over.

Dispatch keeps at most `run.concurrency` conversations of a run in flight, and at most the endpoint's cap
across all runs. It is called when a run is launched and whenever a conversation ends, and it sends tasks
only after the transaction that marked them dispatched commits; when conversations end on a worker, the
conversations its dispatch marks fill the slots they freed instead of going through the broker (FreedSlots).
A run is finalised when its last conversation ends; one stopped short (a user's cancel, a refused setting, its
cost limit) has its queued conversations cancelled first (cancel_queued), so none is sent. Sending goes through
the callable the Celery tasks register (`publish_with`), so this module needs none of the runtime that plays
the conversations.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from engine.clients import MOCK
from engine.outcomes import NOT_STARTED
from engine.results import gated_status
from runs import selectors
from runs.concurrency import endpoint_cap
from runs.endpoints import build_registry
from runs.models import ACTIVE, Conversation, Run, Status

from . import sql

log = logging.getLogger(__name__)


def _endpoint_cap(endpoint_name: str) -> int | None:
    """Conversations allowed in flight on this endpoint across runs; None for the mock (no limit)."""
    if endpoint_name == MOCK:
        return None
    return endpoint_cap(build_registry(), endpoint_name)


_run_limits: dict[object, tuple[str, int]] = {}

_publish: Callable[[int], object] | None = None


def publish_with(send: Callable[[int], object]) -> None:
    """How a conversation marked sent is sent to the workers: the Celery task's, registered by
    runs.worker.tasks when it is imported."""
    global _publish
    _publish = send


def _send(conversation_ids: list[int]) -> None:
    assert _publish is not None, "runs.worker.tasks registers how conversations are sent"
    for pk in conversation_ids:
        _publish(pk)


@dataclass
class FreedSlots:
    """The slots a worker's ended conversations freed (`room`), and the conversations its dispatches marked
    sent that fill them (`ids`), played by that worker at once instead of being published."""

    room: int = 1
    ids: list[int] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return len(self.ids) >= self.room

    def take(self, ids: list[int]) -> None:
        """Fill what room is left, in order."""
        self.ids += ids[: max(0, self.room - len(self.ids))]


def dispatch(run_id, *, freed: FreedSlots | None = None) -> int:
    """Send tasks for as many queued conversations as the run's and the endpoint's limits allow.

    Dispatches on one endpoint are serialised, so two of them cannot both count a free slot: on PostgreSQL
    by the endpoint's advisory lock, on SQLite by the write lock every transaction takes first (BEGIN
    IMMEDIATE, see settings).

    With `freed`, the first conversations marked sent fill its slots once the marking has committed, and
    the rest are left to the other workers' pumps (_to_publish): a worker whose conversations just ended
    plays the next ones at once instead of leaving its slots idle. They are marked sent like the others, so
    the caps count them, and a worker that dies before claiming them leaves them to recovery like any sent,
    unclaimed conversation. No slot is filled while another sent conversation waits unclaimed: its message,
    first in the broker's queue, must not wait behind them; all are published, in order, and the worker
    takes the oldest waiting instead.
    """
    run_id = sql.run_key(run_id)
    # A run's endpoint and concurrency never change, so they are read before the lock, once per process while
    # the run is active; whether it still is, is decided under the lock, by dispatch_next.
    limits = _run_limits.get(run_id)
    if limits is None:
        limits = sql.active_run_limits(run_id)
        if limits is None:
            return 0
        if len(_run_limits) >= 1000:
            _run_limits.clear()
        _run_limits[run_id] = limits
    endpoint_name, concurrency = limits
    cap = _endpoint_cap(endpoint_name)
    lock_key = zlib.crc32(endpoint_name.encode()) if connection.vendor == "postgresql" else None
    if lock_key is not None and connection.get_autocommit():
        ids = sql.dispatch_next(run_id, endpoint_name, concurrency, cap, timezone.now(), lock_key=lock_key)
        if freed is not None and (freed.full or (ids and _one_waits(ids))):
            freed = None
        _send(_to_publish(ids, freed))  # committed already
        return len(ids)
    if connection.in_atomic_block:
        freed = None  # the caller's transaction may still roll the marking back: nothing to play yet
    with transaction.atomic():
        ids = sql.dispatch_next(run_id, endpoint_name, concurrency, cap, timezone.now(), lock_key=lock_key)
        if freed is not None and (freed.full or (ids and _one_waits(ids))):
            freed = None
        if ids:
            published = _to_publish(ids, freed)
            transaction.on_commit(lambda: _send(published))
    return len(ids)


# How long a sent conversation may go unclaimed before it counts as waiting for a thread (see _one_waits): a
# message sent a moment ago is still on its way to a thread, and on a busy machine a delivery takes a while.
IN_TRANSIT = timedelta(seconds=1)


def _one_waits(ids: list) -> bool:
    """Whether a sent conversation other than these has waited IN_TRANSIT for a thread, so no slot is filled."""
    return sql.sent_unclaimed_besides(ids, timezone.now() - IN_TRANSIT)


def _to_publish(ids: list, freed: FreedSlots | None) -> list:
    """The ids to publish: all of them, unless they fill a worker's freed slots, and then none. What such a
    dispatch marks beyond its own slots is for slots other workers freed at the same moment, and their pumps
    take sent, unclaimed conversations from the database; a message would only be dropped or find the
    conversation claimed."""
    if freed is None:
        return ids
    freed.take(ids)
    return []


def dispatch_endpoint(endpoint_name: str, exclude=None, *, freed: FreedSlots | None = None) -> None:
    """A slot on an endpoint freed up and its own run had no use for it: waiting runs (oldest first) take it."""
    if _endpoint_cap(endpoint_name) is None:
        return  # no shared cap, so no run can be waiting on another's slot
    for run_id in sql.runs_waiting_on(endpoint_name, exclude):
        if dispatch(run_id, freed=freed) == 0:
            break


def cancel_queued(run_id, now, *, reason: str = "") -> int:
    """Cancel the run's conversations that no worker has claimed, so that none will; those playing are left to
    stop on their own. With a `reason`, each says it was not started for it. How many were cancelled."""
    fields = {"status": Status.CANCELLED, "finished_at": now}
    if reason:
        fields["verdict"] = fields["reason"] = f"{NOT_STARTED}: {reason}"
    return Conversation.objects.filter(run_id=run_id, status=Status.QUEUED).update(**fields)


def finalize(run_id) -> bool:
    """If every conversation has ended, give the run its final status. True when this call ended it."""
    if sql.has_unfinished(sql.run_key(run_id)):
        return False  # the common case while a run is going, answered by one cheap query
    run = Run.objects.filter(pk=run_id).first()
    if run is None or not run.is_active:
        return False
    counts = selectors.status_counts(run)
    if counts[Status.QUEUED] or counts[Status.RUNNING]:
        return False
    if run.stop_reason and not counts[Status.CANCELLED]:
        # Its cost limit was reached as its last conversations played their last turns: it cut nothing
        # short, and the run ends as it played.
        run.stop_reason = ""
    final = final_status(run, counts)
    now = timezone.now()
    try:
        with transaction.atomic():  # a savepoint: a failed read leaves a caller's transaction usable
            summary = summary_to_store(run, final)
    except Exception:  # a page's shortcut must not keep a run from ending: the page counts it itself
        log.exception("run %s: no summary kept", run_id)
        summary = {}
    updated = Run.objects.filter(pk=run_id, status__in=ACTIVE).update(
        status=final,
        finished_at=now,
        started_at=run.started_at or now,
        summary=summary,
        stop_reason=run.stop_reason,
    )
    return bool(updated)


def summary_to_store(run: Run, status: str) -> dict:
    """What the run page needs of every conversation of a run that has ended (Run.summary), under the status
    and the revision it holds for: `run` as read before its conversations were, so that a reviewer's
    override meanwhile leaves a summary of an older revision, which is not read."""
    facts = selectors.suite_facts(run)
    by_eval = facts is not None and facts.every_eval_repeated
    if by_eval and facts.evals > SUMMARY_MAX_EVALS:
        return {}  # kept on the row, it would be read with the run everywhere
    progress = selectors.progress(run, by_eval=by_eval)
    return {"status": status, "revision": run.revision, "by_eval": by_eval, "progress": progress}


# A summary holds a line per eval for a suite that repeats every eval: up to this many.
SUMMARY_MAX_EVALS = 500


def final_status(run: Run, counts: dict[str, int] | None = None) -> str:
    """The status a run whose conversations have all ended has: cancelled unless something failed (as
    engine.stats.overall_status); otherwise as the CLI decides: errors and failures of single evals count,
    repeated evals count by their pass rate, and gates, when the suite has them, decide by aggregate numbers."""
    counts = selectors.status_counts(run) if counts is None else counts
    if run.stop_reason:  # stopped at its cost limit (runs.worker.budget): what it cut short has no result
        return Status.CANCELLED
    if counts[Status.CANCELLED] and not counts[Status.FAILED] and not counts[Status.ERROR]:
        return Status.CANCELLED
    # A re-grade's skipped conversations were never played: the ones re-graded decide.
    conversations = list(
        Conversation.objects.filter(run=run)
        .exclude(status=Status.SKIPPED)
        .only("index", "iteration", "status", "score", "turn_count", "termination", "kind", "run_id")
    )
    if not conversations and counts[Status.SKIPPED]:
        return Status.SKIPPED  # nothing was re-graded: neither passed nor failed
    status = gated_status(
        conversations,
        selectors.gate_results(run, conversations),
        selectors.iterated_for(run, conversations),
    )
    if status in (Status.PASSED, Status.FAILED):
        return _calibration_status(run) or status
    return status


def _calibration_status(run: Run) -> str | None:
    """A calibration run passes when its judges agree with the labels as the set's gates ask, as `evalsite
    calibrate` decides; the replies its judge rightly failed are the judge's work, not the run's failure.
    None for a run of an ordinary suite."""
    facts = selectors.suite_facts(run)
    suite = selectors.calibration_suite(run) if facts is not None and facts.calibration else None
    if suite is None:
        return None
    report = selectors.calibration_report(run, suite)
    return Status.PASSED if report.status == Status.PASSED else Status.FAILED


def conversation_ended(run_id, endpoint_name: str, *, freed: FreedSlots | None = None) -> None:
    """Conversations of a run reached their end: their slots go to the next conversations of the same run; if
    the run has none left waiting, the run may be over, and the slots go to other runs on the endpoint.
    `freed`: the calling worker's slots, filled instead of publishing (see dispatch)."""
    if dispatch(run_id, freed=freed) == 0:
        finalize(run_id)
        dispatch_endpoint(endpoint_name, exclude=run_id, freed=freed)
