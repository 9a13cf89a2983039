"""Reads for runs, scoped to the user (someone else's run is a 404) or to an active share link, and what is
worked out from stored rows alone: counts by status, the suite's gates and repeated evals' statistics."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    F,
    FloatField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Abs, Cast, Round
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone

from endpoints.models import Endpoint
from engine import agreement
from engine.calibration import CalibrationSuite, judgement
from engine.calibration import report as calibration
from engine.calibration.report import CalibrationReport
from engine.outcomes import GRADED, TerminationKind
from engine.overrides import apply as apply_overrides
from engine.results import (
    EvalResult,
    GateResult,
    OriginalVerdict,
    OverrideRecord,
    RunReport,
    RunTotals,
    SuiteRef,
    Totals,
    TurnRecord,
    evaluate_gates,
    grader_names,
    stream_report,
)
from engine.schema import SCALES
from engine.source import SuiteError
from engine.stats import DISTANCE_PLACES, IteratedResult, Tally, iterated_result, iterated_results, stats_of
from engine.transcript import format_transcript
from suites.parsed import schema_digest

from . import search, specs
from .models import (
    ACTIVE,
    FINISHED,
    Conversation,
    Label,
    Override,
    Run,
    ShareLink,
    Status,
    Turn,
    VersionFacts,
)

log = logging.getLogger(__name__)


def runs_for(user) -> QuerySet[Run]:
    # A list of runs needs none of their kept summaries (Run.summary; a line per eval for some suites), and
    # no page of a run needs its version's YAML (half a megabyte for a suite of 3,000 evals).
    return (
        Run.objects.filter(created_by=user)
        .select_related("suite_version__suite", "created_by")
        .defer("summary", "suite_version__source")
    )


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


def recent_runs(user, limit: int, **filters) -> list[Run]:
    """The user's newest runs matching `filters` (a suite's, a version's), counted by status."""
    return with_counts(runs_for(user).filter(**filters).order_by("-created_at")[:limit])


def with_last_run(suites: QuerySet, user) -> QuerySet:
    """Suites annotated with the user's last run of each: last_run_id, last_run_status, last_run_at."""
    last_run = Run.objects.filter(suite_version__suite=OuterRef("pk"), created_by=user).order_by(
        "-created_at"
    )
    return suites.annotate(
        last_run_id=Subquery(last_run.values("pk")[:1]),
        last_run_status=Subquery(last_run.values("status")[:1]),
        last_run_at=Subquery(last_run.values("created_at")[:1]),
    )


def recent_models(user, limit: int) -> list[tuple[str, str]]:
    """(endpoint name, model reference) of the user's `limit` newest runs, newest first."""
    return list(
        Run.objects.filter(created_by=user)
        .order_by("-created_at")
        .values_list("endpoint_name", "model")[:limit]
    )


def last_model_on(endpoint: Endpoint) -> str | None:
    """The model reference the newest run on this endpoint used, if any run did."""
    return (
        Run.objects.filter(endpoint_name=endpoint.name)
        .order_by("-created_at")
        .values_list("model", flat=True)
        .first()
    )


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


def conversations(run: Run) -> list[Conversation]:
    """Every conversation of the run, in suite order (index, then iteration)."""
    return list(run.conversations.all())


@dataclass(slots=True)
class Brief:
    """What the run page needs of every conversation it summarises (repeated evals' strips and statistics,
    gates): plain values, not model instances, since a page may summarise thousands of them. The rest
    (history, system, verdicts) is read for the table's rows only."""

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


def summary_rows(run: Run, indexes: Iterable[int] | None = None) -> list[Brief]:
    """The run's conversations as Briefs (of the evals at `indexes`, or all of them), in suite order."""
    rows = run.conversations.order_by("index", "iteration")
    if indexes is not None:
        rows = rows.filter(index__in=list(indexes))
    return [Brief(*values) for values in rows.values_list(*SUMMARY_FIELDS)]


def changed_since(ids: list[int], since) -> set[int]:
    """Which of these conversations changed at or after `since`: claimed, sent, finished, waiting to retry, or
    given a turn. One query over the page's rows (a hundred at most)."""
    if not ids:
        return set()
    changed = Conversation.objects.filter(pk__in=ids).filter(
        Q(dispatched_at__gte=since)
        | Q(started_at__gte=since)
        | Q(finished_at__gte=since)
        | Q(waiting_until__gte=since)
        | Q(turns__created_at__gte=since)
    )
    return set(changed.values_list("pk", flat=True).distinct())


