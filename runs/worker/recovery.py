"""Recovery of what dead or stopped workers left behind: conversations requeued for another worker to resume,
messages sent again, and runs finalised. Every worker's sweeper runs it (runs.worker.tasks); every update is
conditional, so sweeps running at once anywhere are harmless.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runs.models import ACTIVE, Conversation, Run, Status, Worker

from .scheduling import dispatch, finalize


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
    `me` is this worker's own name (claims.heartbeat.name)."""

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
