"""A run's cost limit (`max_cost`, the suite's or its launch's) as the workers keep it.

Whenever conversations of a run with a limit end on a worker, before the slots they freed are filled, the
worker sums what the run's conversations have spent (Conversation.cost, which grows turn by turn), at most
every CHECK_SECONDS per run. Once the spend reaches the limit it stops the run: its queued conversations are
cancelled, so no worker can claim them, and the run says why (Run.stop_reason). Conversations already playing
finish and are kept; when the last has ended the run is finalised as cancelled (scheduling.final_status).
Every worker playing the run checks, so one worker or many stop it alike; a run without a limit costs a dict
lookup per ended conversation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from engine.cost import limit_reached
from runs import outage, specs
from runs.models import ACTIVE, Conversation, Run

from . import scheduling, sql
from .sql import Claimed

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # a run's spend is summed at most this often by one worker
_LIMITS_KEPT = 1000

_limits: dict[object, float | None] = {}  # run -> its limit (None: none); a run's options never change
_checked: dict[object, float] = {}  # run -> when this process last summed its spend


def limit_of(claimed: Claimed) -> float | None:
    """The run's cost limit: the suite's `max_cost` with its launch's options over it, read once per run."""
    run_id = claimed.run_id
    if run_id not in _limits:
        if len(_limits) >= _LIMITS_KEPT:
            _limits.clear()
            _checked.clear()
        spec = specs.with_options(specs.bound(claimed.version, claimed.run_vars), claimed.run_options)
        _limits[run_id] = spec.max_cost
    return _limits[run_id]


def check(ended: Iterable[Claimed]) -> list:
    """Stop each run of these ended conversations whose spend has reached its limit (the runs it stopped). A
    failed check is logged, never raised: the next end checks again."""
    now = time.monotonic()
    due: dict[object, float] = {}
    for claimed in ended:
        try:
            limit = limit_of(claimed)
        except Exception:  # an unreadable suite stops its conversation elsewhere
            log.exception("run %s: its cost limit could not be read", claimed.run_id)
            continue
        if limit is not None and now - _checked.get(claimed.run_id, 0.0) >= CHECK_SECONDS:
            due[claimed.run_id] = limit
    if not due:
        return []
    try:
        spent = spend(list(due))
        for run_id in due:
            _checked[run_id] = now
        return [
            run_id for run_id, limit in due.items() if spent.get(run_id, 0.0) >= limit and stop(run_id, limit)
        ]
    except Exception as exc:
        if not outage.unavailable(exc):
            log.exception("checking the cost limits of runs %s failed", list(due))
        return []


def spend(run_ids: list) -> dict:
    """What each run's conversations have spent so far, in USD, in one query; keyed as the database keeps a run's
    id (sql.run_key), whatever form the ids came in."""
    rows = (
        Conversation.objects.filter(run_id__in=run_ids)
        .values("run_id")
        .annotate(spent=Sum("cost"))
        .values_list("run_id", "spent")
    )
    return {sql.run_key(run_id): spent or 0.0 for run_id, spent in rows}


def stop(run_id, limit: float) -> bool:
    """The run reached its limit: cancel its queued conversations and say why on the run. True when this call
    stopped it (another worker may have first)."""
    reason = limit_reached(limit)
    now = timezone.now()
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, status__in=ACTIVE, stop_reason="").exists():
            return False
        # A run whose every conversation has started has nothing left to stop: it ends as it plays.
        if not scheduling.cancel_queued(run_id, now, reason=reason):
            return False
        Run.objects.filter(pk=run_id).update(stop_reason=reason)
    log.info("run %s: %s; its queued conversations are cancelled", run_id, reason)
    scheduling.finalize(run_id)  # nothing may be playing any more
    return True
