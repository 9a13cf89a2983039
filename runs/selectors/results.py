"""A run as the documented results format: each conversation as an EvalResult (with its turns as reviewed and
its overrides), the report's head (gates, repeated evals' statistics), and results.json streamed at any size."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Q
from django.http import StreamingHttpResponse

from engine.clients.settings import settings_report
from engine.gates import GateResult, evaluate_gates, grader_names
from engine.overrides import apply as apply_overrides
from engine.results import (
    EvalResult,
    OriginalVerdict,
    OverrideRecord,
    RunReport,
    RunTotals,
    SuiteRef,
    Totals,
    TurnRecord,
    stream_report,
)
from engine.source import SuiteError
from engine.transcript import format_transcript

from .. import specs
from ..models import Conversation, Override, Run
from .facts import suite_facts, suite_spec
from .iterations import iterated_for, summary_rows


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
        diverged_at=conversation.diverged_at,
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
        "settings": settings_report((facts.settings if facts is not None else None) or {}, run.options),
        "status": run.status,
        "stop_reason": run.stop_reason or None,
        "gates": gate_results(run, summary) if summary else [],
        "iterated": iterated_for(run, summary) if repeated else [],
        "unpriced": run.unpriced or [],
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
            # collections seldom, so the chunks would pile up. Without the cache nothing refers back, and
            # each chunk is freed as it ends.
            conversation._prefetched_objects_cache.clear()
        if len(batch) < chunk:
            return
        after = (batch[-1].index, batch[-1].iteration)