@dataclass(frozen=True)
class SuiteFacts:
    """What the run page asks of a run's suite on every request, worked out once per suite version: a
    100,000-row dataset must not be walked per request."""

    sizes: dict[int, int]  # eval index -> iterations, for the evals that run more than once
    kinds: list[str]  # the conversation styles its evals use
    tags: dict[int, list[str]]  # eval index -> its tags, for the tagged evals
    grader_names: list[str]  # named graders, the suite's then its evals' own, in order
    has_gates: bool
    thresholds: dict[int, float]  # eval index -> the pass rate it needs, for the repeated evals
    eval_ids: dict[int, str]  # eval index -> its id, for the repeated evals
    evals: int
    calibration: bool  # a calibration set played as a suite: the run has a page of figures

    @property
    def every_eval_repeated(self) -> bool:
        return bool(self.sizes) and len(self.sizes) == self.evals


_facts: dict[tuple[int, str], SuiteFacts] = {}


def suite_facts(run: Run) -> SuiteFacts | None:
    """The run's SuiteFacts (None when its suite no longer parses), kept in this process and in the database
    (VersionFacts, worked out at launch): the first view of a run in a process would otherwise parse its
    suite, ~10 s for a dataset of 100,000 rows, in each web process."""
    version = run.suite_version
    key = (version.pk, version.sha256)
    if key not in _facts:
        facts = _stored_facts(version.pk)
        if facts is None:
            spec = suite_spec(run)
            if spec is None:
                return None
            facts = _facts_of(spec)
            _store_facts(version.pk, facts)
        if len(_facts) >= 64:
            _facts.pop(next(iter(_facts)))
        _facts[key] = facts
    return _facts[key]


# The SuiteFacts fields keyed by eval index, which JSON keeps as strings.
_BY_INDEX = ("sizes", "tags", "thresholds", "eval_ids")


def _stored_facts(version_id: int) -> SuiteFacts | None:
    stored = (
        VersionFacts.objects.filter(version_id=version_id, schema=schema_digest())
        .values_list("facts", flat=True)
        .first()
    )
    if stored is None:
        return None
    for name in _BY_INDEX:
        stored[name] = {int(index): value for index, value in stored.get(name, {}).items()}
    try:
        return SuiteFacts(**stored)
    except TypeError:  # stored by code whose facts had other fields: worked out again
        return None


def _store_facts(version_id: int, facts: SuiteFacts) -> None:
    """Best effort, as suites.parsed.store_parse: a reader that finds none works them out again."""
    try:
        with transaction.atomic():
            VersionFacts.objects.update_or_create(
                version_id=version_id, defaults={"schema": schema_digest(), "facts": asdict(facts)}
            )
    except IntegrityError:
        pass  # another process stored them at the same moment
    except DatabaseError:
        log.warning("suite version %s: its facts could not be stored", version_id, exc_info=True)


def _facts_of(spec) -> SuiteFacts:
    repeated = [(index, ev) for index, ev in enumerate(spec.evals) if (ev.iterations or spec.iterations) > 1]
    return SuiteFacts(
        sizes={index: ev.iterations or spec.iterations for index, ev in repeated},
        kinds=sorted({str(ev.style) for ev in spec.evals}),
        tags={index: list(ev.tags) for index, ev in enumerate(spec.evals) if ev.tags},
        grader_names=list(dict.fromkeys(name for _, name, _ in spec.named_graders())),
        has_gates=bool(spec.gates),
        thresholds={
            index: ev.pass_rate_threshold if ev.pass_rate_threshold is not None else spec.pass_rate_threshold
            for index, ev in repeated
        },
        eval_ids={index: spec.eval_id(index) for index, _ in repeated},
        evals=len(spec.evals),
        calibration=isinstance(spec, CalibrationSuite),
    )


OUTCOME_STATUSES = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.RUNNING)


def _outcome() -> dict[str, int]:
    return {"total": 0, "unfinished": 0, **dict.fromkeys(OUTCOME_STATUSES, 0)}


