"""Stopping a run for a reason of its own: the cancel transition (queued conversations cancelled, those playing
stop before their next turn, finished ones kept) with the reason in Run.stop_reason, which the run's page shows.

The workers stop a run here when its endpoint refuses a generation setting (engine.clients.settings): every
conversation after it would be refused the same way."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from runs.models import ACTIVE, Run, Status

from .scheduling import cancel_queued, dispatch_endpoint

REASON_LENGTH = Run._meta.get_field("stop_reason").max_length


def stop_run(run_id, reason: str) -> bool:
    """Stop the run, if it is still active, giving `reason`; whether this call stopped it."""
    now = timezone.now()
    reason = _fitted(reason)
    with transaction.atomic():
        updated = Run.objects.filter(pk=run_id, status__in=ACTIVE).update(
            status=Status.CANCELLED, finished_at=now, stop_reason=reason
        )
        if updated:
            run = Run.objects.only("endpoint_name").get(pk=run_id)
            cancel_queued(run_id, now, reason=reason)
            transaction.on_commit(lambda: dispatch_endpoint(run.endpoint_name))
    return bool(updated)


def stop_for_refusal(run_id, reason: str) -> bool:
    """Stop the run for a setting its endpoint refused (`reason` says which); whether another conversation's
    refusal had stopped it for the same reason already, and so said it. False when this call stopped it, and
    when the run had ended or stopped for another reason (a cancel, its cost limit)."""
    if stop_run(run_id, reason):
        return False
    return Run.objects.filter(pk=run_id, stop_reason=_fitted(reason)).exists()


def _fitted(reason: str) -> str:
    """The reason as Run.stop_reason keeps it."""
    return reason if len(reason) <= REASON_LENGTH else reason[: REASON_LENGTH - 1] + "…"
