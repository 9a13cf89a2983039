"""Playing one conversation inside a worker, safely repeatable; what is sent when, and the recovery of what a
dead worker left, is runs.scheduling's.

The task claims the conversation with a conditional update that bumps `attempt`, the fencing token: every
later write is conditional on it, so a worker that lost its claim cannot write. Stored turns are replayed,
not re-asked, and each new turn is inserted once, unique per (conversation, position). A worker that dies
stops beating and the other workers' sweepers queue its conversations again within seconds (a stopping
worker hands them back itself; a lapsed lease is the last resort); the next worker resumes after the last
stored turn. Nothing here retries model calls: engine.clients does, in one place.

A worker process plays its conversations with one Pump: each conversation's loop is a coroutine on the
process's event loop (runs.loop), where its model calls are awaited with every other conversation's, and the
database work of all of them (claims, turns, ends and the dispatches that follow) is done by one thread, in
batches: one statement or one transaction for whatever arrived together, not one per conversation. A
conversation's message only offers it to the pump (`deliver`); the conversations its end frees slots for are
kept by the pump and claimed at once, with no message (figures in the README's Benchmarks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from engine.calls import Calls, Latencies, slow_since, watching
from engine.codegrade.run import CodeRunner
from engine.conversation import ResumeMismatch, run_eval_async
from engine.redact import redact
from engine.results import EvalResult, TurnRecord
from engine.retries import RetryWait
from engine.runner import build_context
from suites.models import SuiteFile

from . import outage, scheduling, specs, sql
from .endpoints import build_registry
from .loop import event_loop
from .models import Conversation, Status, Turn, Worker

log = logging.getLogger(__name__)


class LostClaim(Exception):
    """Another worker has taken this conversation over; stop without writing anything more."""


def _lease() -> timedelta:
    return timedelta(seconds=settings.EVALSITE_LEASE_SECONDS)


def claim(conversation_ids: list[int], *, again: bool = False) -> list[sql.Claimed]:
    """Take these conversations for this worker process, in one statement; those it took (the others are not
    ours to run). Each claim bumps `attempt`, the fencing token for every later write, and names this worker,
    whose beat the other workers watch. `again`: see runs.sql.claim.

    The claim is flushed to disk, as an end is (runs.sql.durable): a claim the server forgot in a crash would
    stop its conversation once the database is back, and the answer of its call in flight with it."""
    heartbeat.start()
    now = timezone.now()
    with transaction.atomic():
        sql.durable()
        return sql.claim(conversation_ids, now, now + _lease(), heartbeat.name, again=again)


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
        due: set[int] = set()  # leases to renew: all of them every third of a lease, then those skipped
        away = False  # the database did not answer the last beat
        while not self.stopping.wait(settings.EVALSITE_WORKER_BEAT_SECONDS):
            try:
                self._beat()
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
                    due -= sql.renew_leases(list(due), self.name, timezone.now() + _lease())
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
    if not _store_row(_turn_row(conversation_id, attempt, turn), timezone.now()):
        raise LostClaim()  # a worker that lost its claim writes nothing
    sql.release_connection()  # the next turn's model call follows


def _store_row(row: dict, now) -> bool:
    """One turn in a transaction of its own: whether it is stored (False: the conversation is not ours)."""
    try:
        with transaction.atomic():
            return sql.store_turn(now=now, **row)
    except IntegrityError:
        # Its position is taken: by this very write, committed as the connection dropped, if the claim is
        # still ours and the turn the same; else by the worker that took the conversation over.
        return sql.turn_is_ours(row["conversation_id"], row["attempt"], row["position"], row["record"])


def write_turns(batch: list, *, stop: threading.Event | None = None, on_back: Callable | None = None) -> None:
    """Store many turns, each (conversation_id, attempt, turn, future), in one transaction; each future is
    True once its turn is committed, False when its conversation is no longer ours (nothing written for it),
    or raises what the database raised. Never raises itself.

    A conversation's turns are stored in order, each after the one before is committed (the pump's on_turn),
    and the turns that arrive together go into one commit, and on SQLite one turn of the write lock, instead
    of one each. At concurrency 100 the per-turn commits of 100 threads queued on SQLite's write lock for
    ~70-90 ms a turn (bench/throughput.py --explain).

    A database that is away is waited for (runs.outage.patiently, with `stop` and `on_back`), and the
    batch written again: a turn its first try did store is found stored, not stored twice."""
    now = timezone.now()
    rows = [_turn_row(cid, attempt, turn) for cid, attempt, turn, _ in batch]
    try:
        stored = outage.patiently(
            lambda: _store_rows(rows, now), what=f"storing {len(rows)} turn(s)", stop=stop, on_back=on_back
        )
    except Exception as exc:  # noqa: BLE001 - every conversation of the batch hears it
        stored = [exc] * len(batch)
    for (*_, future), outcome in zip(batch, stored, strict=True):
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _store_rows(rows: list[dict], now) -> list:
    """Each turn's outcome: stored, not ours (False), or what the database raised for that one alone."""
    try:
        return _retrying_deadlocks(lambda: sql.store_turns(rows, now=now))
    except IntegrityError:
        # A turn already stored at its position (a conversation taken over and replayed meanwhile, or a write
        # that committed as its connection dropped): one transaction each.
        stored = []
        for row in rows:
            try:
                stored.append(_store_row(row, now))
            except Exception as exc:
                if outage.unavailable(exc):
                    raise  # the whole batch is written again once the database is back
                stored.append(exc)  # handed to the conversation, which records it
        return stored


