"""Scheduling conversations: which ones are sent to the workers and when, when a run is over, and recovery
of what dead or stopped workers left behind.

Dispatch keeps at most `run.concurrency` conversations of a run in flight, and at most the endpoint's cap
across all runs. It is called when a run is launched and whenever a conversation ends, and it sends tasks
only after the transaction that marked them dispatched commits; when a conversation ends on a worker
thread, one of those it marks goes to that thread instead of the broker (runs.execution.execute). A run is
finalised when its last conversation ends; the sweeper (every worker runs one) requeues conversations whose
worker died and resends tasks whose message was lost. Playing a conversation is runs.execution's.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from engine.clients import MOCK
from engine.results import gated_status

from . import selectors, sql
from .endpoints import build_registry
from .models import ACTIVE, Conversation, Run, Status, Worker

log = logging.getLogger(__name__)


def _endpoint_cap(endpoint_name: str) -> int | None:
    """Conversations allowed in flight on this endpoint across runs; None for the mock (no limit)."""
    if endpoint_name == MOCK:
        return None
    endpoint = build_registry().endpoint(endpoint_name)
    return endpoint.max_concurrency if endpoint else 1


_run_limits: dict[object, tuple[str, int]] = {}


@dataclass
class Keep:
    """The conversations a worker keeps for itself out of what its dispatches mark sent: up to `room`, the
    slots its ended conversations freed (see dispatch)."""

    room: int = 1
    ids: list[int] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return len(self.ids) >= self.room

    def take(self, ids: list[int]) -> None:
        """Keep what room is left for, in order."""
        self.ids += ids[: max(0, self.room - len(self.ids))]


def dispatch(run_id, *, keep: Keep | None = None) -> int:
    """Send tasks for as many queued conversations as the run's and the endpoint's limits allow.

    Dispatches on one endpoint are serialised, so two of them cannot both count a free slot: on
    PostgreSQL by the endpoint's advisory lock, on SQLite by the write lock every transaction takes first
    (BEGIN IMMEDIATE, see settings).

    With `keep`, the first conversations marked sent (as many as it has room for) are not published but kept
    in it, once the marking has committed, and the others are left to the other workers' pumps (_kept): a
    worker whose conversations just ended plays them at once, instead of leaving its slots idle while the
    messages wait for whichever worker frees a prefetch slot next. They are marked sent like the others, so
    the caps count them, and if the worker dies before claiming them, they are recovered as any
    sent-but-unclaimed conversation is (WorkerWatch.take_over resends, sweep after two leases). Nothing is kept while another sent conversation waits unclaimed: workers are short of slots
    then, and its message, first in the broker's queue, must not wait behind a chain of kept ones (another
    run's, say); all are published, in order, and the worker takes the oldest waiting instead.
    """
    from .tasks import run_conversation

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
        if keep is not None and (keep.full or (ids and _one_waits(ids))):
            keep = None
        for pk in _kept(ids, keep):  # committed already
            run_conversation.delay(pk)
        return len(ids)
    if connection.in_atomic_block:
        keep = None  # the caller's transaction may still roll the marking back: nothing to play yet
    with transaction.atomic():
        ids = sql.dispatch_next(run_id, endpoint_name, concurrency, cap, timezone.now(), lock_key=lock_key)
        if keep is not None and (keep.full or (ids and _one_waits(ids))):
            keep = None
        if ids:
            published = _kept(ids, keep)
            transaction.on_commit(lambda: [run_conversation.delay(pk) for pk in published])
    return len(ids)


# How long a sent conversation may go unclaimed before it counts as waiting for a thread (see _one_waits).
IN_TRANSIT = timedelta(seconds=1)


def _one_waits(ids: list) -> bool:
    """Whether another sent conversation waits for a thread, so nothing is kept: one whose message has not
    been claimed for IN_TRANSIT. A message sent a moment ago is on its way to a thread, not waiting: counted,
    it stopped every hand-over for good once conversations ended faster than messages travel (at concurrency
    100 nearly every dispatch went through the broker, each publish keeping the next from being kept). A
    second, not less: on a busy machine (PostgreSQL, Redis and the workers on two cores) a delivery often
    takes longer than 250 ms, and at 250 ms most conversations still went through the broker (2026-11-25,
    3,000 x 3 at concurrency 100 on PostgreSQL + Redis: 3.3-3.6 x ideal at 250 ms, 2.8 at 1 s). A message
    that does wait is taken within the second by the next thread whose conversation ends."""
    return sql.sent_unclaimed_besides(ids, timezone.now() - IN_TRANSIT)


def _kept(ids: list, keep: Keep | None) -> list:
    """The ids to publish: all of them, unless the caller keeps some, and then none. What a worker's dispatch
    marks beyond its own freed slots is for slots other workers freed at the same moment, and their pumps take
    sent-unclaimed conversations from the database as their own ends free slots, or within Pump.POLL_SECONDS
    when idle; a message would only be dropped or find the conversation claimed (at concurrency 100,
    publishing and consuming those messages was ~6 % of the workers' CPU)."""
    if keep is None:
        return ids
    keep.take(ids)
    return []


def dispatch_endpoint(endpoint_name: str, exclude=None, *, keep: Keep | None = None) -> None:
    """A slot on an endpoint freed up and its own run had no use for it: waiting runs (oldest first) take it."""
    if _endpoint_cap(endpoint_name) is None:
        return  # no shared cap, so no run can be waiting on another's slot
    for run_id in sql.runs_waiting_on(endpoint_name, exclude):
        if dispatch(run_id, keep=keep) == 0:
            break


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
    final = final_status(run, counts)
    now = timezone.now()
    try:
        with transaction.atomic():  # a savepoint: a failed read leaves a caller's transaction usable
            summary = kept_summary(run, final)
    except Exception:  # a page's shortcut must not keep a run from ending: the page counts it itself
        log.exception("run %s: no summary kept", run_id)
        summary = {}
    updated = Run.objects.filter(pk=run_id, status__in=ACTIVE).update(
        status=final, finished_at=now, started_at=run.started_at or now, summary=summary
    )
    return bool(updated)


def kept_summary(run: Run, status: str) -> dict:
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
    if counts[Status.CANCELLED] and not counts[Status.FAILED] and not counts[Status.ERROR]:
        return Status.CANCELLED
    conversations = list(
        Conversation.objects.filter(run=run).only(
            "index", "iteration", "status", "score", "turn_count", "termination", "kind", "run_id"
        )
    )
    return gated_status(
        conversations,
        selectors.gate_results(run, conversations),
        selectors.iterated_for(run, conversations),
    )


def conversation_ended(run_id, endpoint_name: str, *, keep: Keep | None = None) -> None:
    """Conversations of a run reached their end: their slots go to the next conversations of the same run; if
    the run has none left waiting, the run may be over, and the slots go to other runs on the endpoint.

    With `keep`, the conversations marked sent that it has room for are kept in it instead of published, for
    the calling worker to play now: see dispatch.
    """
    if dispatch(run_id, keep=keep) == 0:
        finalize(run_id)
        dispatch_endpoint(endpoint_name, exclude=run_id, keep=keep)


# --- Recovery -----------------------------------------------------------------------------------------------


def _requeue(conversations) -> int:
    """Send these running conversations back to the queue for another worker to resume. Each update repeats
    the selection and the attempt read, so a conversation that moved on meanwhile is left alone."""
    conversations = conversations.filter(status=Status.RUNNING, run__status__in=ACTIVE)
    requeued = 0
    for pk, attempt in conversations.values_list("pk", "attempt"):
        requeued += conversations.filter(pk=pk, attempt=attempt).update(
            status=Status.QUEUED, dispatched_at=None, lease_expires_at=None, worker=""
        )
    return requeued


def resend(conversation_ids=None, *, sent_before=None) -> int:
    """Send again conversations that were sent but never claimed (their message may be lost: taken by a worker
    that died or stopped, or never published while the broker was down). A duplicate message is harmless: the
    claim is conditional, so the later delivery finds the conversation taken and does nothing."""
    waiting = Conversation.objects.filter(
        status=Status.QUEUED, dispatched_at__isnull=False, run__status__in=ACTIVE
    )
    if conversation_ids is not None:
        waiting = waiting.filter(pk__in=conversation_ids)
    if sent_before is not None:
        waiting = waiting.filter(dispatched_at__lt=sent_before)
    run_ids = set(waiting.values_list("run_id", flat=True))
    resent = waiting.update(dispatched_at=None)
    for run_id in run_ids:
        dispatch(run_id)
    return resent


class WorkerWatch:
    """Tells which other workers have died: a worker whose beat has not changed for
    EVALSITE_WORKER_DEAD_SECONDS, timed by this process's own monotonic clock (so the hosts' clocks need not
    agree), or whose row is gone while it still holds conversations. Kept by each worker's sweeper thread;
    `me` is this worker's own name (runs.execution.heartbeat.name)."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.seen: dict[str, tuple[object, float]] = {}  # name -> (beat_at, when it was first seen so)

    def forget(self) -> None:
        """Time every worker's beat afresh from the next look: this watcher could not see them for a while
        (the database was away), and what it could not see it must not count as silence."""
        self.seen.clear()

    def dead(self) -> list[tuple[str, object]]:
        now = time.monotonic()
        beats = dict(Worker.objects.exclude(name=self.me).values_list("name", "beat_at"))
        for name in set(self.seen) - set(beats):
            del self.seen[name]
        dead = []
        for name, beat_at in beats.items():
            last = self.seen.get(name)
            if last is None or last[0] != beat_at:
                self.seen[name] = (beat_at, now)
            elif now - last[1] >= settings.EVALSITE_WORKER_DEAD_SECONDS:
                dead.append((name, beat_at))
        return dead

    def take_over(self) -> dict[str, int]:
        """Requeue what dead workers were playing and resend what they may have swallowed; dispatch."""
        stats = {"dead": 0, "requeued": 0, "resent": 0}
        for name, beat_at in self.dead():
            stats["requeued"] += _requeue(Conversation.objects.filter(status=Status.RUNNING, worker=name))
            # Only if it did not beat meanwhile: a frozen worker that came back keeps its row.
            stats["dead"] += Worker.objects.filter(name=name, beat_at=beat_at).delete()[0]
            self.seen.pop(name, None)
        # Conversations held by a worker that left no row (it stopped, or was declared dead by another
        # sweeper): taken over at once, not after their lease.
        live = Worker.objects.values("name")
        stats["requeued"] += _requeue(
            Conversation.objects.filter(status=Status.RUNNING).exclude(worker="").exclude(worker__in=live)
        )
        if stats["dead"]:
            # Messages a dead worker had taken off the queue but not yet claimed are gone with it.
            stats["resent"] = resend(sent_before=timezone.now())
        if stats["requeued"]:
            for run_id in Run.objects.filter(status__in=ACTIVE).values_list("pk", flat=True):
                dispatch(run_id)
        return stats


def sweep() -> dict[str, int]:
    """Recover what crashed workers left behind. Safe to run anywhere, any number of times at once."""
    now = timezone.now()
    stats = {"requeued": 0, "resent": 0, "finalized": 0}
    # Lapsed leases: the worker playing these died (and nobody saw it die). Queue them again; the next claim
    # resumes them.
    stats["requeued"] = _requeue(Conversation.objects.filter(status=Status.RUNNING, lease_expires_at__lt=now))
    # Sent but never started for a long while (two leases): the message may have died with a worker that
    # prefetched it.
    stats["resent"] = resend(sent_before=now - timedelta(seconds=2 * settings.EVALSITE_LEASE_SECONDS))
    for run_id in Run.objects.filter(status__in=ACTIVE).values_list("pk", flat=True):
        if finalize(run_id):
            stats["finalized"] += 1
        else:
            dispatch(run_id)
    return stats
