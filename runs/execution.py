"""Playing one conversation inside a worker, safely repeatable; what is sent when, and the recovery of what a
dead worker left, is runs.scheduling's.

The task claims the conversation with a conditional update that bumps `attempt`, the fencing token: every
later write is conditional on it, so a worker that lost its claim cannot write. Stored turns are replayed,
not re-asked, and each new turn is inserted once, unique per (conversation, position). A worker that dies
stops beating and the other workers' sweepers queue its conversations again within seconds (a stopping
worker hands them back itself; a lapsed lease is the last resort); the next worker resumes after the last
stored turn. Nothing here retries model calls: engine.clients does, in one place.

The conversation itself plays on the process's event loop (runs.loop): its model calls are awaited there,
with every other conversation the process plays, and each database write comes back to the thread that
claimed it, which sleeps in between. A thread per conversation still holds the claim, the connection and the
Celery task, but no longer the model call: the threads of a process no longer fight over the interpreter
lock for their HTTP clients (figures in the README's Benchmarks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import socket
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from engine.conversation import ResumeMismatch, run_eval_async
from engine.redact import redact
from engine.results import EvalResult, TurnRecord
from engine.retries import RetryWait
from engine.runner import build_context

from . import scheduling, specs, sql
from .endpoints import build_registry
from .loop import Owner
from .models import Conversation, Status, Turn, Worker

log = logging.getLogger(__name__)


class LostClaim(Exception):
    """Another worker has taken this conversation over; stop without writing anything more."""


def _lease() -> timedelta:
    return timedelta(seconds=settings.EVALSITE_LEASE_SECONDS)


def claim(conversation_id: int) -> sql.Claimed | None:
    """Take the conversation; None if it is not ours to run.

    The update bumps `attempt`; the claim carries the attempt we now own, the fencing token for every later
    write. It names this worker process, whose beat the other workers watch.
    """
    heartbeat.start()
    now = timezone.now()
    return sql.claim(conversation_id, now, now + _lease(), heartbeat.name)


class _Heartbeat:
    """This worker process's beat and the leases of the conversations it plays, kept by one thread.

    The thread does nothing but these two small writes, so a worker busy with its conversations (slow model
    calls, a GIL-heavy moment) still beats; only a process that is dead, frozen or cut off from the database
    stops. The leases stay as the last resort for a conversation whose worker left no row to watch.
    """

    def __init__(self) -> None:
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.active: dict[int, int] = {}
        self.handed_back: set[int] = set()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def named_for(self, node: str) -> None:
        """Name this worker by its Celery node name (`--hostname evalsite1@host-a`), before its first claim, so
        that a conversation says which host played it; the pid and a nonce keep restarts apart."""
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
            self.thread = threading.Thread(target=self._loop, name="evalsite-heartbeat", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        """Stop beating and forget the conversations, without handing them back: for a process that played
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

    def _beat(self) -> None:
        now = timezone.now()
        if not Worker.objects.filter(name=self.name).update(beat_at=now):
            # First beat, or the others declared this worker dead while it was frozen: it lives again. Its
            # conversations were taken over, and their fencing tokens keep it from writing to them.
            Worker.objects.get_or_create(name=self.name, defaults={"beat_at": now})

    def _loop(self) -> None:
        renewed = time.monotonic()
        while not self.stopping.wait(settings.EVALSITE_WORKER_BEAT_SECONDS):
            try:
                self._beat()
                if time.monotonic() - renewed >= settings.EVALSITE_LEASE_SECONDS / 3:
                    renewed = time.monotonic()
                    with self.lock:
                        active = list(self.active)
                    if active:
                        Conversation.objects.filter(
                            pk__in=active, worker=self.name, status=Status.RUNNING
                        ).update(lease_expires_at=timezone.now() + _lease())
            except Exception:  # a database hiccup must not kill the heartbeat; the next beat tries again
                log.exception("worker heartbeat failed")
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


heartbeat = _Heartbeat()


def _turn_row(conversation_id: int, attempt: int, turn: TurnRecord) -> dict:
    """What runs.sql.store_turn writes of a turn."""
    return {
        "conversation_id": conversation_id,
        "attempt": attempt,
        "position": turn.turn,
        "record": turn.model_dump(mode="json"),
        "passed": turn.passed,
        "prompt_tokens": turn.usage.prompt_tokens,
        "completion_tokens": turn.usage.completion_tokens,
        "judge_tokens": turn.judge_usage.total_tokens,
        "user_tokens": turn.user_usage.total_tokens,
        "cost": turn.cost + turn.judge_cost + turn.user_cost,
        "tokens_estimated": turn.usage.estimated,
    }


def _store_turn(conversation_id: int, attempt: int, turn: TurnRecord) -> None:
    now = timezone.now()
    try:
        with transaction.atomic():
            stored = sql.store_turn(
                now=now, lease_until=now + _lease(), **_turn_row(conversation_id, attempt, turn)
            )
    except IntegrityError:
        raise LostClaim() from None
    if not stored:
        raise LostClaim()  # a worker that lost its claim writes nothing
    sql.release_connection()  # the next turn's model call follows


