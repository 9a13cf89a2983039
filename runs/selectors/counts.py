"""Counts and sums over a run's conversations: the progress bar, the counts by status, and each repeated eval's
iterations by outcome, each in one aggregate query whatever the run's size; and the live workers that can play
them, with their slots."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from ..models import ACTIVE, FINISHED, Conversation, Run, Status, Worker

OUTCOME_STATUSES = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.RUNNING)


def _outcome() -> dict[str, int]:
    return {"total": 0, "unfinished": 0, **dict.fromkeys(OUTCOME_STATUSES, 0)}


def repeated_outcomes(run: Run, indexes: Iterable[int]) -> dict[int, dict[str, int]]:
    """Per repeated eval, how many of its iterations passed, failed, errored, were cancelled or are still
    going (the header's counts and the flaky evals need no row)."""
    by_status = {status: Count("pk", filter=Q(status=status)) for status in OUTCOME_STATUSES}
    rows = (
        run.conversations.filter(index__in=list(indexes))
        .order_by()
        .values("index")
        .annotate(total=Count("pk"), unfinished=Count("pk", filter=Q(status__in=ACTIVE)), **by_status)
    )
    return {row.pop("index"): row for row in rows}


def status_counts(run: Run) -> dict[str, int]:
    rows = run.conversations.values("status").annotate(n=Count("pk"))
    counts = {status: 0 for status in Status.values}
    counts.update({row["status"]: row["n"] for row in rows})
    return counts


def live_workers() -> dict[str, int]:
    """The worker processes beating now (as the workers' sweepers count them alive) and the conversations they
    play at once in all: {"count": 2, "slots": 100}. A worker that did not say its slots counts none."""
    since = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_DEAD_SECONDS)
    found = Worker.objects.filter(beat_at__gte=since).aggregate(count=Count("pk"), slots=Sum("slots"))
    return {"count": found["count"], "slots": found["slots"] or 0}


def playing() -> int:
    """The conversations workers play now, of every run: with live_workers' slots, how many are free."""
    # The in-flight index's own condition, which SQLite needs written out to use it, then the running ones.
    in_flight = Conversation.objects.filter(
        dispatched_at__isnull=False, status__in=[Status.QUEUED, Status.RUNNING]
    )
    return in_flight.filter(status=Status.RUNNING).count()


def stored_progress(run: Run, by_eval: bool) -> dict | None:
    """The progress aggregate stored on the run when it ended (Run.summary), if it still holds: the run's
    status and revision are those it was made for. None otherwise."""
    stored = run.summary or {}
    if (
        stored.get("status") != run.status
        or stored.get("revision") != run.revision
        or stored.get("by_eval") != by_eval
    ):
        return None
    progress = dict(stored["progress"])
    if by_eval:  # JSON keeps the eval indexes as strings
        progress["by_eval"] = {int(index): outcome for index, outcome in progress["by_eval"].items()}
    return progress


def progress(run: Run, by_eval: bool = False) -> dict:
    """Everything the progress bar shows: one scan of the run's conversations for the counts and sums, and
    two small reads, of its running conversations for those waiting to retry a model call and of the
    partial index of its overridden ones, which would slow the scan down if it read them. `by_eval`: the scan
    grouped by eval as well, so that it gives repeated_outcomes for every eval, under "by_eval" (a suite that
    repeats every eval)."""
    groups = ("index", "status") if by_eval else ("status",)
    rows = (
        run.conversations.order_by()
        .values(*groups)
        .annotate(
            n=Sum(1),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            judge_tokens=Sum("judge_tokens"),
            user_tokens=Sum("user_tokens"),
            cost=Sum("cost"),
            turns=Sum("turn_count"),
            cached_calls=Sum("cached_calls"),
            saved_cost=Sum("saved_cost"),
            unplayed=Count("pk", filter=Q(turn_count=0)),
        )
    )
    counts = {status: 0 for status in Status.values}
    not_started = 0
    totals = {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "judge_tokens": 0,
        "user_tokens": 0,
        "cost": 0.0,
        "turns": 0,
        "cached_calls": 0,
        "saved_cost": 0.0,
    }
    outcomes: dict[int, dict[str, int]] = {}
    for row in rows:
        counts[row["status"]] += row["n"]
        if row["status"] == Status.CANCELLED:
            not_started += row["unplayed"]
        for key in totals:
            totals[key] += row[key] or 0
        if by_eval:
            outcome = outcomes.setdefault(row["index"], _outcome())
            outcome["total"] += row["n"]
            outcome["unfinished"] += row["n"] if row["status"] in ACTIVE else 0
            if row["status"] in outcome:
                outcome[row["status"]] += row["n"]
    # Of the running conversations, in one read: a model call waiting to retry (until a time still to come),
    # and one the model has sat on for longer than usual (noted by its worker).
    now = timezone.now()
    retrying = Q(waiting_until__gt=now)
    slow = Q(calling_since__isnull=False)
    wait = (
        run.conversations.filter(status=Status.RUNNING)
        .filter(retrying | slow)
        .aggregate(
            count=Count("pk", filter=retrying),
            reason=Max("waiting_reason", filter=retrying),
            until=Min("waiting_until", filter=retrying),
            calling=Count("pk", filter=slow),
            calling_since=Min("calling_since"),
        )
    )
    total = sum(counts.values())
    done = sum(counts[status] for status in FINISHED)
    # While conversations wait to play, who can play them: none at all, or fewer at once than the run asks, or
    # slots all taken, some by other runs.
    workers = (
        {**live_workers(), "playing": playing()} if counts[Status.QUEUED] and run.status in ACTIVE else None
    )
    return {
        "counts": counts,
        "total": total,
        "done": done,
        "percent": round(100 * done / total) if total else 100,
        "tokens": totals["prompt_tokens"] + totals["completion_tokens"],
        **totals,
        # Of the cancelled, those that never played a turn: a run stopped short (its cost limit) never started
        # them, where the others stopped mid-way.
        "not_started": not_started,
        "overridden": run.conversations.exclude(original={}).count(),
        # How many wait to retry a model call, one reason, and the soonest retry.
        "waiting": {"count": wait["count"], "reason": wait["reason"] or "", "until": wait["until"]},
        # How many conversations have a model call out for longer than usual, and since when the longest.
        "calling": {
            "count": wait["calling"],
            "since": wait["calling_since"],
            "seconds": int((now - wait["calling_since"]).total_seconds()) if wait["calling_since"] else 0,
        },
        "workers": workers,
        **({"by_eval": outcomes} if by_eval else {}),
    }