def _retrying_deadlocks(write: Callable, tries: int = 3):
    """write() in a transaction, run again if PostgreSQL aborted it to break a deadlock or a serialization
    conflict, as its manual asks of the application: the other transaction has gone on by then. The heartbeat's
    lease renewal, which deadlocked with the turns' writes, never waits for a row now (runs.sql.renew_leases),
    so this is the exception; without it, one such abort failed every conversation whose turn was in the
    batch."""
    for attempt in range(1, tries + 1):
        try:
            with transaction.atomic():
                return write()
        except DatabaseError as exc:
            if attempt == tries or getattr(exc.__cause__, "sqlstate", None) not in ("40P01", "40001"):
                raise
            log.warning(
                "PostgreSQL aborted the turns' write (%s); writing them again (%d of %d)",
                exc.__cause__.sqlstate,
                attempt + 1,
                tries,
            )


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
        calling_since=None,
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
        calling_since=None,
    )


# A worker's code runners, one per suite version whose code checks it runs: its attached files are written
# to a temporary folder once, and removed when the runner is dropped (the oldest first, past this many).
CODE_RUNNERS_KEPT = 8
_code_runners: dict[int, CodeRunner] = {}
_code_runners_lock = threading.Lock()
_NO_CODE = CodeRunner()


def _code_runner(version, spec) -> CodeRunner | None:
    """Where this version's code checks run on this worker; None when it has none, or when the server does
    not allow code graders (its conversations then end in error, saying so)."""
    if not settings.EVALSITE_CODE_GRADERS:
        return None
    with _code_runners_lock:
        runner = _code_runners.get(version.pk)
        if runner is None and not spec.code_checks():  # walked once per version: kept as a runner-less entry
            _code_runners[version.pk] = runner = _NO_CODE
        if runner is None:
            files = dict(SuiteFile.objects.filter(version_id=version.pk).values_list("name", "content"))
            runner = _code_runners[version.pk] = CodeRunner(files=files)
        while len(_code_runners) > CODE_RUNNERS_KEPT:
            _code_runners.pop(next(iter(_code_runners)))
        return None if runner is _NO_CODE else runner


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


class _StartFailed(Exception):
    """A claimed conversation could not be set up to play (its suite, its endpoint, its stored turns)."""


class _Playing:
    """A conversation the pump is playing: its claim, whether a note of a wait found the claim taken, the
    write of its latest turn, until the next turn or the end confirms it, its model calls in flight, and
    when the slow one noted on its row went out (time.monotonic; None: none noted)."""

    __slots__ = ("claimed", "lost", "storing", "calls", "noted", "stored")

    def __init__(self, claimed: sql.Claimed, latencies: Latencies) -> None:
        self.claimed = claimed
        self.lost = threading.Event()
        self.storing: concurrent.futures.Future | None = None
        self.calls = Calls(latencies)
        self.noted: float | None = None
        self.stored: list[TurnRecord] = []  # the turns this claim stored, in case the server forgets some

    def still_ours(self) -> bool:
        return not (self.lost.is_set() or heartbeat.was_handed_back(self.claimed.conversation_id))


