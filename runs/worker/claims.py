"""A worker's hold on the conversations it plays: the claim, the heartbeat that keeps its leases, and the
hand-back when it stops.

The claim is a conditional update that bumps `attempt`, the fencing token: every later write is conditional on
it, so a worker that lost its claim cannot write. A worker that dies stops beating and the other workers'
sweepers queue its conversations again (runs.worker.recovery); a lapsed lease is the last resort.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from runs import outage
from runs.models import Conversation, Status, Worker

from . import scheduling, sql
from .threads import started

log = logging.getLogger(__name__)


class LostClaim(Exception):
    """Another worker has taken this conversation over; stop without writing anything more."""


def lease() -> timedelta:
    return timedelta(seconds=settings.EVALSITE_LEASE_SECONDS)


def claim(conversation_ids: list[int], *, again: bool = False) -> list[sql.Claimed]:
    """Take these conversations for this worker process, in one statement; those it took. `again`: see
    runs.worker.sql.claim.

    The claim is flushed to disk (sql.durable): a claim the server forgot in a crash would stop its
    conversation once the database is back, and the answer of its call in flight with it."""
    heartbeat.start()
    now = timezone.now()
    with transaction.atomic():
        sql.durable()
        return sql.claim(conversation_ids, now, now + lease(), heartbeat.name, again=again)


BEAT_LOCK_SECONDS = 2.0  # well within a beat: a beat that waits longer gives up and comes again


class Heartbeat:
    """This worker process's beat and the leases of the conversations it plays, kept by one thread.

    The thread does nothing but these two small writes, so a worker busy with its conversations still beats;
    only a process that is dead, frozen or cut off from the database stops.
    """

    def __init__(self) -> None:
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.active: dict[int, int] = {}
        self.handed_back: set[int] = set()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.slots = 0  # conversations this worker plays at once, as its row tells the pages (0: not said)

    def named_for(self, node: str) -> None:
        """Name this worker by its Celery node name, so that a conversation says which host played it; the
        pid and a nonce keep restarts apart."""
        assert self.thread is None, "a worker is named before it beats"
        self.name = f"{node}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def start(self) -> None:
        """Register this worker (before its first claim) and start beating; once per process."""
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return
            if self.stopping.is_set():
                return
            self._beat()
            self.thread = started(self._loop, "evalsite-beat")

    def stop(self) -> None:
        """Stop beating and forget the conversations without handing them back: for a process that played
        conversations in-process (tests) and goes on without the database the thread would use."""
        with self.lock:
            thread, self.thread = self.thread, None
            self.stopping.set()
        if thread is not None:
            thread.join()
        with self.lock:
            self.stopping.clear()
            self.active.clear()
            self.handed_back.clear()

    def add(self, conversation_id: int, attempt: int) -> None:
        with self.lock:
            self.active[conversation_id] = attempt

    def remove(self, conversation_id: int) -> None:
        with self.lock:
            self.active.pop(conversation_id, None)
            self.handed_back.discard(conversation_id)

    def was_handed_back(self, conversation_id: int) -> bool:
        return conversation_id in self.handed_back

    def _beat(self, *, bounded: bool = False) -> None:
        """`bounded`: the thread's beats give up on a row lock after BEAT_LOCK_SECONDS (and try again at the
        next beat) rather than wait on it, so that a transaction holding this worker's row cannot stop the
        beat, nor keep `stop` waiting for it."""
        now = timezone.now()
        with sql.bounded_transaction(BEAT_LOCK_SECONDS) if bounded else transaction.atomic():
            if not Worker.objects.filter(name=self.name).update(beat_at=now):
                # First beat, or the others declared this worker dead while it was frozen: it lives again. Its
                # conversations were taken over, and their fencing tokens keep it from writing to them.
                Worker.objects.get_or_create(name=self.name, defaults={"beat_at": now, "slots": self.slots})

    def _loop(self) -> None:
        renewed = time.monotonic()
        due: set[int] = set()  # leases to renew: all of them every third of a lease, then those skipped
        away = False  # the database did not answer the last beat
        while not self.stopping.wait(settings.EVALSITE_WORKER_BEAT_SECONDS):
            try:
                self._beat(bounded=True)
                if away:
                    # Back from an outage, during which the leases ran on unrenewed: renew them all at once,
                    # before the other workers' sweepers count them lapsed.
                    away = False
                    renewed = 0.0
                if time.monotonic() - renewed >= settings.EVALSITE_LEASE_SECONDS / 3:
                    renewed = time.monotonic()
                    with self.lock:
                        due = set(self.active)
                if due:
                    with self.lock:
                        due &= self.active.keys()  # ended since
                    # A conversation whose row the pump is writing at this moment is renewed at the next beat.
                    due -= sql.renew_leases(list(due), self.name, timezone.now() + lease())
            except (
                Exception
            ) as exc:  # a database hiccup must not kill the heartbeat; the next beat tries again
                if not outage.unavailable(exc):
                    log.exception("worker heartbeat failed")
                elif not away:
                    log.warning("worker heartbeat: the database is unavailable (%s); beating on", exc)
                away = away or outage.unavailable(exc)
                if away:
                    outage.drop_connection()
            finally:
                close_old_connections()

    def hand_back(self) -> int:
        """The worker is stopping: release its conversations so other workers resume them now, after the
        last stored turn, and stop beating. Returns how many were handed back."""
        self.stopping.set()
        with self.lock:
            active = dict(self.active)
            self.handed_back.update(active)
        released, run_ids = 0, set()
        for conversation_id, attempt in active.items():
            if Conversation.objects.filter(pk=conversation_id, attempt=attempt, status=Status.RUNNING).update(
                status=Status.QUEUED, dispatched_at=None, lease_expires_at=None, worker=""
            ):
                released += 1
                run_ids.add(Conversation.objects.values_list("run_id", flat=True).get(pk=conversation_id))
        Worker.objects.filter(name=self.name).delete()
        for run_id in run_ids:
            scheduling.dispatch(run_id)
        return released


heartbeat = Heartbeat()