def repeated_outcomes(run: Run, indexes: Iterable[int]) -> dict[int, dict[str, int]]:
    """Per repeated eval, how many of its iterations passed, failed, errored, were cancelled or are still
    going: one aggregate query, whatever the number of iterations (the header's counts and the flaky
    evals need no row)."""
    by_status = {status: Count("pk", filter=Q(status=status)) for status in OUTCOME_STATUSES}
    rows = (
        run.conversations.filter(index__in=list(indexes))
        .order_by()
        .values("index")
        .annotate(total=Count("pk"), unfinished=Count("pk", filter=Q(status__in=ACTIVE)), **by_status)
    )
    return {row.pop("index"): row for row in rows}


def repeated_so_far(run: Run, indexes: Iterable[int], facts: SuiteFacts) -> dict[int, IteratedResult]:
    """The statistics of these repeated evals over their iterations finished so far, by eval index, as
    iterated_so_far works them out, from two queries over their rows whatever the number of iterations:
    their counts, sums and extremes by status, kind and termination reason, then each eval's representative
    iteration (the score nearest the mean, earliest on ties), the least of an integer that orders by the
    distance to 9 places, then by iteration."""
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
        # The distance to 9 places as an integer, then the iteration (< 10,000): the least is the nearest.
        order = Cast(
            Round(Abs(F("score") - centre) * Value(10.0**DISTANCE_PLACES)), BigIntegerField()
        ) * Value(10_000) + F("iteration")
        nearest = (
            finished.filter(status__in=GRADED, score__isnull=False, index__in=list(means))
            .values("index")
            .annotate(key=Min(order))
        )
        for row in nearest:
            tallies[row["index"]] = replace(tallies[row["index"]], representative=row["key"] % 10_000)
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
    keep = Q(iteration__lt=limit)
    for index, iteration in also.items():
        keep |= Q(index=index, iteration=iteration)
    rows = run.conversations.filter(keep, index__in=indexes).order_by("index", "iteration")
    return [Brief(*values) for values in rows.values_list(*SUMMARY_FIELDS)]


def suite_spec(run: Run):
    """The run's parsed suite, with its variables filled as the run had them (cached per process); None
    when it no longer parses (an older schema)."""
    try:
        return specs.bound(run.suite_version, run.vars)
    except (SuiteError, ValueError):
        return None


def neighbours(run: Run, index: int, iteration: int) -> dict:
    """A transcript's place in its run: its position, the run's size, the (index, iteration) before and after
    it, and how many iterations its eval has. Asked of the (run, index, iteration) index, never by reading
    the run's keys: a run may hold 100,000 conversations."""
    rows = run.conversations.order_by()
    before = rows.filter(Q(index__lt=index) | Q(index=index, iteration__lt=iteration))
    after = rows.filter(Q(index__gt=index) | Q(index=index, iteration__gt=iteration))
    previous = before.order_by("-index", "-iteration").values_list("index", "iteration").first()
    following = after.order_by("index", "iteration").values_list("index", "iteration").first()
    counts = rows.aggregate(count=Count("pk"), iterations=Count("pk", filter=Q(index=index)))
    return {
        "position": before.count() + 1,
        "count": counts["count"],
        "previous": previous,
        "next": following,
        "iterations": counts["iterations"],
    }


def iterations_of(run: Run, index: int) -> list[Conversation]:
    """The conversations of one eval (its iterations), with what the iteration strip and statistics need."""
    return list(
        run.conversations.filter(index=index).only(
            "index", "iteration", "status", "score", "turn_count", "termination", "kind", "run_id"
        )
    )


def turns(conversation: Conversation) -> list[Turn]:
    """The conversation's stored turns, in order."""
    return list(conversation.turns.all())


def has_turns_after(conversation: Conversation, position: int) -> bool:
    return conversation.turns.filter(position__gt=position).exists()


class GradedTurn(NamedTuple):
    """A stored turn as its ✓✗ mark needs it (runs.display.turn_marks): read as plain values, not as a model
    instance, since a run page reads a few hundred of them."""

    passed: bool | None
    record: dict


def graded_turns_of(
    conversations: Iterable[Conversation], styles: Iterable[str]
) -> dict[int, list[GradedTurn]]:
    """The stored turns of these conversations (a page of them) that are of `styles`, for their ✓✗ strips."""
    ids = [c.pk for c in conversations if c.style in set(styles)]
    turns: dict[int, list[GradedTurn]] = defaultdict(list)
    if not ids:
        return turns
    rows = (
        Turn.objects.filter(conversation_id__in=ids)
        .order_by("conversation_id", "position")
        .values_list("conversation_id", "passed", "record")
    )
    for conversation_id, passed, record in rows:
        turns[conversation_id].append(GradedTurn(passed, record))
    return turns


