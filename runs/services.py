"""Writes for runs: launch, dispatch, finish, cancel, share.

Dispatch keeps at most `run.concurrency` conversations of a run in flight, and at most the endpoint's cap
across all runs. It is called when a run is launched and whenever a conversation ends, and it sends tasks
only after the transaction that marked them dispatched commits.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from engine import bounds
from engine.clients import MOCK
from engine.history import build_history
from engine.loader import conversation_count
from engine.results import GateResult, evaluate_gates, gated_status
from engine.runner import build_context
from engine.stats import IteratedResult, iterated_results
from suites.models import SuiteVersion

from . import specs, sql
from .endpoints import build_registry
from .models import ACTIVE, Conversation, Run, ShareLink, Status

MAX_CONCURRENCY = settings.EVALSITE_MAX_RUN_CONCURRENCY


class LaunchError(Exception):
    """The run cannot start; the message says why."""


@transaction.atomic
def create_run(
    *, version: SuiteVersion, user, model: str | None = None, concurrency: int | None = None
) -> Run:
    # Stored versions were validated when saved; a text that no longer validates still raises SuiteError.
    spec, files = specs.suite_with_files(version.pk, version.sha256)
    model_ref = (model or "").strip() or spec.model
    if not model_ref:
        raise LaunchError("the suite names no model; choose one to run against")
    registry = build_registry()
    try:
        _, endpoint_name = build_context(spec, registry, model_ref)
    except Exception as exc:  # an unknown endpoint and the like: say so before anything is stored
        raise LaunchError(str(exc)) from None
    total = conversation_count(spec)
    if total > bounds.MAX_CONVERSATIONS_PER_RUN:  # saved before the cap was lowered: nothing is created
        raise LaunchError(
            f"v{version.number} would play {total:,} conversations; at most "
            f"{bounds.MAX_CONVERSATIONS_PER_RUN:,} are allowed a run (EVALSITE_MAX_CONVERSATIONS_PER_RUN). "
            "Lower `iterations` or split the evals or the dataset."
        )
    concurrency = max(1, min(concurrency or 10, MAX_CONCURRENCY))
    run = Run.objects.create(
        suite_version=version,
        created_by=user,
        model=model_ref,
        endpoint_name=endpoint_name,
        is_mock=endpoint_name == MOCK,
        concurrency=concurrency,
    )
    sql.insert_conversations(run.pk, _conversation_rows(spec, files))
    transaction.on_commit(lambda: dispatch(run.pk))
    return run


def _conversation_rows(spec, files: dict[str, str]) -> Iterator[dict]:
    """A new run's conversations, one at a time: every iteration of an eval is its own conversation."""
    for index, ev in enumerate(spec.evals):
        common = {
            "index": index,
            "eval_id": spec.eval_id(index),
            "prompt": ev.first_text,
            "style": ev.style,
            "history": build_history(None, ev.messages, files)[1] if ev.messages else [],
        }
        for iteration in range(ev.iterations or spec.iterations):
            yield {**common, "iteration": iteration}


def _endpoint_cap(endpoint_name: str) -> int | None:
    """Conversations allowed in flight on this endpoint across runs; None for the mock (no limit)."""
    if endpoint_name == MOCK:
        return None
    endpoint = build_registry().endpoint(endpoint_name)
    return endpoint.max_concurrency if endpoint else 1


_run_limits: dict[object, tuple[str, int]] = {}


