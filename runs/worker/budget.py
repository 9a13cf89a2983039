"""A run's cost limit (`max_cost`, the suite's or its launch's) as the workers keep it.

The database is the truth: a run's spend is the sum of its conversations' cost, which grows as each turn is
stored (runs.worker.sql_turns) and takes the graders that judge after the last turn at the end. A worker sums
it (`spend`, one query for every run due) in the rounds where it stored turns of the run or ended conversations
of it, and adds what its own conversations have played since, which it knows before their turns are stored
(`played`): a limit reached by this worker's turns is seen at once, one reached by another worker's at this
worker's next sum.

Far from the limit a run is summed at most every CHECK_SECONDS by one worker, and a conversation goes on to its
next model call while its last turn is being stored. Near it (the spend, with what the run spends in
NEAR_SECONDS at its recent rate, would reach it; or that rate is not known yet) the run is summed in every
round that stores turns of it, and a conversation waits for its turn to be stored and summed before its next
call (`confirm`). So once the spend reaches the limit no call starts on any worker: the run passes its limit by
at most the calls out at that moment, one per conversation playing. Between the calls that grade one turn (its
judges'), what this process knows already is asked, with what the turn has spent so far (`reached_with`): no
sum is made there.

Once the spend reaches the limit the run is stopped (`stop`): its queued conversations are cancelled, so no
worker can claim them, and the run says why (Run.stop_reason); every worker's conversations of it stop before
their next model call, cancelled with their turns kept (runs.worker.pump.Pump.why_stopped). When the last has
ended the run is finalised as cancelled (scheduling.final_status). A run without a limit costs a dict lookup
per turn and per ended conversation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from engine.cost import limit_reached
from runs import outage, specs
from runs.models import ACTIVE, Conversation, Run

from . import scheduling, sql
from .sql import Claimed

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # far from its limit, a run's spend is summed at most this often by one worker
NEAR_SECONDS = 2 * CHECK_SECONDS  # near: what the run spends in this long, at its recent rate, would reach it
_LIMITS_KEPT = 1000
clock = time.monotonic  # what sums are timed by (a test sets its own)

_limits: dict[object, float | None] = {}  # run -> its limit (None: none); a run's options never change


@dataclass
class _Spend:
    """What this worker process knows of a run's spend. `base` and the rate come from the database's sums;
    `unsummed` is what this process's conversations have played that the last sum did not see (added on the
    event loop as each turn is played), `written` what of it the pump has stored since."""

    limit: float
    reason: str  # the limit in words, for the run and its conversations
    base: float | None = None  # the last sum (None: not summed yet)
    summed_at: float = 0.0  # when, by `clock`
    unsummed: float = 0.0
    written: float = 0.0
    rate: float | None = None  # USD a second, between two sums at least CHECK_SECONDS apart
    rated_at: float = 0.0
    rated_spend: float = 0.0
    reached: bool = False  # the spend has reached the limit
    stop_tried: bool = False  # and this process has stopped the run, or found it stopped

    def estimate(self) -> float:
        return (self.base or 0.0) + self.unsummed

    def near(self) -> bool:
        if self.base is None or self.rate is None:
            return True
        return self.estimate() + self.rate * NEAR_SECONDS >= self.limit


_spends: dict[object, _Spend] = {}  # run -> what this process knows of its spend, for runs with a limit
_lock = threading.Lock()  # _spends is read and changed on the event loop and in the pump's thread


def limit_of(claimed: Claimed) -> float | None:
    """The run's cost limit: the suite's `max_cost` with its launch's options over it, read once per run."""
    run_id = claimed.run_id
    if run_id not in _limits:
        if len(_limits) >= _LIMITS_KEPT:
            _limits.clear()
        spec = specs.with_options(specs.bound(claimed.version, claimed.run_vars), claimed.run_options)
        _limits[run_id] = spec.max_cost
    return _limits[run_id]


def _spend_of(run_id, limit: float) -> _Spend:
    """The run's entry, made at its first use; called with _lock held."""
    spend = _spends.get(run_id)
    if spend is None:
        if len(_spends) >= _LIMITS_KEPT:
            _spends.clear()  # the runs still playing start again from their next sum
        spend = _spends[run_id] = _Spend(limit, limit_reached(limit))
    return spend


# --- on the event loop, as a conversation plays ------------------------------------------------------------


def played(run_id, limit: float, cost: float) -> None:
    """A turn of the run was played here and costs `cost`: counted before its write, which follows."""
    with _lock:
        _spend_of(run_id, limit).unsummed += cost


def reached(run_id, limit: float) -> str:
    """The limit in words once this process knows the run's spend has reached it ("" until then): by its last
    sum and its own turns played since."""
    with _lock:
        spend = _spend_of(run_id, limit)
        if not spend.reached and spend.estimate() >= limit:
            spend.reached = True  # turns played are spent, stored yet or not
        return spend.reason if spend.reached else ""


