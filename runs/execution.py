"""Playing one conversation inside a worker, safely repeatable.

The task claims the conversation with a conditional update that bumps `attempt`, the fencing token: every
later write is conditional on it, so a worker that lost its claim cannot write. Stored turns are replayed,
not re-asked, and each new turn is inserted once, unique per (conversation, position). A killed worker's
lease lapses and the sweeper queues the conversation again; the next worker resumes after the last stored
turn. Nothing here retries model calls: engine.clients does, in one place.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, transaction
from django.utils import timezone

from engine.conversation import ResumeMismatch, run_eval
from engine.redact import redact
from engine.results import EvalResult, TurnRecord
from engine.retries import RetryWait
from engine.runner import build_context

from . import services, specs, sql
from .endpoints import build_registry
from .models import ACTIVE, Conversation, Run, Status, Turn

log = logging.getLogger(__name__)


class LostClaim(Exception):
    """Another worker has taken this conversation over; stop without writing anything more."""


def _lease() -> timedelta:
    return timedelta(seconds=settings.EVALSITE_LEASE_SECONDS)


def claim(conversation_id: int) -> sql.Claimed | None:
    """Take the conversation; None if it is not ours to run.

    The update bumps `attempt`; the claim carries the attempt we now own, the fencing token for every later
    write.
    """
    now = timezone.now()
    return sql.claim(conversation_id, now, now + _lease())


class _Heartbeat:
    """One thread per worker process renews the leases of the conversations this process is playing."""

    def __init__(self) -> None:
        self.active: dict[int, int] = {}
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def add(self, conversation_id: int, attempt: int) -> None:
        with self.lock:
            self.active[conversation_id] = attempt
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="evalsite-heartbeat", daemon=True)
                self.thread.start()

    def remove(self, conversation_id: int) -> None:
        with self.lock:
            self.active.pop(conversation_id, None)

    def _loop(self) -> None:
        while True:
            time.sleep(max(0.2, settings.EVALSITE_LEASE_SECONDS / 3))
            with self.lock:
                active = dict(self.active)
            try:
                expires = timezone.now() + _lease()
                for conversation_id, attempt in active.items():
                    Conversation.objects.filter(
                        pk=conversation_id, attempt=attempt, status=Status.RUNNING
                    ).update(lease_expires_at=expires)
            except Exception:  # a database hiccup must not kill the heartbeat; the next beat tries again
                log.exception("lease heartbeat failed")
            finally:
                close_old_connections()


heartbeat = _Heartbeat()


def _store_turn(conversation_id: int, attempt: int, turn: TurnRecord) -> None:
    now = timezone.now()
    try:
        with transaction.atomic():
            stored = sql.store_turn(
                conversation_id,
                attempt,
                position=turn.turn,
                record=turn.model_dump(mode="json"),
                passed=turn.passed,
                now=now,
                lease_until=now + _lease(),
                prompt_tokens=turn.usage.prompt_tokens,
                completion_tokens=turn.usage.completion_tokens,
                judge_tokens=turn.judge_usage.total_tokens,
                user_tokens=turn.user_usage.total_tokens,
                cost=turn.cost + turn.judge_cost + turn.user_cost,
                tokens_estimated=turn.usage.estimated,
            )
            if not stored:
                raise LostClaim()  # rolls the turn back: a worker that lost its claim writes nothing
    except IntegrityError:
        raise LostClaim() from None


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
    if not owned:
        raise LostClaim()  # another worker has it: stop waiting


def _finish(conversation_id: int, attempt: int, result: EvalResult) -> bool:
    return sql.update_owned(
        conversation_id,
        attempt,
        status=result.status,
        kind=result.kind,
        style=result.conversation,
        history=result.history,
        turns_passed=result.turns_passed,
        termination=(result.termination or "")[:300],
        turns_total=result.turns_total,
        passed_on_turn=result.passed_on_turn,
        score=result.score,
        verdict=result.verdict[:300],
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
        finished_at=timezone.now(),
        lease_expires_at=None,
        waiting_until=None,
        waiting_reason="",
    )


def execute(conversation_id: int) -> str:
    """Play one conversation to its end (or resume it). Returns what happened, for logs and tests."""
    claimed = claim(conversation_id)
    if claimed is None:
        return "skipped"
    attempt = claimed.attempt
    heartbeat.add(conversation_id, attempt)
    try:
        try:
            spec, files = specs.suite_with_files(claimed.version_id, claimed.version_sha256)
            ctx, _ = build_context(spec, build_registry(), claimed.model, files)
            ev = spec.evals[claimed.index]
            # Only a resumed conversation (a later attempt) can have turns stored already.
            stored = (
                Turn.objects.filter(conversation_id=conversation_id).order_by("position")
                if attempt > 1
                else []
            )
            prior = [TurnRecord.model_validate(turn.record) for turn in stored]
        except Exception as exc:
            log.exception("conversation %s could not start", conversation_id)
            _fail(conversation_id, attempt, f"could not start: {exc}")
            return "error"

        checked = {"at": time.monotonic()}  # the claim just saw the run active

        def should_stop() -> bool:
            # Looked up at most twice a second: a cancel takes effect within 0.5 s plus the turn in flight.
            now = time.monotonic()
            if now - checked["at"] < 0.5:
                return False
            checked["at"] = now
            return not sql.run_is_active(claimed.run_id)

        try:
            result = run_eval(
                ev,
                claimed.index,
                claimed.eval_id,
                ctx,
                prior=prior,
                on_turn=lambda turn: _store_turn(conversation_id, attempt, turn),
                should_stop=should_stop,
                on_wait=lambda wait: _note_wait(conversation_id, attempt, wait),
            )
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
        _finish(conversation_id, attempt, result)
        return result.status
    finally:
        heartbeat.remove(conversation_id)
        services.conversation_ended(claimed.run_id, claimed.endpoint_name)


def sweep() -> dict[str, int]:
    """Recover what crashed workers left behind. Safe to run anywhere, any number of times at once."""
    now = timezone.now()
    stats = {"requeued": 0, "resent": 0, "finalized": 0}
    # Lapsed leases: the worker playing these died. Queue them again; the next claim resumes them.
    for pk, attempt in Conversation.objects.filter(
        status=Status.RUNNING, lease_expires_at__lt=now, run__status__in=ACTIVE
    ).values_list("pk", "attempt"):
        if Conversation.objects.filter(
            pk=pk, attempt=attempt, status=Status.RUNNING, lease_expires_at__lt=now
        ).update(status=Status.QUEUED, dispatched_at=None, lease_expires_at=None):
            stats["requeued"] += 1
    # Sent but never started for a long while: the message may have died with a worker that prefetched it.
    stale = now - 2 * _lease()
    stats["resent"] = Conversation.objects.filter(
        status=Status.QUEUED, dispatched_at__lt=stale, run__status__in=ACTIVE
    ).update(dispatched_at=None)
    for run_id in Run.objects.filter(status__in=ACTIVE).values_list("pk", flat=True):
        if services.finalize(run_id):
            stats["finalized"] += 1
        else:
            services.dispatch(run_id)
    return stats
