"""Reads for runs, scoped to the user (someone else's run is a 404) or to an active share link."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Max, Min, Q, QuerySet, Sum
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from engine.results import EvalResult, RunReport, RunTotals, SuiteRef, Totals, TurnRecord

from . import services
from .models import ACTIVE, FINISHED, Conversation, Run, ShareLink, Status


def runs_for(user) -> QuerySet[Run]:
    return Run.objects.filter(created_by=user).select_related("suite_version__suite", "created_by")


def with_counts(runs: Iterable[Run]) -> list[Run]:
    """The runs of a page (already cut to it), each with its conversations counted by status, in one query
    over the (run, status) index.

    Counting in the list query itself joined every conversation of every run of the user before the page
    was cut, once for the page and once more for the paginator's count: 6.5 s for the runs list with
    200,000 conversations stored on SQLite, and past a proxy's timeout with the 3,000,000 of one unbounded
    run.
    """
    runs = list(runs)
    counts: dict = {run.pk: {} for run in runs}
    rows = (
        Conversation.objects.filter(run__in=[run.pk for run in runs])
        .order_by()
        .values_list("run_id", "status")
        .annotate(n=Count("pk"))
    )
    for run_id, status, n in rows:
        counts[run_id][status] = n
    for run in runs:
        by_status = counts[run.pk]
        run.conversation_count = sum(by_status.values())
        run.passed_count = by_status.get(Status.PASSED, 0)
        run.failed_count = by_status.get(Status.FAILED, 0)
        run.error_count = by_status.get(Status.ERROR, 0)
        # Still talking to the model: a cancelled run has some until their current turn ends.
        run.in_flight_count = sum(by_status.get(status, 0) for status in ACTIVE)
    return runs


def get_run_for_user(user, run_id) -> Run:
    return get_object_or_404(runs_for(user), pk=run_id)


class ShareLinkGone(Http404):
    """The token names no active share link: it was revoked, or never existed."""


def get_shared_run(token: str) -> tuple[Run, ShareLink]:
    link = (
        ShareLink.objects.select_related("run__suite_version__suite")
        .filter(token=token, revoked_at__isnull=True)
        .first()
    )
    if link is None:
        raise ShareLinkGone("no active share link with this token")
    return link.run, link


def get_conversation(run: Run, index: int, iteration: int = 0) -> Conversation:
    return get_object_or_404(run.conversations.all(), index=index, iteration=iteration)


def progress(run: Run) -> dict:
    """Everything the progress bar shows, in two queries."""
    now = timezone.now()
    waiting = Q(status=Status.RUNNING, waiting_until__gt=now)  # a model call waiting to retry
    rows = run.conversations.values("status").annotate(
        n=Sum(1),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        judge_tokens=Sum("judge_tokens"),
        user_tokens=Sum("user_tokens"),
        cost=Sum("cost"),
        turns=Sum("turn_count"),
        waiting=Count("pk", filter=waiting),
        next_retry=Min("waiting_until", filter=waiting),
        waiting_reason=Max("waiting_reason", filter=waiting),
    )
    counts = {status: 0 for status in Status.values}
    totals = {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "judge_tokens": 0,
        "user_tokens": 0,
        "cost": 0.0,
        "turns": 0,
    }
    wait = {"count": 0, "reason": "", "until": None}
    for row in rows:
        counts[row["status"]] = row["n"]
        for key in totals:
            totals[key] += row[key] or 0
        if row["waiting"]:
            wait = {"count": row["waiting"], "reason": row["waiting_reason"], "until": row["next_retry"]}
    total = sum(counts.values())
    done = sum(counts[status] for status in FINISHED)
    return {
        "counts": counts,
        "total": total,
        "done": done,
        "percent": round(100 * done / total) if total else 100,
        "tokens": totals["prompt_tokens"] + totals["completion_tokens"],
        **totals,
        "waiting": wait,  # how many wait to retry a model call, one reason, and the soonest retry
    }


def turn_records(conversation: Conversation) -> list[TurnRecord]:
    return [TurnRecord.model_validate(turn.record) for turn in conversation.turns.all()]


def eval_result(conversation: Conversation, turns: list[TurnRecord] | None = None) -> EvalResult:
    turns = turn_records(conversation) if turns is None else turns
    return EvalResult(
        index=conversation.index,
        id=conversation.eval_id,
        kind=conversation.kind if conversation.kind in ("single-turn", "multi-turn") else "single-turn",
        conversation=conversation.style,
        iteration=conversation.iteration,
        termination=conversation.termination or None,
        termination_kind=conversation.termination_kind or None,
        termination_detail=conversation.termination_detail or None,
        prompt=conversation.prompt,
        status=conversation.status,
        score=conversation.score,
        passed_on_turn=conversation.passed_on_turn,
        verdict=conversation.verdict or conversation.status,
        reason=conversation.reason or conversation.verdict or conversation.status,
        error=conversation.error or None,
        history=conversation.history,
        turns=turns,
        turns_passed=conversation.turns_passed,
        turns_total=conversation.turns_total,
        per_turn_grades=[turn.grade for turn in turns if turn.grade is not None],
        totals=Totals.of(turns),
    )


def report(run: Run) -> RunReport:
    """The run as the documented JSON results format, the same shape `evalrun --json` writes."""
    conversations = list(run.conversations.prefetch_related("turns"))
    evals = [eval_result(conversation, turn_records(conversation)) for conversation in conversations]
    duration = run.elapsed.total_seconds() if run.elapsed else None
    version = run.suite_version
    return RunReport(
        suite=SuiteRef(name=version.suite.name, version=version.number, sha256=version.sha256),
        model=run.model,
        endpoint=run.endpoint_name,
        mock=run.is_mock,
        status=run.status,
        gates=services.gate_results(run),
        iterated=services.iterated_for(run, conversations),
        evals=evals,
        totals=RunTotals.of(evals, duration_s=round(duration, 3) if duration is not None else None),
    )
