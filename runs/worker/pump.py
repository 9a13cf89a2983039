"""A worker process's pump: every conversation the process plays, with their database work done by one thread.

Each conversation's loop is a coroutine on the process's event loop (runs.worker.loop), where its model calls
are awaited with every other conversation's; the database work of all of them (claims, turns, ends and the
dispatches that follow) is done by the pump's thread in batches: one statement or one transaction for
whatever arrived together. A conversation's Celery message only offers it to the pump (`deliver`); the
conversations its end frees slots for are handed to the pump by the dispatch and claimed at once, with no
message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine

from django.conf import settings
from django.db import close_old_connections, connection

from engine.calls import Latencies, slow_since
from engine.results import TurnRecord
from runs import outage
from runs.endpoints import build_registry
from runs.models import Status

from . import budget, recovery, scheduling, sql, writes
from .claims import claim, heartbeat
from .loop import event_loop
from .messages import Call, Ended, Message, Offer, StoreTurn
from .playing import Playing, StartFailed, play
from .threads import started

log = logging.getLogger(__name__)


class Pump:
    """Plays up to `capacity` conversations at once (a worker's --concurrency), their database work done in
    one thread, the one that runs `serve`, a round at a time.

    What arrives while the thread is busy is done together in its next round: the claims of every
    conversation that can start, in one statement; the turns, in one transaction; the ends, in one
    transaction, followed by one dispatch per run, which hands the freed slots to the next conversations with
    no broker message and lets the pump claim them in the same round. Every write is still conditional on the
    conversation's own claim.

    A worker process has one, serving forever in a thread of its own (`start`). `execute` plays a
    conversation in its caller's thread with a pump of one slot (tests, an eager Celery): there the writes
    see the caller's transaction.
    """

    BATCH = 400  # messages at most in one round: a long transaction would hold SQLite's write lock as long
    RUN_CHECK_SECONDS = 0.5  # a cancel takes effect within this, plus the turn in flight
    POLL_SECONDS = 0.1  # a worker with free slots looks this often for conversations sent and not claimed
    RETAKES = 3  # looks again at once, at most, in a round whose claims others won (_round)
    SLOW_CHECK_SECONDS = 1.0  # how often the conversations' calls in flight are looked at (_note_slow_calls)
    # Under load, rounds start at most every ROUND_SECONDS, so that more messages share each: a round's
    # transaction, checks and dispatch cost a worker much of its database CPU whatever its size. A round of
    # at least BUSY_ROUND messages means load; a light one, as at low concurrency, is never held.
    ROUND_SECONDS = 0.02
    BUSY_ROUND = 5

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        # What happened to each conversation, for execute and tests: kept only while serving until idle (a
        # worker's pump serves forever, and would keep one per conversation it ever played).
        self.outcomes: dict[int, str] = {}
        self._records_outcomes = False
        self._polled_at = 0.0
        self._round_started = 0.0
        self._busy = False
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._held = 0  # slots taken: offered and not yet claimed, or playing
        self._closed = False
        self._stopping = threading.Event()
        self._playing: dict[int, Playing] = {}
        self._tasks: set[asyncio.Task] = set()  # the conversations' tasks on the event loop
        # run -> (when checked, why it stopped: None while it goes on, "" for a cancel, else Run.stop_reason)
        self._runs: dict[object, tuple[float, str | None]] = {}
        self._latencies: dict[object, Latencies] = {}  # run -> its calls' latencies, in this process
        # run -> the endpoints without prices its calls went to that this process has named on it (Run.unpriced)
        self._unpriced: dict[object, set[str]] = {}
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
        self._put(Offer(conversation_id))
        return True

    def held(self) -> int:
        with self._lock:
            return self._held

    async def call(self, fn: Callable, *args):
        """fn(*args) in the serving thread; its result or exception comes back to the awaiting coroutine."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(Call(fn, args, future))
        return await asyncio.wrap_future(future)

    def post(self, fn: Callable, *args) -> None:
        """fn(*args) in the serving thread, without waiting for it; an exception is logged."""
        self._put(Call(fn, args))

    def store(self, conversation_id: int, attempt: int, turn: TurnRecord) -> concurrent.futures.Future:
        """The turn's write, queued for the next round (writes.write_turns); the future answers it."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(StoreTurn(conversation_id, attempt, turn, future))
        return future

    async def why_stopped(self, run_id) -> str | None:
        """None while the run goes on; else why it stopped ("" for a plain cancel, else its stop reason, as
        "cost limit $5.00 reached"). As last checked if that was recent, else asked in the serving thread."""
        known = self._run_known(run_id)
        if known is _UNKNOWN:
            known = await self.call(self._check_run, run_id)
        return known

    def _put(self, message: Message) -> None:
        with self._lock:
            if not self._closed:
                self._queue.put(message)
                return
        # A background check still asking after the pump stopped serving: nobody serves it now.
        match message:
            case Call(result=concurrent.futures.Future() as future) | StoreTurn(stored=future):
                future.set_exception(RuntimeError("the conversation has ended"))

    # --- the serving thread --------------------------------------------------------------------------------

    def start(self) -> None:
        """Serve forever in a thread of this process's own (a worker's pump)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = started(self._serve_forever, "evalsite-pump")

    def _serve_forever(self) -> None:
        try:
            self.serve()
        finally:
            # The thread's connection goes back with it, not when the process ends: a stopped pump's session
            # would otherwise stay open on the server (and keep a test database from being dropped).
            connection.close()

    def stop(self) -> None:
        """Stop serving after the current round (a worker that is shutting down, having handed its
        conversations back) and wait for the serving thread."""
        self._stopping.set()
        self.post(_nothing)  # wakes a serving thread that waits on the queue, which then sees the stop
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def serve(self, *, until_idle: bool = False) -> None:
        """Do the conversations' database work, a round at a time, forever (until `stop`) or (until_idle)
        until no conversation is held any more."""
        self._records_outcomes = until_idle
        while not self._stopping.is_set() and not (until_idle and self.held() == 0):
            messages = []
            # A worker's pump wakes every POLL_SECONDS to look for waiting conversations (_round).
            with contextlib.suppress(queue.Empty):
                messages.append(
                    self._queue.get(timeout=self.SLOW_CHECK_SECONDS if until_idle else self.POLL_SECONDS)
                )
            if messages and self._busy and not until_idle:
                wait = self._round_started + self.ROUND_SECONDS - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            self._round_started = time.monotonic()
            while len(messages) < self.BATCH:
                try:
                    messages.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._busy = len(messages) >= self.BUSY_ROUND
            failed = True
            try:
                self._round(messages, poll=not until_idle)
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
                message = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(message, Call):
                self._call(message)

    def _patiently(self, work: Callable, what: str):
        """work() in this thread, waiting out a database outage (runs.outage); the claims are checked once the
        database is back, before the work is done again."""
        return outage.patiently(work, what=what, stop=self._stopping, on_back=self._reconcile)

    def _round(self, messages: list[Message], *, poll: bool) -> None:
        if self._suspect or self._server_lost_connections():
            self._patiently(self._reconcile, "checking its conversations")
        offered: list[int] = []
        turns: list[StoreTurn] = []
        ended: list[Ended] = []
        for message in messages:
            match message:
                case Offer():
                    offered.append(message.conversation_id)
                case StoreTurn():
                    turns.append(message)
                case Ended():
                    ended.append(message)
                case Call():
                    self._call(message)
        written: list[tuple[sql.Claimed, float]] = []  # each turn this round stored, for the cost limits
        if turns:
            writes.write_turns(turns, stop=self._stopping, on_back=self._reconcile)
            unpriced: dict[object, set[str]] = {}
            for message in turns:
                playing, stored = self._playing.get(message.conversation_id), message.stored
                if playing is None:
                    continue
                written.append((playing.claimed, message.turn.spent))
                if stored.done() and stored.exception() is None and stored.result():
                    playing.stored.append(message.turn)
                    unpriced.setdefault(playing.claimed.run_id, set()).update(message.turn.unpriced)
            self._note_unpriced(unpriced)
        starting = self._end(ended, written) if ended else []
        if written and not ended:
            budget.check((), written)  # a run at its cost limit plays no further turn (runs.worker.budget)
        if poll and not ended and not heartbeat.stopping.is_set() and self._poll_due():
            starting += self._take_waiting(self.capacity - self.held(), besides=offered)
        lost = self._start(offered + starting)
        # A claim lost to another worker means workers reach for the same conversations: at a launch every pump
        # with room polls the same oldest ones, while their messages are still on the way to one or the other.
        # What this pump lost, the winner's full pump may have dropped in its turn: look again now, not a poll
        # interval later, which would leave slots empty after a launch.
        for _ in range(self.RETAKES):
            if not (poll and lost) or heartbeat.stopping.is_set():
                break
            lost = self._start(self._take_waiting(self.capacity - self.held()))

    def _note_unpriced(self, called: dict[object, set[str]]) -> None:
        """Name on each run the endpoints without prices its calls went to, as its turns are stored and its
        conversations end, so that its pages say its cost is unknown, or a lower bound, from the first such
        call. Each name is written once per run by this process; one whose write failed is tried again with
        the run's next turn or end."""
        for run_id, names in called.items():
            named = self._unpriced.setdefault(run_id, set())
            new = names - named
            if not new:
                continue
            try:
                self._patiently(
                    lambda run_id=run_id, new=new: writes.note_unpriced(run_id, new),
                    f"naming run {run_id}'s endpoints without prices",
                )
            except Exception:
                log.exception("run %s: could not name its endpoints without prices %s", run_id, sorted(new))
                continue
            named |= new

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
        if writes.note_slow_calls(changed, now):
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
        no longer holds stops its conversation; turns it stored that the server has forgotten are stored
        again, in order, before anything that follows them."""
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
                writes.restore_turns(p.claimed.conversation_id, p.claimed.attempt, missing)
                restored += len(missing)
        if restored:
            log.warning("the database had forgotten %d stored turn(s); stored them again", restored)

    @staticmethod
    def _call(call: Call) -> None:
        future = call.result
        if future is not None and not future.set_running_or_notify_cancel():
            return
        try:
            value = call.fn(*call.args)
        except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, which decides
            if future is None:
                log.exception("%s failed", getattr(call.fn, "__name__", call.fn))
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
            recovery.resend(ids)
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
                recovery.resend(ids)
            raise
        started = {c.conversation_id for c in claimed}
        lost = [pk for pk in ids if pk not in started]
        self._release(lost)
        registry = self._patiently(build_registry, "reading the endpoints")
        checked = time.monotonic()  # the claim just saw each run active
        beginning: list[tuple[Playing, Coroutine]] = []
        for c in claimed:
            self._runs[c.run_id] = (checked, None)
            heartbeat.add(c.conversation_id, c.attempt)
            latencies = self._latencies.setdefault(c.run_id, Latencies())
            playing = self._playing[c.conversation_id] = Playing(c, latencies)
            try:
                coroutine = self._patiently(
                    lambda playing=playing: play(self, playing, registry),
                    f"starting conversation {c.conversation_id}",
                )
            except Exception as exc:
                log.exception("conversation %s could not start", c.conversation_id)
                done: concurrent.futures.Future = concurrent.futures.Future()
                done.set_exception(StartFailed(str(exc)))
                self._put(Ended(playing, done))
                continue
            beginning.append((playing, coroutine))
        if beginning:
            # One wake-up of the event loop for every conversation the round starts, not one each.
            event_loop().call_soon_threadsafe(self._begin, beginning)
        return lost

    def _begin(self, beginning: list[tuple[Playing, Coroutine]]) -> None:
        """On the event loop: each conversation's coroutine as a task, whose end is put to the pump."""
        for playing, coroutine in beginning:
            task = asyncio.ensure_future(coroutine)
            self._tasks.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(functools.partial(self._ended, playing))

    def _ended(self, playing: Playing, task: asyncio.Task) -> None:
        """On the event loop: the task's outcome, as a future the pump's thread can read, put to the pump."""
        self._tasks.discard(task)
        done: concurrent.futures.Future = concurrent.futures.Future()
        if task.cancelled():
            done.cancel()
        elif task.exception() is not None:
            done.set_exception(task.exception())
        else:
            done.set_result(task.result())
        self._put(Ended(playing, done))

    def _record(self, conversation_id: int, outcome: str) -> None:
        if self._records_outcomes:
            self.outcomes[conversation_id] = outcome

    def _release(self, ids: list[int]) -> None:
        for pk in ids:
            self._record(pk, "skipped")
        with self._lock:
            self._held -= len(ids)

    def _run_known(self, run_id):
        """why_stopped as last checked, if that was less than RUN_CHECK_SECONDS ago; else _UNKNOWN."""
        checked, why = self._runs.get(run_id, (0.0, None))
        return why if time.monotonic() - checked < self.RUN_CHECK_SECONDS else _UNKNOWN

    def _check_run(self, run_id) -> str | None:
        """why_stopped: one query for every run the pump plays, at most every RUN_CHECK_SECONDS, rather than
        one per conversation. Another conversation's check may have answered it while this one waited for the
        thread."""
        known = self._run_known(run_id)
        if known is not _UNKNOWN:
            return known
        runs = {playing.claimed.run_id for playing in self._playing.values()} | {run_id}
        stopped = sql.stopped_runs(runs)
        checked = time.monotonic()
        self._runs = {run: (checked, stopped.get(run)) for run in runs}
        return stopped.get(run_id)

    def _end(self, ended: list[Ended], written: list[tuple[sql.Claimed, float]]) -> list[int]:
        """Record how each conversation ended, in one transaction; then the cost limits of their runs and of
        the round's `written` turns (runs.worker.budget), and one dispatch per run, which fills the slots just
        freed with the run's next conversations (or, when others have waited, the oldest waiting). The ids to
        claim now."""
        ends = []
        for message in ended:
            claimed = message.playing.claimed
            outcome, write = writes.end_of(message.playing, message.done)
            self._record(claimed.conversation_id, outcome)
            if write is not None:
                ends.append((claimed, *write))
        writes.write_ends(ends, self._patiently)
        # The graders that judge a conversation after its last turn name theirs on its result's last turn.
        unpriced: dict[object, set[str]] = {}
        for claimed, write, argument in ends:
            if write is writes.finish:
                unpriced.setdefault(claimed.run_id, set()).update(argument.unpriced)
        self._note_unpriced(unpriced)
        ended_claims = [message.playing.claimed for message in ended]
        budget.check(ended_claims, written)  # a run at its cost limit starts nothing more
        for claimed in ended_claims:
            heartbeat.remove(claimed.conversation_id)
            self._playing.pop(claimed.conversation_id, None)
        playing_runs = {playing.claimed.run_id for playing in self._playing.values()}
        for run_id in {claimed.run_id for claimed in ended_claims} - playing_runs:
            self._latencies.pop(run_id, None)
            self._unpriced.pop(run_id, None)
        # A stopping worker fills no slots: what it dispatches is published for the others.
        freed = None if heartbeat.stopping.is_set() else scheduling.FreedSlots(room=len(ended))
        for run_id, endpoint_name in dict.fromkeys((c.run_id, c.endpoint_name) for c in ended_claims):
            try:
                self._patiently(
                    lambda run_id=run_id, endpoint_name=endpoint_name: scheduling.conversation_ended(
                        run_id, endpoint_name, freed=freed
                    ),
                    f"dispatching after run {run_id}'s conversations ended",
                )
            except Exception:  # the other workers' sweepers dispatch and finalise it
                log.exception("dispatch after run %s's conversations ended failed", run_id)
        starting = list(freed.ids) if freed is not None else []
        with self._lock:
            self._held -= len(ended) - len(starting)
        if freed is not None and len(starting) < len(ended):
            starting += self._take_waiting(len(ended) - len(starting), besides=starting)
        return starting


_UNKNOWN = object()  # Pump._run_known: not checked recently

# This worker process's pump (set by runs.worker.tasks); None: `deliver` plays in the caller's thread.
current: Pump | None = None


def deliver(conversation_id: int) -> str:
    """What a conversation's message does: offer it to this worker's pump. Where there is none (an eager
    Celery, a test), play it here."""
    if current is None:
        return execute(conversation_id)
    if heartbeat.stopping.is_set():
        # Delivered while this worker stops: leave it to the others, and send it again, since this message is
        # about to be taken off the queue unplayed.
        recovery.resend([conversation_id])
        return "skipped"
    return "offered" if current.offer(conversation_id) else "busy"


def execute(conversation_id: int) -> str:
    """Play one conversation to its end (or resume it) in this thread, then the ones its end frees a slot for,
    one at a time (a pump of one slot). Returns what happened to the first, for logs and tests."""
    one = Pump(capacity=1)
    one.offer(conversation_id)
    one.serve(until_idle=True)
    return one.outcomes.get(conversation_id, "skipped")


def _nothing() -> None:
    """What `stop` hands the serving thread, to wake it."""