def active_share_links(run: Run) -> list[ShareLink]:
    return list(run.share_links.filter(revoked_at__isnull=True))


def status_counts(run: Run) -> dict[str, int]:
    rows = run.conversations.values("status").annotate(n=Count("pk"))
    counts = {status: 0 for status in Status.values}
    counts.update({row["status"]: row["n"] for row in rows})
    return counts


def gate_results(run: Run, conversations: list[Conversation] | None = None) -> list[GateResult]:
    """The suite's gates over the run's eval scores ([] when the suite has none). `conversations`: the run's,
    when the caller has loaded them already (with their status and score)."""
    try:
        gates = specs.suite(run.suite_version).gates
    except SuiteError:  # saved under an older schema: no gates to show
        return []
    if not gates:
        return []
    if conversations is None:
        conversations = list(
            Conversation.objects.filter(run=run).only("status", "score", "graders", "run_id")
        )
    return evaluate_gates(gates, conversations)


def iterated_for(run: Run, conversations: list[Conversation]) -> list[IteratedResult]:
    """Statistics of the evals the run repeats, over these conversations (the run's finished ones, or all of
    them); [] when none is repeated, or when the rows no longer fit the suite (saved under an older schema)."""
    if not conversations:
        return []
    try:
        return iterated_results(specs.suite(run.suite_version), conversations)
    # A suite or rows that no longer fit each other: strips without statistics.
    except (SuiteError, IndexError, ValueError):
        return []


def iterated_so_far(run: Run, conversations: list[Conversation]) -> dict[int, IteratedResult]:
    """What the pages show of the evals these conversations repeat: iterated_for over their iterations
    finished so far, by eval index. The suite is not read when no eval among them is repeated."""
    per_eval = Counter(conversation.index for conversation in conversations)
    finished = [c for c in conversations if per_eval[c.index] > 1 and c.status in FINISHED]
    return {result.index: result for result in iterated_for(run, finished)}


def kept_progress(run: Run, by_eval: bool) -> dict | None:
    """The progress aggregate runs.scheduling.finalize kept on the run when it ended (Run.summary), if it
    still holds: the run's status and revision are those it was made for. None otherwise."""
    kept = run.summary or {}
    if (
        kept.get("status") != run.status
        or kept.get("revision") != run.revision
        or kept.get("by_eval") != by_eval
    ):
        return None
    progress = dict(kept["progress"])
    if by_eval:  # JSON keeps the eval indexes as strings
        progress["by_eval"] = {int(index): outcome for index, outcome in progress["by_eval"].items()}
    return progress


def progress(run: Run, by_eval: bool = False) -> dict:
    """Everything the progress bar shows: one scan of the run's conversations for the counts and sums, and
    two small reads, of its running conversations for those waiting to retry a model call and of the
    partial index of its overridden ones (read in the scan, a JSON column and a timestamp per row were
    half of its time at 100,000 conversations). `by_eval`: the scan grouped by eval as well, so that it
    gives repeated_outcomes for every eval, under "by_eval" (a suite that repeats every eval)."""
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
        )
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
    outcomes: dict[int, dict[str, int]] = {}
    for row in rows:
        counts[row["status"]] += row["n"]
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
    return {
        "counts": counts,
        "total": total,
        "done": done,
        "percent": round(100 * done / total) if total else 100,
        "tokens": totals["prompt_tokens"] + totals["completion_tokens"],
        **totals,
        "overridden": run.conversations.exclude(original={}).count(),
        # How many wait to retry a model call, one reason, and the soonest retry.
        "waiting": {"count": wait["count"], "reason": wait["reason"] or "", "until": wait["until"]},
        # How many conversations have a model call out for longer than usual, and since when the longest.
        "calling": {
            "count": wait["calling"],
            "since": wait["calling_since"],
            "seconds": int((now - wait["calling_since"]).total_seconds()) if wait["calling_since"] else 0,
        },
        **({"by_eval": outcomes} if by_eval else {}),
    }


def turn_records(conversation: Conversation) -> list[TurnRecord]:
    return [TurnRecord.model_validate(turn.record) for turn in conversation.turns.all()]


def override_record(row: Override) -> OverrideRecord:
    return OverrideRecord(
        turn=row.turn,
        target=row.target,
        passed=row.passed,
        note=row.note,
        by=row.created_by.get_username(),
        at=row.created_at.isoformat() if row.created_at else "",
    )


