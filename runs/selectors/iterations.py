"""Repeated evals as the pages read them: every conversation as a Brief, the first iterations of each eval for
its strip, and its statistics over the iterations finished so far."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.db.models import BigIntegerField, Case, Count, F, FloatField, Max, Min, Q, Sum, Value, When
from django.db.models.functions import Abs, Cast, Round

from engine.outcomes import GRADED, TerminationKind
from engine.source import SuiteError
from engine.stats import DISTANCE_PLACES, IteratedResult, Tally, iterated_result, iterated_results, stats_of

from .. import specs
from ..models import FINISHED, Conversation, Run, Status
from .facts import SuiteFacts


@dataclass(slots=True)
class Brief:
    """What the run page needs of every conversation it summarises (repeated evals' strips and statistics,
    gates): plain values, not model instances, since a page may summarise a great many. The rest (history,
    system, verdicts) is read for the table's rows only."""

    index: int
    iteration: int
    eval_id: str
    status: str
    score: float | None
    graders: list
    turn_count: int
    termination: str
    kind: str


SUMMARY_FIELDS = tuple(Brief.__dataclass_fields__)

# Above any eval's number of iterations: a representative's sort key carries its iteration below it.
_ITERATIONS = 10_000


def summary_rows(run: Run, indexes: Iterable[int] | None = None) -> list[Brief]:
    """The run's conversations as Briefs (of the evals at `indexes`, or all of them), in suite order."""
    rows = run.conversations.order_by("index", "iteration")
    if indexes is not None:
        rows = rows.filter(index__in=list(indexes))
    return [Brief(*values) for values in rows.values_list(*SUMMARY_FIELDS)]


def repeated_so_far(run: Run, indexes: Iterable[int], facts: SuiteFacts) -> dict[int, IteratedResult]:
    """The statistics of these repeated evals over their iterations finished so far, by eval index, as
    iterated_so_far works them out, from two queries over their rows whatever the number of iterations:
    their counts, sums and extremes by status, kind and termination reason, then each eval's representative
    iteration (the score nearest the mean, earliest on ties), the least of an integer that orders by the
    distance to DISTANCE_PLACES places, then by iteration."""
    indexes = [index for index in indexes if index in facts.sizes]
    if not indexes:
        return {}
    finished = run.conversations.filter(index__in=indexes, status__in=FINISHED).order_by()
    groups = finished.values("index", "status", "kind", "termination").annotate(
        n=Count("pk"),
        scored=Count("score"),
        score_sum=Sum("score"),
        score_squares=Sum(F("score") * F("score"), output_field=FloatField()),
        score_min=Min("score"),
        score_max=Max("score"),
        turns_sum=Sum("turn_count"),
        turns_min=Min("turn_count"),
        turns_max=Max("turn_count"),
    )
    sums: dict[int, dict] = {}
    for row in groups:
        tally = sums.setdefault(row["index"], {"iterations": 0, "graded": 0, "passes": 0, "score_sum": 0.0,
                                               "score_squares": 0.0, "scores": [], "turns_sum": 0, "turns": [],
                                               "terminations": {}, "multi": False, "errors": 0})  # fmt: skip
        tally["iterations"] += row["n"]
        tally["turns_sum"] += row["turns_sum"] or 0
        tally["turns"] += [row["turns_min"], row["turns_max"]]
        tally["multi"] |= row["kind"] == "multi-turn"
        if row["status"] in GRADED and row["scored"]:  # graded: passed or failed, with a score
            tally["graded"] += row["scored"]
            tally["passes"] += row["scored"] if row["status"] == Status.PASSED else 0
            tally["score_sum"] += row["score_sum"]
            tally["score_squares"] += row["score_squares"]
            tally["scores"] += [row["score_min"], row["score_max"]]
        # An errored iteration ends as an error, whatever its termination says (as engine.stats reads it).
        reason = TerminationKind.ERROR.describe() if row["status"] == Status.ERROR else row["termination"]
        if reason:
            tally["terminations"][reason] = tally["terminations"].get(reason, 0) + row["n"]
        tally["errors"] += row["n"] if row["status"] == Status.ERROR else 0
    tallies = {
        index: Tally(
            iterations=t["iterations"], graded=t["graded"], passes=t["passes"], score_sum=t["score_sum"],
            score_squares=t["score_squares"], score_min=min(t["scores"], default=None),
            score_max=max(t["scores"], default=None), turns_sum=t["turns_sum"], turns_min=min(t["turns"]),
            turns_max=max(t["turns"]), terminations=t["terminations"],
        )
        for index, t in sums.items()
    }  # fmt: skip
    means = {index: tally.mean for index, tally in tallies.items() if tally.mean is not None}
    if means:
        centre = Case(*(When(index=index, then=Value(mean)) for index, mean in means.items()),
                      output_field=FloatField())  # fmt: skip
        # The distance as an integer, then the iteration: the least is the nearest.
        order = Cast(
            Round(Abs(F("score") - centre) * Value(10.0**DISTANCE_PLACES)), BigIntegerField()
        ) * Value(_ITERATIONS) + F("iteration")
        nearest = (
            finished.filter(status__in=GRADED, score__isnull=False, index__in=list(means))
            .values("index")
            .annotate(key=Min(order))
        )
        for row in nearest:
            tallies[row["index"]] = replace(tallies[row["index"]], representative=row["key"] % _ITERATIONS)
    return {
        index: iterated_result(
            index,
            facts.eval_ids[index],
            stats_of(tally, facts.thresholds[index]),
            multi=sums[index]["multi"],
            errored=sums[index]["errors"] > 0,
        )
        for index, tally in sorted(tallies.items())
    }


def strips(run: Run, indexes: Iterable[int], limit: int, also: dict[int, int]) -> list[Brief]:
    """The first `limit` iterations of these evals, and the iteration `also` names for each (its
    representative, wherever it falls), in suite order."""
    indexes = list(indexes)
    if not indexes:
        return []
    shown = Q(iteration__lt=limit)
    for index, iteration in also.items():
        shown |= Q(index=index, iteration=iteration)
    rows = run.conversations.filter(shown, index__in=indexes).order_by("index", "iteration")
    return [Brief(*values) for values in rows.values_list(*SUMMARY_FIELDS)]


def iterations_of(run: Run, index: int) -> list[Conversation]:
    """The conversations of one eval (its iterations), with what the iteration strip and statistics need."""
    return list(
        run.conversations.filter(index=index).only(
            "index", "iteration", "status", "score", "turn_count", "termination", "kind", "run_id"
        )
    )


def iterated_for(run: Run, conversations: list[Conversation]) -> list[IteratedResult]:
    """Statistics of the evals the run repeats, over these conversations (the run's finished ones, or all of
    them); [] when none is repeated, or when the rows do not fit the suite (saved under an older schema)."""
    if not conversations:
        return []
    try:
        return iterated_results(specs.suite(run.suite_version), conversations)
    # A suite or rows that do not fit each other: strips without statistics.
    except (SuiteError, IndexError, ValueError):
        return []


def iterated_so_far(run: Run, conversations: list[Conversation]) -> dict[int, IteratedResult]:
    """What the pages show of the evals these conversations repeat: iterated_for over their iterations
    finished so far, by eval index. The suite is not read when no eval among them is repeated."""
    per_eval = Counter(conversation.index for conversation in conversations)
    finished = [c for c in conversations if per_eval[c.index] > 1 and c.status in FINISHED]
    return {result.index: result for result in iterated_for(run, finished)}