def dispatch(run_id) -> int:
    """Send tasks for as many queued conversations as the run's and the endpoint's limits allow.

    Dispatches on one endpoint are serialised, so two of them cannot both count a free slot: on
    PostgreSQL by the endpoint's advisory lock, on SQLite by the write lock every transaction takes first
    (BEGIN IMMEDIATE, see settings).
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
        for pk in ids:  # committed already
            run_conversation.delay(pk)
        return len(ids)
    with transaction.atomic():
        ids = sql.dispatch_next(run_id, endpoint_name, concurrency, cap, timezone.now(), lock_key=lock_key)
        if ids:
            transaction.on_commit(lambda: [run_conversation.delay(pk) for pk in ids])
    return len(ids)


def dispatch_endpoint(endpoint_name: str, exclude=None) -> None:
    """A slot on an endpoint freed up and its own run had no use for it: waiting runs (oldest first) take it."""
    if _endpoint_cap(endpoint_name) is None:
        return  # no shared cap, so no run can be waiting on another's slot
    for run_id in sql.runs_waiting_on(endpoint_name, exclude):
        if dispatch(run_id) == 0:
            break


def status_counts(run: Run) -> dict[str, int]:
    rows = run.conversations.values("status").annotate(n=Count("pk"))
    counts = {status: 0 for status in Status.values}
    counts.update({row["status"]: row["n"] for row in rows})
    return counts


def finalize(run_id) -> bool:
    """If every conversation has ended, give the run its final status. True when this call ended it."""
    if sql.has_unfinished(sql.run_key(run_id)):
        return False  # the common case while a run is going, answered by one cheap query
    run = Run.objects.filter(pk=run_id).first()
    if run is None or not run.is_active:
        return False
    counts = status_counts(run)
    if counts[Status.QUEUED] or counts[Status.RUNNING]:
        return False
    conversations = list(
        Conversation.objects.filter(run=run).only(
            "index", "iteration", "status", "score", "turn_count", "termination", "kind", "run_id"
        )
    )
    if counts[Status.CANCELLED] and not counts[Status.FAILED] and not counts[Status.ERROR]:
        final = Status.CANCELLED  # as engine.stats.overall_status: cancelled unless something failed
    else:
        # As the CLI decides: errors and failures of single evals count; repeated evals count by their pass
        # rate; gates, when the suite has them, decide by aggregate numbers.
        final = gated_status(conversations, gate_results(run), iterated_for(run, conversations))
    now = timezone.now()
    updated = Run.objects.filter(pk=run_id, status__in=ACTIVE).update(
        status=final, finished_at=now, started_at=run.started_at or now
    )
    return bool(updated)


def iterated_for(run: Run, conversations: list[Conversation]) -> list[IteratedResult]:
    """Statistics for the evals this run repeated ([] when none was)."""
    if not any(conversation.iteration for conversation in conversations):
        return []
    spec = specs.iteration_spec(run.suite_version)
    return iterated_results(spec, conversations) if spec is not None else []


def gate_results(run: Run) -> list[GateResult]:
    """The suite's gates over this run's eval scores ([] when the suite has none)."""
    gates = specs.suite_gates(run.suite_version)
    if not gates:
        return []
    return evaluate_gates(gates, list(Conversation.objects.filter(run=run).only("status", "score", "run_id")))


def conversation_ended(run_id, endpoint_name: str) -> None:
    """A conversation reached its end: its slot goes to the next conversation of the same run; if the run
    has none left waiting, the run may be over, and the slot goes to other runs on the endpoint."""
    if dispatch(run_id) == 0:
        finalize(run_id)
        dispatch_endpoint(endpoint_name, exclude=run_id)


@transaction.atomic
def cancel(run: Run) -> bool:
    now = timezone.now()
    updated = Run.objects.filter(pk=run.pk, status__in=ACTIVE).update(
        status=Status.CANCELLED, finished_at=now
    )
    if updated:
        # Running conversations see the run's status before their next turn and stop there.
        run.conversations.filter(status=Status.QUEUED).update(status=Status.CANCELLED, finished_at=now)
        transaction.on_commit(lambda: dispatch_endpoint(run.endpoint_name))
    return bool(updated)


class RetryRefused(Exception):
    """The run's errored conversations cannot be retried now; the message says why."""


def retry_errored(run: Run) -> int:
    """Send a finished run's errored conversations back to the queue; each resumes after its last stored
    turn (a later claim replays the stored turns). The run is running again until they end, when finalize
    gives it its status afresh. Returns how many were queued."""
    if run.status == Status.CANCELLED:
        raise RetryRefused("a cancelled run is not resumed; run it again instead")
    with transaction.atomic():
        # The run first: of two retries at once, only the one that moved it back to running goes on.
        reopened = Run.objects.filter(
            pk=run.pk, status__in=(Status.PASSED, Status.FAILED, Status.ERROR)
        ).update(status=Status.RUNNING, finished_at=None)
        if not reopened:
            raise RetryRefused("the run is still going; wait for it to finish")
        count = run.conversations.filter(status=Status.ERROR).update(
            status=Status.QUEUED,
            error="",
            verdict="",
            reason="",
            score=None,
            passed_on_turn=None,
            termination="",
            termination_kind="",
            termination_detail="",
            turns_passed=None,
            turns_total=None,
            dispatched_at=None,
            finished_at=None,
            lease_expires_at=None,
            waiting_until=None,
            waiting_reason="",
        )
        if not count:  # raising rolls the reopening back
            raise RetryRefused("the run has no errored conversations")
        transaction.on_commit(lambda: dispatch(run.pk))
    run.refresh_from_db(fields=["status", "finished_at"])
    return count


def create_share_link(run: Run, user) -> ShareLink:
    return ShareLink.objects.create(run=run, created_by=user)


def revoke_share_link(link: ShareLink) -> None:
    if link.revoked_at is None:
        ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