def override_rows(conversation: Conversation) -> list[Override]:
    """A conversation's overrides (none asked of the database unless it is overridden)."""
    if not conversation.original:
        return []
    if "overrides" in getattr(conversation, "_prefetched_objects_cache", {}):
        return list(conversation.overrides.all())
    return list(conversation.overrides.select_related("created_by"))


def overrides_of(conversation: Conversation) -> list[OverrideRecord]:
    return [override_record(row) for row in override_rows(conversation)]


def eval_result(
    conversation: Conversation, turns: list[TurnRecord] | None = None, tags: list[str] | None = None
) -> EvalResult:
    """The conversation as the results format has it; an overridden one with its turns as reviewed, its
    overrides and the verdict the run gave. `tags` are its eval's, from the run's suite."""
    turns = turn_records(conversation) if turns is None else turns
    reviews = overrides_of(conversation)
    if reviews:
        turns = apply_overrides(turns, reviews)
    return EvalResult(
        index=conversation.index,
        id=conversation.eval_id,
        tags=tags or [],
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
        system=conversation.system,
        question=format_transcript(conversation.history) if conversation.history else "",
        turns=turns,
        turns_passed=conversation.turns_passed,
        turns_total=conversation.turns_total,
        per_turn_grades=[turn.grade for turn in turns if turn.grade is not None],
        graders=conversation.graders or [],
        totals=_totals(conversation, turns),
        overrides=reviews,
        original=OriginalVerdict.model_validate(conversation.original) if reviews else None,
    )


def _totals(conversation: Conversation, turns: list[TurnRecord]) -> Totals:
    """The turns' totals; judge spend after the last stored turn (named graders grading the whole
    conversation) is only in the conversation's columns, so those win where they say more."""
    totals = Totals.of(turns)
    extra_tokens = conversation.judge_tokens - totals.judge_tokens
    extra_cost = round(conversation.cost - totals.cost, 8)
    if conversation.graders and (extra_tokens > 0 or extra_cost > 0):
        totals.judge_tokens += max(extra_tokens, 0)
        totals.judge_cost = round(totals.judge_cost + max(extra_cost, 0), 8)
        totals.cost = round(totals.cost + max(extra_cost, 0), 8)
    return totals


def report(run: Run) -> RunReport:
    """The run as the documented JSON results format, the same shape `evalrun --json` writes. Held in memory
    whole: exports of big runs stream instead (report_head, eval_results)."""
    evals = list(eval_results(run))
    return RunReport(
        **report_head(run),
        evals=evals,
        totals=RunTotals.of(evals, duration_s=_duration(run)),
    )


def _duration(run: Run) -> float | None:
    return round(run.elapsed.total_seconds(), 3) if run.elapsed else None


def report_head(run: Run) -> dict:
    """Every field of the run's RunReport but its evals and totals, from the run and a few columns of each
    conversation (gates and repeated evals' statistics need every score; nothing else is read)."""
    version = run.suite_version
    facts = suite_facts(run)
    repeated = facts is not None and bool(facts.sizes)
    summary = summary_rows(run) if facts is not None and (facts.has_gates or repeated) else []
    return {
        "suite": SuiteRef(name=version.suite.name, version=version.number, sha256=version.sha256),
        "model": run.model,
        "endpoint": run.endpoint_name,
        "mock": run.is_mock,
        "vars": run.vars or None,
        "status": run.status,
        "gates": gate_results(run, summary) if summary else [],
        "iterated": iterated_for(run, summary) if repeated else [],
    }


def streamed_report(run: Run) -> StreamingHttpResponse:
    """results.json of any size: the same document as report(run), written as its evals are read."""
    return StreamingHttpResponse(
        stream_report(report_head_json(run), eval_results(run), _duration(run)),
        content_type="application/json",
    )


def report_head_json(run: Run) -> dict:
    """report_head as RunReport writes those fields (its own serialisation, not a copy of it)."""
    head = RunReport(**report_head(run), evals=[], totals=RunTotals())
    return head.model_dump(mode="json", exclude={"format", "evals", "totals"})


def grader_columns(run: Run) -> list[str]:
    """The run's named graders, one CSV column each: the suite's and its evals' own, in order."""
    facts = suite_facts(run)
    return facts.grader_names if facts is not None else grader_names(summary_rows(run))


# Conversations read at a time when a run's results are streamed: their turns and overrides with them.
RESULTS_CHUNK = 500