class TurnWriter:
    """The turns of every conversation a worker process plays, written by one thread, many to a transaction.

    Each conversation still waits for its turn to be stored before it asks the next (a turn is durable
    before anything follows from it), but the turns that arrive while a transaction is being written go
    into the next one together: one commit, and on SQLite one turn of the write lock, for all of them,
    instead of one per turn, each taken by a thread of its own. At concurrency 100 the per-turn commits of
    100 threads queued on SQLite's write lock for ~70-90 ms a turn (bench/throughput.py --explain).

    Only a worker uses it (runs.tasks turns it on): its thread has a connection of its own, which would not
    see what a caller's open transaction wrote (a test playing a conversation in its transaction).
    """

    BATCH = 200  # turns at most in one transaction: a long one would hold SQLite's write lock as long

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def store(self, conversation_id: int, attempt: int, turn: TurnRecord) -> concurrent.futures.Future:
        """The turn's write, queued; the future is True once it is committed, False when the conversation
        is no longer ours (nothing written), or raises what the database raised."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="evalsite-turns", daemon=True)
                self._thread.start()
        self._queue.put((conversation_id, attempt, turn, future))
        return future

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch)
            finally:
                close_old_connections()  # as between tasks: a broken connection is replaced

    @staticmethod
    def _write(batch: list) -> None:
        now = timezone.now()
        rows = [_turn_row(cid, attempt, turn) for cid, attempt, turn, _ in batch]
        try:
            with transaction.atomic():
                stored = sql.store_turns(rows, now=now, lease_until=now + _lease())
        except IntegrityError:
            # A turn already stored at its position (a conversation taken over and replayed meanwhile):
            # that one alone fails; the others are written one transaction each, as the owner thread would.
            stored = []
            for cid, attempt, turn, _ in batch:
                try:
                    _store_turn(cid, attempt, turn)
                    stored.append(True)
                except LostClaim:
                    stored.append(False)
                except Exception as exc:  # noqa: BLE001 - handed to the conversation, which records it
                    stored.append(exc)
        except Exception as exc:  # noqa: BLE001 - the database is down: every conversation of the batch hears it
            stored = [exc] * len(batch)
        for (*_, future), outcome in zip(batch, stored, strict=True):
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


turn_writer: TurnWriter | None = None  # set in a worker process (runs.tasks); None: the owner thread writes


def _note_wait(conversation_id: int, attempt: int, wait: RetryWait) -> None:
    """A model call is waiting to retry: say so on the run page until the next turn is stored.

    The heartbeat keeps renewing the lease meanwhile: the conversation stays in its active set however
    long the call waits.
    """
    until = timezone.now() + timedelta(seconds=wait.seconds)
    try:
        owned = sql.update_owned(
            conversation_id, attempt, waiting_until=until, waiting_reason=wait.reason[:100]
        )
    except DatabaseError:  # only the note is lost; the call goes on waiting
        log.warning("could not note the wait of conversation %s", conversation_id)
        return
    finally:
        sql.release_connection()  # the wait and the retried call follow
    if not owned:
        raise LostClaim()  # another worker has it: stop waiting


def _finish(conversation_id: int, attempt: int, result: EvalResult) -> bool:
    return sql.update_owned(
        conversation_id,
        attempt,
        status=result.status,
        kind=result.kind,
        style=result.conversation,
        turns_passed=result.turns_passed,
        termination=(result.termination or "")[:300],
        termination_kind=result.termination_kind or "",
        termination_detail=(result.termination_detail or "")[:300],
        turns_total=result.turns_total,
        passed_on_turn=result.passed_on_turn,
        score=result.score,
        graders=[item.model_dump(mode="json") for item in result.graders],
        # Named graders that grade the conversation once judge after its last stored turn: their spend is in
        # the result's totals only.
        judge_tokens=result.totals.judge_tokens,
        cost=result.totals.cost,
        verdict=result.verdict[:300],
        reason=result.reason[:300],
        error=result.error or "",
        finished_at=timezone.now(),
        lease_expires_at=None,
        waiting_until=None,
        waiting_reason="",
    )


def _fail(conversation_id: int, attempt: int, message: str) -> bool:
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
    )


def execute(conversation_id: int) -> str:
    """Play one conversation to its end (or resume it), then the ones its end hands over to this thread.
    Returns what happened to the first, for logs and tests.

    When a conversation ends, the dispatch it triggers keeps one of the conversations it marks sent for this
    thread, which claims and plays it at once, as a delivered task would: the thread just freed is the one
    sure to be idle, while a published message goes to whichever worker frees a prefetch slot next, often
    one whose threads are all busy. The rest are published. When it keeps none (another thread's dispatch
    took the slot, or messages were already waiting), the thread takes the conversation whose message has
    waited longest: the claim is conditional, so that message, delivered later, finds it taken and does
    nothing.
    """
    after: list[int] = []
    try:
        outcome = _play(conversation_id, after)
        while True:
            # As between two delivered tasks (runs.tasks.check_connections); never inside a caller's
            # transaction, which closing the connection would break (execute called in a test's atomic block).
            if not connection.in_atomic_block:
                close_old_connections()
            taken = False
            if not after and not heartbeat.stopping.is_set():
                waiting = sql.oldest_sent_unclaimed()
                if waiting is not None:
                    after.append(waiting)
                    taken = True
            if not after:
                break
            if _play(after.pop(), after) == "skipped" and taken:
                break  # someone else claimed it, or it cannot be (its run ended): leave the rest to messages
    finally:
        if after:  # an error between the dispatch and the claim: publish what this thread was to play
            scheduling.resend(after)
    return outcome


def _replay(claimed) -> list[TurnRecord]:
    """The stored turns a re-grade replays: the source run's conversation of the same eval and iteration.
    One that is missing (a new eval) or that ended in error has nothing to re-grade: the engine says it
    diverged at its first turn past them."""
    source = (
        Conversation.objects.filter(
            run_id=claimed.regraded_from, eval_id=claimed.eval_id, iteration=claimed.iteration
        )
        .only("pk", "status")
        .first()
    )
    if source is None:
        return []
    turns = Turn.objects.filter(conversation_id=source.pk).order_by("position")
    return [TurnRecord.model_validate(turn.record) for turn in turns]


def _play(conversation_id: int, after: list[int]) -> str:
    """Claim and play one conversation; when it ends, the one dispatch hands over goes to `after`."""
    if heartbeat.stopping.is_set():
        # Delivered while this worker stops: leave it to the others, and send it again, since this message
        # is about to be taken off the queue unplayed.
        scheduling.resend([conversation_id])
        return "skipped"
    claimed = claim(conversation_id)
    if claimed is None:
        return "skipped"
    attempt = claimed.attempt
    heartbeat.add(conversation_id, attempt)
    try:
        try:
            spec = specs.suite(claimed.version)
            ctx, _ = build_context(spec, build_registry(), claimed.model, asynchronous=True)
            ev = spec.evals[claimed.index]
            # Only a resumed conversation (a later attempt) can have turns stored already.
            stored = (
                Turn.objects.filter(conversation_id=conversation_id).order_by("position")
                if attempt > 1
                else []
            )
            prior = [TurnRecord.model_validate(turn.record) for turn in stored]
            replay = _replay(claimed) if claimed.regraded_from is not None else None
        except Exception as exc:
            log.exception("conversation %s could not start", conversation_id)
            _fail(conversation_id, attempt, f"could not start: {exc}")
            return "error"

        sql.release_connection()  # before the first model call
        owner = Owner()
        checked = {"at": time.monotonic()}  # the claim just saw the run active
        lost = threading.Event()  # a note of a wait found the claim taken

        def still_ours() -> bool:
            return not (lost.is_set() or heartbeat.was_handed_back(conversation_id))

        def run_stopped() -> bool:  # in this thread
            stop = not sql.run_is_active(claimed.run_id)
            sql.release_connection()
            return stop

        async def should_stop() -> bool:
            # The run is looked up at most twice a second: a cancel takes effect within 0.5 s plus the turn
            # in flight.
            if not still_ours():
                return True
            now = time.monotonic()
            if now - checked["at"] < 0.5:
                return False
            checked["at"] = now
            return await owner.call(run_stopped)

        writer = turn_writer

        async def on_turn(turn: TurnRecord) -> None:
            if writer is None:
                await owner.call(_store_turn, conversation_id, attempt, turn)
            elif not await asyncio.wrap_future(writer.store(conversation_id, attempt, turn)):
                raise LostClaim()

        def note_wait(wait: RetryWait) -> None:  # in this thread
            try:
                _note_wait(conversation_id, attempt, wait)
            except LostClaim:
                lost.set()  # the wait stops at its next slice

        try:
            result = owner.play(
                run_eval_async(
                    ev,
                    claimed.index,
                    claimed.eval_id,
                    ctx,
                    prior=prior,
                    on_turn=on_turn,
                    should_stop=should_stop,
                    on_wait=lambda wait: owner.post(note_wait, wait),
                    given=(claimed.system, claimed.history),  # as launch built them: never built again
                    replay=replay,
                )
            )
            if lost.is_set():
                raise LostClaim()
        except LostClaim:
            log.warning("conversation %s was taken over by another worker; stopping", conversation_id)
            return "lost"
        except ResumeMismatch as exc:
            _fail(conversation_id, attempt, f"cannot resume: {exc}")
            return "error"
        except Exception as exc:  # a bug must not leave the run hanging: record it on this conversation
            log.exception("conversation %s crashed", conversation_id)
            _fail(conversation_id, attempt, f"internal error: {type(exc).__name__}: {exc}")
            return "error"
        if heartbeat.was_handed_back(conversation_id):
            return "handed back"  # another worker resumes it; its claim fences this one out anyway
        _finish(conversation_id, attempt, result)
        return result.status
    finally:
        heartbeat.remove(conversation_id)
        # A stopping worker keeps nothing: what it dispatches is published for the others.
        keep = None if heartbeat.stopping.is_set() else after
        scheduling.conversation_ended(claimed.run_id, claimed.endpoint_name, keep=keep)