class Pump:
    """Plays many conversations at once: each one's loop as a coroutine on the process's event loop
    (runs.loop), and the database work of all of them in one thread, the one that runs `serve`, in batches.

    What arrives while the thread is busy is done together in its next round: the claims of every
    conversation that can start, in one statement; the turns, in one transaction; the ends, in one
    transaction, followed by one dispatch per run, which hands the freed slots to the next conversations
    (kept here, with no broker message) and lets the pump claim them in the same round. A worker's pump
    holds up to `capacity` conversations (its --concurrency); the Celery task only offers it the
    conversation its message names (`deliver`). Claims, fencing tokens, leases and the heartbeat are as
    for one conversation: every write is still conditional on the conversation's own claim.

    A worker process has one, serving forever in a thread of its own (`start`), which keeps its database
    connection between rounds (a broken one is replaced after the round it failed). `execute` plays a
    conversation in its caller's thread with a pump of one slot (tests, an eager Celery): there the calls
    see the caller's transaction.
    """

    BATCH = 400  # jobs at most in one round: a long transaction would hold SQLite's write lock as long
    RUN_CHECK_SECONDS = 0.5  # a cancel takes effect within this, plus the turn in flight
    POLL_SECONDS = 0.1  # a worker with free slots looks this often for conversations sent and not claimed
    RETAKES = 3  # looks again at once, at most, in a round whose claims others won (_round)
    SLOW_CHECK_SECONDS = 1.0  # how often the conversations' calls in flight are looked at (_note_slow_calls)

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        # What happened to each conversation, for execute and tests: kept only while serving until idle (a
        # worker's pump serves forever, and would keep one per conversation it ever played).
        self.outcomes: dict[int, str] = {}
        self._keep_outcomes = False
        self._polled_at = 0.0
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._held = 0  # slots taken: offered and not yet claimed, or playing
        self._closed = False
        self._stopping = threading.Event()
        self._playing: dict[int, _Playing] = {}
        self._runs: dict[object, tuple[float, bool]] = {}  # run -> (when checked, whether it is active)
        self._latencies: dict[object, Latencies] = {}  # run -> its calls' latencies, in this process
        self._slow_checked = 0.0
        self._thread: threading.Thread | None = None
        self._suspect = False  # a connection failed: check the claims against the database (_reconcile)
        self._lost_seen = 0  # the pool's count of broken connections, when last looked at

    # --- from any thread -----------------------------------------------------------------------------------

    def offer(self, conversation_id: int) -> bool:
        """Play this conversation if a slot is free; False when the pump is full (its message is then dropped,
        and the conversation, sent and not claimed, is taken by the next pump with a free slot)."""
        with self._lock:
            if self._held >= self.capacity:
                return False
            self._held += 1
        self._put("offer", conversation_id, None)
        return True

    def held(self) -> int:
        with self._lock:
            return self._held

    async def call(self, fn: Callable, *args):
        """fn(*args) in the serving thread; its result or exception comes back to the awaiting coroutine."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put("call", (fn, args), future)
        return await asyncio.wrap_future(future)

    def post(self, fn: Callable, *args) -> None:
        """fn(*args) in the serving thread, without waiting for it; an exception is logged."""
        self._put("call", (fn, args), None)

    def store(self, conversation_id: int, attempt: int, turn: TurnRecord) -> concurrent.futures.Future:
        """The turn's write, queued for the next round (see write_turns)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put("turn", (conversation_id, attempt, turn), future)
        return future

    def _put(self, kind: str, payload, future: concurrent.futures.Future | None) -> None:
        with self._lock:
            if not self._closed:
                self._jobs.put((kind, payload, future))
                return
        # A background check still asking after the pump stopped serving: nobody serves it now.
        if future is not None:
            future.set_exception(RuntimeError("the conversation has ended"))

    # --- the serving thread --------------------------------------------------------------------------------

    def start(self) -> None:
        """Serve forever in a thread of this process's own (a worker's pump)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self.serve, name="evalsite-pump", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Stop serving after the current round (a worker that is shutting down, having handed its
        conversations back) and wait for the serving thread."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def serve(self, *, until_idle: bool = False) -> None:
        """Do the conversations' database work, a round at a time, forever (until `stop`) or (until_idle)
        until no conversation is held any more."""
        self._keep_outcomes = until_idle
        while not self._stopping.is_set() and not (until_idle and self.held() == 0):
            jobs = []
            # A worker's pump wakes every POLL_SECONDS to look for waiting conversations (_round).
            with contextlib.suppress(queue.Empty):
                jobs.append(
                    self._jobs.get(timeout=self.SLOW_CHECK_SECONDS if until_idle else self.POLL_SECONDS)
                )
            while len(jobs) < self.BATCH:
                try:
                    jobs.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            failed = True
            try:
                self._round(jobs, poll=not until_idle)
                self._note_slow_calls()
                failed = False
            except Exception:
                log.exception("a round of the worker's database work failed")
            finally:
                # As between two tasks: a connection broken by an error is replaced. Never inside a caller's
                # transaction, which closing the connection would break (a test playing in its atomic block).
                if (failed or connection.errors_occurred) and not connection.in_atomic_block:
                    self._suspect = True
                    close_old_connections()
        with self._lock:
            self._closed = True
        while True:  # what was handed over just before the end
            try:
                kind, payload, future = self._jobs.get_nowait()
            except queue.Empty:
                break
            if kind == "call":
                self._call(payload, future)

    def _patiently(self, work: Callable, what: str):
        """work() in this thread, waiting out a database outage (runs.outage); its claims are checked once the
        database is back, before the work is done again."""
        return outage.patiently(work, what=what, stop=self._stopping, on_back=self._reconcile)

    def _round(self, jobs: list, *, poll: bool) -> None:
        if self._suspect or self._server_lost_connections():
            self._patiently(self._reconcile, "checking its conversations")
        offered, turns, ended = [], [], []
        for kind, payload, future in jobs:
            if kind == "offer":
                offered.append(payload)
            elif kind == "turn":
                turns.append((*payload, future))
            elif kind == "ended":
                ended.append(payload)
            else:
                self._call(payload, future)
        if turns:
            write_turns(turns, stop=self._stopping, on_back=self._reconcile)
            for cid, _, turn, future in turns:
                playing = self._playing.get(cid)
                if playing is not None and future.done() and future.exception() is None and future.result():
                    playing.stored.append(turn)
        starting = self._end(ended) if ended else []
        if poll and not ended and not heartbeat.stopping.is_set() and self._poll_due():
            starting += self._take_waiting(self.capacity - self.held(), besides=offered)
        lost = self._start(offered + starting)
        # A claim lost to another worker means workers reach for the same conversations: at a launch every pump
        # with room polls the same oldest ones, while their messages are still on the way to one or the other.
        # What this pump lost, the winner's full pump may have dropped in its turn: look again now, not a poll
        # interval later (at concurrency 300 that left slots empty up to 0.5 s after a launch).
        for _ in range(self.RETAKES):
            if not (poll and lost) or heartbeat.stopping.is_set():
                break
            lost = self._start(self._take_waiting(self.capacity - self.held()))

    def _note_slow_calls(self) -> None:
        """Say on each conversation's row whether a model call of it is slow (out longer than a few times its
        run's median latency, engine.calls), every SLOW_CHECK_SECONDS: a write only when that changes, so
        calls that answer in their usual time cost a dict entry and nothing more."""
        now = time.monotonic()
        if now - self._slow_checked < self.SLOW_CHECK_SECONDS or not self._playing:
            return
        self._slow_checked = now
        minimum = settings.EVALSITE_SLOW_CALL_SECONDS
        changed = [
            (playing, since)
            for playing in self._playing.values()
            if (since := slow_since(playing.calls, now, minimum)) != playing.noted
        ]
        if not changed:
            return
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
            return
        for playing, since in changed:
            playing.noted = since

    def _poll_due(self) -> bool:
        """Whether to look for waiting conversations now: every POLL_SECONDS at most, not every round (a pump
        with free slots, at low concurrency, has a round for every turn)."""
        now = time.monotonic()
        if now - self._polled_at < self.POLL_SECONDS:
            return False
        self._polled_at = now
        return True

    def _server_lost_connections(self) -> bool:
        """Whether the pool found connections broken since last asked: the server may have restarted, though
        this thread saw no error (its next connection was a new one)."""
        pool = getattr(connection, "pool", None)
        if pool is None:
            return False
        stats = pool.get_stats()
        lost = stats.get("connections_lost", 0) + stats.get("returns_bad", 0)
        changed, self._lost_seen = lost != self._lost_seen, lost
        return changed

    def _reconcile(self) -> None:
        """After a connection failed: what the database has of each conversation this pump plays. A claim it
        no longer holds stops its conversation; turns it stored that the server has forgotten (a crash loses
        the last moment of a worker's unflushed commits, see runs.sql.durable) are stored again, in order,
        before anything that follows them."""
        self._suspect = False
        playing = list(self._playing.values())
        found = sql.claims([p.claimed.conversation_id for p in playing])
        restored = 0
        for p in playing:
            attempt, status, turns = found.get(p.claimed.conversation_id, (None, None, 0))
            if (attempt, status) != (p.claimed.attempt, Status.RUNNING):
                p.lost.set()
                continue
            missing = [turn for turn in p.stored if turn.turn > turns]
            if missing:
                now = timezone.now()
                with transaction.atomic():
                    for turn in missing:
                        sql.store_turn(
                            now=now, **_turn_row(p.claimed.conversation_id, p.claimed.attempt, turn)
                        )
                restored += len(missing)
        if restored:
            log.warning("the database had forgotten %d stored turn(s); stored them again", restored)

    @staticmethod
    def _call(payload: tuple, future: concurrent.futures.Future | None) -> None:
        fn, args = payload
        if future is not None and not future.set_running_or_notify_cancel():
            return
        try:
            value = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, which decides
            if future is None:
                log.exception("%s failed", getattr(fn, "__name__", fn))
            else:
                future.set_exception(exc)
        else:
            if future is not None:
                future.set_result(value)

    def _take_waiting(self, room: int, besides: list[int] = ()) -> list[int]:
        """Up to `room` conversations whose messages have waited longest (dropped by a full pump, or still on
        their way), their slots taken here. The claim is conditional, so a message delivered later finds them
        taken and does nothing."""
        if room <= 0:
            return []
        try:
            taken = sql.oldest_sent_unclaimed(room, besides=besides)
        except Exception as exc:
            if not outage.unavailable(exc):
                log.exception("could not look for conversations waiting for a worker")
            self._suspect = True
            outage.drop_connection()
            return []
        with self._lock:
            self._held += len(taken)
        return taken

    def _start(self, ids: list[int]) -> list[int]:
        """Claim these conversations, whose slots are taken, in one statement, and start those claimed. The ids
        it could not claim: taken by another worker, or their run has ended."""
        if not ids:
            return []
        if heartbeat.stopping.is_set():
            # Offered while this worker stops: leave them to the others, and send them again, since their
            # messages are about to be taken off the queue unplayed.
            self._release(ids)
            scheduling.resend(ids)
            return []
        tries = 0

        def take() -> list[sql.Claimed]:
            nonlocal tries
            tries += 1
            if tries == 1:
                return claim(ids)
            # The first try may have committed as its connection dropped.
            return claim([pk for pk in ids if pk not in self._playing], again=True)

        try:
            claimed = self._patiently(take, f"claiming {len(ids)} conversation(s)")
        except Exception:
            log.exception("claiming %d conversation(s) failed; sent again", len(ids))
            self._release(ids)
            with contextlib.suppress(Exception):
                scheduling.resend(ids)
            raise
        started = {c.conversation_id for c in claimed}
        lost = [pk for pk in ids if pk not in started]
        self._release(lost)
        registry = self._patiently(build_registry, "reading the endpoints")
        checked = time.monotonic()  # the claim just saw each run active
        for c in claimed:
            self._runs[c.run_id] = (checked, True)
            heartbeat.add(c.conversation_id, c.attempt)
            latencies = self._latencies.setdefault(c.run_id, Latencies())
            playing = self._playing[c.conversation_id] = _Playing(c, latencies)
            try:
                coroutine = self._patiently(
                    lambda playing=playing: self._conversation(playing, registry),
                    f"starting conversation {c.conversation_id}",
                )
            except Exception as exc:
                log.exception("conversation %s could not start", c.conversation_id)
                done: concurrent.futures.Future = concurrent.futures.Future()
                done.set_exception(_StartFailed(str(exc)))
                self._put("ended", (playing, done), None)
                continue
            done = asyncio.run_coroutine_threadsafe(coroutine, event_loop())
            done.add_done_callback(lambda done, playing=playing: self._put("ended", (playing, done), None))
        return lost

    def _record(self, conversation_id: int, outcome: str) -> None:
        if self._keep_outcomes:
            self.outcomes[conversation_id] = outcome

    def _release(self, ids: list[int]) -> None:
        for pk in ids:
            self._record(pk, "skipped")
        with self._lock:
            self._held -= len(ids)

    def _conversation(self, playing: _Playing, registry) -> Coroutine:
        """The conversation's loop, ready to run on the event loop, with its callbacks into this pump."""
        claimed = playing.claimed
        conversation_id, attempt, run_id = claimed.conversation_id, claimed.attempt, claimed.run_id
        spec = specs.bound(claimed.version, claimed.run_vars)
        code = _code_runner(claimed.version, spec)
        ctx, _ = build_context(spec, registry, claimed.model, asynchronous=True, code=code)
        ev = spec.evals[claimed.index]
        # Only a resumed conversation (a later attempt) can have turns stored already.
        stored = (
            Turn.objects.filter(conversation_id=conversation_id).order_by("position") if attempt > 1 else []
        )
        prior = [TurnRecord.model_validate(turn.record) for turn in stored]
        replay = _replay(claimed) if claimed.regraded_from is not None else None

        async def should_stop() -> bool:
            if not playing.still_ours():
                return True
            active = self._run_known(run_id)
            if active is None:
                try:
                    active = await self.call(self._check_run, run_id)
                except Exception as exc:
                    if not outage.unavailable(exc):
                        raise
                    return False  # the database is away: play on, and ask again after the next turn
            return not active

        async def on_turn(turn: TurnRecord) -> None:
            # The turn's write goes to the next round and the conversation goes on to its next model call
            # meanwhile; the write is confirmed before the next turn's (turns are stored in order, each only
            # while the claim is ours) or, for the last turn, before the end (_outcome). A worker killed in
            # between loses the turn and the call in flight, as one killed during a call: the next claim
            # replays from the last stored turn. What this saves: a round of the pump per turn, out of each
            # conversation's time, and a round between its last turn and its end.
            storing, playing.storing = playing.storing, None
            if storing is not None and not await asyncio.wrap_future(storing):
                raise LostClaim()
            playing.storing = self.store(conversation_id, attempt, turn)

        def note_wait(wait: RetryWait) -> None:  # in the serving thread
            try:
                _note_wait(conversation_id, attempt, wait)
            except LostClaim:
                playing.lost.set()  # the wait stops at its next slice

        return _watched(
            playing.calls,
            run_eval_async(
                ev,
                claimed.index,
                claimed.eval_id,
                ctx,
                prior=prior,
                on_turn=on_turn,
                should_stop=should_stop,
                on_wait=lambda wait: self.post(note_wait, wait),
                given=(claimed.system, claimed.history),  # as launch built them: never built again
                replay=replay,
            ),
        )

    def _run_known(self, run_id) -> bool | None:
        """Whether the run goes on, as last checked, if that was less than RUN_CHECK_SECONDS ago; else None."""
        checked, active = self._runs.get(run_id, (0.0, True))
        return active if time.monotonic() - checked < self.RUN_CHECK_SECONDS else None

    def _check_run(self, run_id) -> bool:
        """Whether the run goes on: one query for every run the pump plays, at most every RUN_CHECK_SECONDS
        (a conversation asks between its turns; a query each cost a round trip per conversation). Another
        conversation's check may have answered it while this one waited for the thread."""
        known = self._run_known(run_id)
        if known is not None:
            return known
        runs = {playing.claimed.run_id for playing in self._playing.values()} | {run_id}
        live = sql.active_runs(runs)
        checked = time.monotonic()
        self._runs = {run: (checked, run in live) for run in runs}
        return run_id in live

    def _end(self, ended: list) -> list[int]:
        """Record how each conversation ended, in one transaction; then one dispatch per run, whose
        conversations this pump keeps in the slots just freed (or, when others have waited, the oldest
        waiting). The ids to claim now."""
        writes = []
        for playing, done in ended:
            claimed = playing.claimed
            outcome, write = _outcome(playing, done)
            self._record(claimed.conversation_id, outcome)
            if write is not None:
                writes.append((claimed, *write))
        _write_ends(writes, self._patiently)
        for playing, _ in ended:
            heartbeat.remove(playing.claimed.conversation_id)
            self._playing.pop(playing.claimed.conversation_id, None)
        playing_runs = {playing.claimed.run_id for playing in self._playing.values()}
        for run_id in {playing.claimed.run_id for playing, _ in ended} - playing_runs:
            self._latencies.pop(run_id, None)
        # A stopping worker keeps nothing: what it dispatches is published for the others.
        keep = None if heartbeat.stopping.is_set() else scheduling.Keep(room=len(ended))
        for run_id, endpoint_name in dict.fromkeys(
            (p.claimed.run_id, p.claimed.endpoint_name) for p, _ in ended
        ):
            try:
                self._patiently(
                    lambda run_id=run_id, endpoint_name=endpoint_name: scheduling.conversation_ended(
                        run_id, endpoint_name, keep=keep
                    ),
                    f"dispatching after run {run_id}'s conversations ended",
                )
            except Exception:  # the other workers' sweepers dispatch and finalise it
                log.exception("dispatch after run %s's conversations ended failed", run_id)
        starting = list(keep.ids) if keep is not None else []
        with self._lock:
            self._held -= len(ended) - len(starting)
        if keep is not None and len(starting) < len(ended):
            starting += self._take_waiting(len(ended) - len(starting), besides=starting)
        return starting


async def _watched(calls: Calls, conversation: Coroutine):
    """The conversation, its model calls noted in `calls` (set here: the task running it has its own context)."""
    with watching(calls):
        return await conversation


def _outcome(playing: _Playing, done: concurrent.futures.Future) -> tuple[str, tuple | None]:
    """How a conversation ended, and what to write of it: (function, argument), or None."""
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
    except _StartFailed as exc:
        return "error", (_fail, f"could not start: {exc}")
    except ResumeMismatch as exc:
        return "error", (_fail, f"cannot resume: {exc}")
    except Exception as exc:  # a bug must not leave the run hanging: record it on this conversation
        log.error("conversation %s crashed", conversation_id, exc_info=exc)
        return "error", (_fail, f"internal error: {type(exc).__name__}: {exc}")
    if heartbeat.was_handed_back(conversation_id):
        return "handed back", None  # another worker resumes it; its claim fences this one out anyway
    return result.status, (_finish, result)


def _write_ends(writes: list, patiently: Callable) -> None:
    """Each ended conversation's final write (_finish or _fail, conditional on its claim, so a write made
    again after its connection dropped changes nothing more), all in one transaction, flushed to disk
    (runs.sql.durable); if that fails, one transaction each, so one bad row cannot keep the others from
    ending. A database that is away is waited out (`patiently`, the pump's). One that still fails stays
    running under its lease, which the heartbeat no longer renews: the sweepers requeue it and the next claim
    resumes it."""
    if not writes:
        return

    def end(some: list) -> None:
        with transaction.atomic():
            sql.durable()
            for claimed, fn, argument in some:
                fn(claimed.conversation_id, claimed.attempt, argument)

    try:
        patiently(lambda: end(writes), f"ending {len(writes)} conversation(s)")
        return
    except Exception:
        log.exception("ending %d conversation(s) together failed; one at a time", len(writes))
    for write in writes:
        try:
            patiently(lambda write=write: end([write]), f"ending conversation {write[0].conversation_id}")
        except Exception:
            log.exception("conversation %s could not be ended", write[0].conversation_id)


pump: Pump | None = None  # a worker process's (runs.tasks); None: `deliver` plays in the caller's thread


def deliver(conversation_id: int) -> str:
    """What a conversation's message does: offer it to this worker's pump. Where there is none (an eager
    Celery, a test), play it here."""
    if pump is None:
        return execute(conversation_id)
    if heartbeat.stopping.is_set():
        # Delivered while this worker stops: leave it to the others, and send it again, since this message is
        # about to be taken off the queue unplayed.
        scheduling.resend([conversation_id])
        return "skipped"
    return "offered" if pump.offer(conversation_id) else "busy"


def execute(conversation_id: int) -> str:
    """Play one conversation to its end (or resume it) in this thread, then the ones its end hands over to
    this thread, one at a time (a pump of one slot). Returns what happened to the first, for logs and
    tests."""
    one = Pump(capacity=1)
    one.offer(conversation_id)
    one.serve(until_idle=True)
    return one.outcomes.get(conversation_id, "skipped")