def eval_results(run: Run, chunk: int | None = None) -> Iterator[EvalResult]:
    """The run's conversations as EvalResults, in suite order, `chunk` at a time (each chunk with its turns
    in one more query): memory stays bounded whatever the run's size."""
    chunk = chunk or RESULTS_CHUNK
    spec = suite_spec(run)  # the eval's tags live in the suite, not in each conversation's row
    tags = {index: list(ev.tags) for index, ev in enumerate(spec.evals) if ev.tags} if spec else {}
    after: tuple[int, int] | None = None
    while True:
        rows = run.conversations.order_by("index", "iteration")
        if after is not None:
            rows = rows.filter(Q(index__gt=after[0]) | Q(index=after[0], iteration__gt=after[1]))
        batch = list(rows.prefetch_related("turns", "overrides__created_by")[:chunk])
        for conversation in batch:
            yield eval_result(conversation, turn_records(conversation), tags.get(conversation.index))
            # Each prefetched turn and override points back at its conversation: a reference cycle, which
            # only the garbage collector frees, and a process holding a large suite runs its full
            # collections seldom, so the chunks piled up (98 MB above the start at 100,000 conversations,
            # 44 MB at 10,000). Without the cache nothing refers back, and each chunk is freed as it ends.
            conversation._prefetched_objects_cache.clear()
        if len(batch) < chunk:
            return
        after = (batch[-1].index, batch[-1].iteration)


# --- Calibration runs ---------------------------------------------------------------------------------------


def calibration_suite(run: Run) -> CalibrationSuite | None:
    """The run's calibration set played as a suite, or None when the run is of an ordinary suite."""
    try:
        spec = specs.suite(run.suite_version)
    except SuiteError:
        return None
    return spec if isinstance(spec, CalibrationSuite) else None


def calibration_report(run: Run, suite: CalibrationSuite) -> CalibrationReport:
    """The figures of a calibration run, from each finished conversation's stored judge check (two queries)."""
    finished = {
        (row["id"]): row
        for row in run.conversations.filter(status__in=FINISHED).values("id", "index", "iteration", "error")
    }
    first_checks = {
        turn["conversation_id"]: (turn["record"].get("checks") or [None])[0]
        for turn in Turn.objects.filter(conversation_id__in=list(finished), position=1).values(
            "conversation_id", "record"
        )
    }
    judged = [
        judgement(suite, row["index"], row["iteration"], first_checks.get(pk), row["error"])
        for pk, row in finished.items()
    ]
    return calibration.report(suite.calibration, judged)


def other_calibrations(run: Run, limit: int = 20) -> list[Run]:
    """The finished runs of the same suite (any version) that a calibration can be compared with, newest first."""
    return list(
        Run.objects.filter(suite_version__suite=run.suite_version.suite_id, status__in=FINISHED)
        .exclude(pk=run.pk)
        .select_related("suite_version")
        .order_by("-created_at")[:limit]
    )


# --- Labels -------------------------------------------------------------------------------------------------


def labels_of(conversation: Conversation) -> list[Label]:
    return list(conversation.labels.select_related("created_by"))


def review_queue(run: Run, user) -> list[tuple[int, bool]]:
    """The run's finished conversations in order, as (id, labelled by this user)."""
    mine = set(
        Label.objects.filter(conversation__run=run, created_by=user).values_list("conversation_id", flat=True)
    )
    rows = (
        run.conversations.filter(status__in=FINISHED)
        .order_by("index", "iteration")
        .values_list("id", flat=True)
    )
    return [(pk, pk in mine) for pk in rows]


def calibration_sets_of(user) -> list:
    """The user's suites whose latest version is a calibration set: where labels can be added."""
    from suites.models import Suite

    out = []
    for suite in Suite.objects.filter(owner=user).prefetch_related("versions"):
        version = suite.latest_version
        if version is None:
            continue
        try:
            spec = specs.suite(version)
        except SuiteError:
            continue
        if isinstance(spec, CalibrationSuite):
            out.append(suite)
    return out


