"""One conversation as a worker's pump plays it: what it is set up with (its suite, code runner, stored turns,
a re-grade's replay), its state while it plays, and its loop's callbacks into the pump.

Stored turns are replayed, not re-asked, so a conversation taken over resumes after its last stored turn.
Nothing here retries model calls: engine.clients does, in one place.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Protocol

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from engine.cache import playing_iteration, roles_of
from engine.calls import Calls, Latencies, watching
from engine.codegrade.run import CodeRunner
from engine.conversation import run_eval_async
from engine.results import EvalResult, TurnRecord
from engine.retries import RetryWait
from engine.runner import build_context, is_refused_alike, refused_alike
from runs import outage, response_cache, specs
from runs.models import Conversation, Turn
from suites.models import SuiteFile

from . import budget, sql
from .claims import LostClaim, heartbeat
from .stopping import stop_for_refusal

log = logging.getLogger(__name__)


class StartFailed(Exception):
    """A claimed conversation could not be set up to play (its suite, its endpoint, its stored turns)."""


class Playing:
    """A conversation the pump is playing: its claim, whether a note of a wait found the claim taken, the
    write of its latest turn until the next turn or the end confirms it, its model calls in flight, and when
    the slow one noted on its row went out (time.monotonic; None: none noted)."""

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


class Serving(Protocol):
    """What a conversation's loop asks of the pump that plays it."""

    async def why_stopped(self, run_id) -> str | None: ...

    async def call(self, fn: Callable, *args): ...

    def store(self, conversation_id: int, attempt: int, turn: TurnRecord) -> concurrent.futures.Future: ...

    def post(self, fn: Callable, *args) -> None: ...


def play(pump: Serving, playing: Playing, registry) -> Coroutine:
    """The conversation's loop, ready to run on the event loop, with its callbacks into `pump`."""
    claimed = playing.claimed
    conversation_id, attempt, run_id = claimed.conversation_id, claimed.attempt, claimed.run_id
    spec = specs.with_options(specs.bound(claimed.version, claimed.run_vars), claimed.run_options)
    store = response_cache.store() if roles_of(spec) else None  # the cache every worker shares
    ctx, _ = build_context(
        spec,
        registry,
        claimed.model,
        asynchronous=True,
        code=_code_runner(claimed.version, spec),
        store=store,
    )
    # Only a resumed conversation (a later attempt) can have turns stored already.
    stored = Turn.objects.filter(conversation_id=conversation_id).order_by("position") if attempt > 1 else []
    prior = [TurnRecord.model_validate(turn.record) for turn in stored]
    replay = _replay(claimed) if claimed.regraded_from is not None else None
    limit = spec.max_cost

    async def should_stop() -> bool | str:
        """Asked before each model call: False plays on; True, or why in words, stops the conversation."""
        if not playing.still_ours():
            return True
        try:
            if limit is not None:
                why = await over_limit()
                if why:
                    return why
            why = await pump.why_stopped(run_id)
        except Exception as exc:
            if not outage.unavailable(exc):
                raise
            return False  # the database is away: play on, and ask again after the next turn
        return False if why is None else (why or True)

    async def over_limit() -> bool | str:
        why = budget.reached(run_id, limit)  # by this worker's own turns, stored yet or not
        if why or not budget.near(run_id, limit):
            return why
        # Near the limit the last turn is stored and the run summed before the next call, so that no call
        # starts once the run's spend has reached it, whichever worker's turn reached it.
        if playing.storing is not None and not await asyncio.wrap_future(playing.storing):
            return True  # the claim is lost: its turn's write said so, as the next turn's would
        return await pump.call(budget.confirm, run_id, limit)

    def over_limit_with(pending: float) -> str:
        """Asked in a grading thread before each judge's call, with what the turn has spent so far."""
        return budget.reached_with(run_id, limit, pending)

    async def on_turn(turn: TurnRecord) -> None:
        if limit is not None:
            budget.played(run_id, limit, turn.spent)  # spent now, before its write: see should_stop
        # The turn's write goes to the pump's next round while the conversation goes on to its next model
        # call; the write is confirmed before the next turn's (turns are stored in order, each only while the
        # claim is ours) or, for the last turn, before the end. A worker killed in between loses the turn and
        # the call in flight, as one killed during a call: the next claim replays from the last stored turn.
        storing, playing.storing = playing.storing, None
        if storing is not None:
            # Written, as a rule, while the model answered: read at once, without a hop through the loop.
            stored = storing.result() if storing.done() else await asyncio.wrap_future(storing)
            if not stored:
                raise LostClaim()
        playing.storing = pump.store(conversation_id, attempt, turn)

    def on_wait(wait: RetryWait) -> None:  # in the pump's thread
        try:
            note_wait(conversation_id, attempt, wait)
        except LostClaim:
            playing.lost.set()  # the wait stops at its next slice

    return _watched(
        playing.calls,
        _stopping_on_refusal(pump, run_id, ctx.refusals),
        claimed.iteration,
        run_eval_async(
            spec.evals[claimed.index],
            claimed.index,
            claimed.eval_id,
            ctx,
            prior=prior,
            on_turn=on_turn,
            should_stop=should_stop,
            on_wait=lambda wait: pump.post(on_wait, wait),
            given=(claimed.system, claimed.history),  # as launch built them: never built again
            replay=replay,
            over_limit=over_limit_with if limit is not None else None,
        ),
    )


async def _watched(
    calls: Calls,
    refused: Callable[[EvalResult], Awaitable[EvalResult]],
    iteration: int,
    conversation: Coroutine,
):
    """The conversation, its model calls noted in `calls` and cached as its iteration's (set here: the task
    running it has its own context); then what `refused` makes of its result."""
    with watching(calls), playing_iteration(iteration):
        result = await conversation
    return await refused(result)


def _stopping_on_refusal(pump: Serving, run_id, refusals) -> Callable[[EvalResult], Awaitable[EvalResult]]:
    """Stops the run once its endpoint refused a setting: every later conversation would be refused too. The
    conversation whose refusal stopped it keeps its error, which says the refusal; one refused the same way
    after the run had stopped for it is stopped there (engine.runner.refused_alike), as on the command line."""

    async def refused(result: EvalResult) -> EvalResult:
        if refusals is None or refusals.first is None:
            return result
        reason = str(refusals.first)
        try:
            said = await pump.call(stop_for_refusal, run_id, reason)
        except Exception:  # the run stays as it was; the conversation keeps its error, which says it
            log.exception("run %s could not be stopped for its refused setting", run_id)
            return result
        return refused_alike(result, reason) if said and is_refused_alike(result, reason) else result

    return refused


def note_wait(conversation_id: int, attempt: int, wait: RetryWait) -> None:
    """A model call is waiting to retry: say so on the run page until the next turn is stored. The heartbeat
    keeps renewing the lease meanwhile."""
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


def _replay(claimed: sql.Claimed) -> list[TurnRecord]:
    """The stored turns a re-grade replays: the source run's conversation of the same eval and iteration.
    One that is missing or ended in error has nothing to re-grade: the engine says it diverged at its first
    turn past them."""
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