def reached_with(run_id, limit: float, pending: float) -> str:
    """reached(), with `pending` more spent: what the turn being graded has spent so far, asked before each of
    its judges' calls (engine.meter) in a grading thread, where no sum can be awaited."""
    with _lock:
        spend = _spend_of(run_id, limit)
        return spend.reason if spend.reached or spend.estimate() + pending >= limit else ""


def near(run_id, limit: float) -> bool:
    """Whether the run's next turns may reach its limit before the next sum would see it (_Spend.near)."""
    with _lock:
        return _spend_of(run_id, limit).near()


# --- in the pump's thread ----------------------------------------------------------------------------------


def confirm(run_id, limit: float) -> str:
    """reached(), after summing the run again unless the last sum saw every turn this process has stored: asked
    near the limit once a conversation's turn is stored, before its next call."""
    with _lock:
        spend = _spend_of(run_id, limit)
        due = not spend.reached and (spend.base is None or spend.written > 0)
    if due:
        _sum({run_id: limit}, clock())
    return reached(run_id, limit)


def check(ended: Iterable[Claimed], written: Iterable[tuple[Claimed, float]] = ()) -> list:
    """After a round's writes: the turns it stored, (claim, cost), and the conversations it ended. Sums the
    spend of each of their runs with a limit that is due (near its limit, never summed, or not for
    CHECK_SECONDS) in one query, and stops those that reached it; the runs this call stopped. A failed check is
    logged, never raised: the next round checks again."""
    now = clock()
    touched: dict[object, float] = {}
    for claimed, cost in written:
        limit = _limit_or_none(claimed)
        if limit is not None:
            with _lock:
                _spend_of(claimed.run_id, limit).written += cost
            touched[claimed.run_id] = limit
    for claimed in ended:
        limit = _limit_or_none(claimed)
        if limit is not None:
            touched[claimed.run_id] = limit
    if not touched:
        return []
    with _lock:
        due = {}
        for run_id, limit in touched.items():
            spend = _spend_of(run_id, limit)
            if spend.stop_tried:
                continue  # reached and stopped: its conversations stop on their own
            if spend.reached or spend.near() or now - spend.summed_at >= CHECK_SECONDS:
                due[run_id] = limit
    return _sum(due, now) if due else []


def _limit_or_none(claimed: Claimed) -> float | None:
    try:
        return limit_of(claimed)
    except Exception:  # an unreadable suite stops its conversation elsewhere
        log.exception("run %s: its cost limit could not be read", claimed.run_id)
        return None


def _sum(due: dict, now: float) -> list:
    """Sum these runs' spend (run -> limit) in one query, note it, and stop those that reached their limit; the
    runs stopped."""
    with _lock:
        written = {run_id: _spend_of(run_id, limit).written for run_id, limit in due.items()}
    try:
        spent = spend(list(due))
    except Exception as exc:
        if not outage.unavailable(exc):
            log.exception("checking the cost limits of runs %s failed", list(due))
        return []
    reaching = []
    with _lock:
        for run_id, limit in due.items():
            total = spent.get(sql.run_key(run_id), 0.0)
            state = _spend_of(run_id, limit)
            # What the pump stored before the sum is in it now; what was played since is not.
            state.unsummed -= written[run_id]
            state.written -= written[run_id]
            state.base, state.summed_at = total, now
            if not state.rated_at:
                state.rated_at, state.rated_spend = now, total
            elif now - state.rated_at >= CHECK_SECONDS:
                state.rate = max(total - state.rated_spend, 0.0) / (now - state.rated_at)
                state.rated_at, state.rated_spend = now, total
            # Stopped on the database's word only: a turn this process played may yet fail to be stored.
            if total >= limit:
                state.reached = True
                if not state.stop_tried:
                    reaching.append((run_id, limit))
    stopped = []
    for run_id, limit in reaching:
        try:
            if stop(run_id, limit):
                stopped.append(run_id)
        except Exception as exc:
            if not outage.unavailable(exc):
                log.exception("run %s: stopping it at its cost limit failed", run_id)
            continue  # tried again at the next round's check
        with _lock:
            _spend_of(run_id, limit).stop_tried = True
    return stopped


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
    """The run reached its limit: say why on the run, which stops its conversations playing before their next
    model call, and cancel its queued ones. True when this call stopped it (another worker may have first)."""
    reason = limit_reached(limit)
    now = timezone.now()
    with transaction.atomic():
        # A run whose every conversation has ended has nothing left to stop: it ends as it played.
        if not sql.has_unfinished(sql.run_key(run_id)):
            return False
        if not Run.objects.filter(pk=run_id, status__in=ACTIVE, stop_reason="").update(stop_reason=reason):
            return False
        scheduling.cancel_queued(run_id, now, reason=reason)
    log.info("run %s: %s; its queued conversations are cancelled, those playing stop", run_id, reason)
    scheduling.finalize(run_id)  # nothing may be playing any more
    return True