def inter_rater(run: Run) -> list[dict]:
    """How far each pair of reviewers agree on the conversations both labelled on one scale: the human
    baseline a judge is held to. Per pair: the number of conversations, exact agreement and Cohen's kappa."""
    by_reviewer: dict[tuple, dict[int, float]] = defaultdict(dict)
    names: dict[int, str] = {}
    for label in Label.objects.filter(conversation__run=run).select_related("created_by"):
        by_reviewer[(label.created_by_id, label.scale)][label.conversation_id] = label.score
        names[label.created_by_id] = label.created_by.get_username()
    pairs = []
    keys = sorted(by_reviewer)
    for i, (a, scale) in enumerate(keys):
        for b, other_scale in keys[i + 1 :]:
            if other_scale != scale:
                continue
            common = sorted(set(by_reviewer[(a, scale)]) & set(by_reviewer[(b, scale)]))
            if len(common) < 2:
                continue
            first = [by_reviewer[(a, scale)][pk] for pk in common]
            second = [by_reviewer[(b, scale)][pk] for pk in common]
            levels = agreement.levels_for(scale, first + second, SCALES[scale][2])
            judgements = [
                agreement.Judgement(n, 0, x, y) for n, (x, y) in enumerate(zip(first, second, strict=True))
            ]
            figures = agreement.metrics(judgements, scale, SCALES[scale][2], levels)
            pairs.append(
                {
                    "reviewers": (names[a], names[b]),
                    "scale": scale,
                    "conversations": len(common),
                    "exact_agreement": figures.exact_agreement,
                    "kappa": figures.weighted_kappa,
                }  # fmt: skip
            )
    return pairs


# --- Comparing runs -----------------------------------------------------------------------------------------


def pinned_baseline(run: Run) -> Run | None:
    """The pinned baseline of `run`'s suite, among its owner's runs (None when none is pinned)."""
    return (
        runs_for(run.created_by)
        .filter(suite_version__suite=run.suite_version.suite, pinned_at__isnull=False)
        .first()
    )


def baseline_besides(run: Run) -> bool:
    """Whether another of its owner's runs of `run`'s suite is pinned as the baseline (what the run page's
    Compare button compares with), without loading it."""
    return (
        Run.objects.filter(
            created_by_id=run.created_by_id,
            suite_version__suite_id=run.suite_version.suite_id,
            pinned_at__isnull=False,
        )
        .exclude(pk=run.pk)
        .exists()
    )


def comparable_runs(run: Run, limit: int = 20) -> list[Run]:
    """Runs to compare `run` with: its suite's, newest first, then none of other suites (evals are matched by
    id, so runs of another suite rarely compare)."""
    return with_counts(
        runs_for(run.created_by)
        .filter(suite_version__suite=run.suite_version.suite)
        .exclude(pk=run.pk)
        .order_by("-created_at")[:limit]
    )


@dataclass(frozen=True)
class _Totals:
    turns: int
    cost: float


@dataclass(frozen=True)
class Summary:
    """A conversation as a comparison reads it (engine.compare takes these as it takes EvalResults)."""

    id: str
    iteration: int
    prompt: str
    status: str
    score: float | None
    passed_on_turn: int | None
    totals: _Totals
    original: dict | None = None  # the run's own verdict, when a reviewer overrode it


def summaries(run: Run) -> list[Summary]:
    """The run's conversations as a comparison reads them (status, score, cost, turn count), in one query
    over the columns it needs: comparing two runs loads no transcript and builds no result model."""
    rows = run.conversations.order_by("index", "iteration").values_list(
        "eval_id",
        "iteration",
        "prompt",
        "status",
        "score",
        "passed_on_turn",
        "turn_count",
        "cost",
        "original",
    )
    return [
        Summary(
            eval_id, iteration, prompt, status, score, passed_on_turn, _Totals(turns, cost), original or None
        )
        for eval_id, iteration, prompt, status, score, passed_on_turn, turns, cost, original in rows
    ]


def conversation_by_eval(run: Run, eval_id: str, iteration: int = 0) -> Conversation | None:
    return run.conversations.filter(eval_id=eval_id, iteration=iteration).first()


def saying(run: Run, text: str) -> Q:
    """Conversations whose first prompt, or any turn's prompt or reply, contains `text` (any case), as one
    condition the run page's query carries: the database searches, nothing is collected here."""
    return Q(prompt__icontains=text) | Q(pk__in=search.conversations_saying(run, text))


def eval_tags(run: Run) -> dict[int, list[str]]:
    """Each eval's tags, by index, from the run's suite version (its dataset rows' too)."""
    try:
        spec = specs.suite(run.suite_version)
    except SuiteError:
        return {}
    return {index: list(ev.tags) for index, ev in enumerate(spec.evals) if ev.tags}
