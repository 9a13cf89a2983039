"""Matrices: launching one (a run per variant, in one transaction) and reading one back as the grid
(engine.matrix) in a fixed number of queries, however many evals and variants it has."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django.db import transaction
from django.db.models.fields.json import KT
from django.db.models.functions import Left
from django.shortcuts import get_object_or_404

from engine.matrix import (
    CellIn,
    ColumnIn,
    Grid,
    Variant,
    build_grid,
    fitted_label,
    named_twice,
    no_verdict_reason,
)
from engine.options import RunOptions
from projects.access import check
from projects.roles import Can
from suites.models import SuiteVersion

from . import concurrency as caps
from . import selectors
from .endpoints import build_registry
from .models import Conversation, Run, RunMatrix, Turn
from .services import LaunchError, create_run


@transaction.atomic
def create_matrix(
    *,
    version: SuiteVersion,
    user,
    variants: Sequence[Variant],
    concurrency: int | None = None,
    vars: dict[str, str] | None = None,
    ref: str | None = None,
    options: RunOptions | None = None,
) -> RunMatrix:
    """A matrix and a run per variant, all or none: a variant that cannot start (an unknown endpoint, a
    project's refusal) undoes the others, named. Each run carries the variant's name as its label and its
    settings over the launch's `options`."""
    if len(variants) < 2:
        raise LaunchError("a matrix compares two variants or more")
    if (twice := named_twice(variants)) is not None:
        raise LaunchError(f"`{twice}` is named twice: each variant needs its own model, settings or label")
    matrix = RunMatrix.objects.create(
        suite_version=version, project_id=version.suite.project_id, created_by=user
    )
    base = options or RunOptions()
    for variant in variants:
        settings = base.model_settings
        if variant.model_settings is not None:
            settings = settings.merged(variant.model_settings) if settings else variant.model_settings
        run_options = base.model_copy(
            update={"model_settings": settings, "label": fitted_label(variant.name)}
        )
        try:
            create_run(
                version=version, user=user, model=variant.model, concurrency=concurrency, vars=vars,
                ref=ref, options=run_options, matrix=matrix,
            )  # fmt: skip
        except LaunchError as exc:  # of its kind still: a refused concurrency is the form's field's
            raise type(exc)(f"{variant.name}: {exc}") from None
    return matrix


def get_matrix_for_user(user, matrix_id, can: Can = Can.VIEW) -> RunMatrix:
    """The matrix, when the user's role in its project allows `can` (404 for a non-member, 403 below)."""
    matrix = get_object_or_404(
        RunMatrix.objects.select_related("suite_version__suite", "project", "created_by"), pk=matrix_id
    )
    check(user, matrix.project_id, can)
    return matrix


def runs_of(matrix: RunMatrix) -> list[Run]:
    """Its runs in the order they were launched: the order of the variants."""
    return list(
        matrix.runs.order_by("created_at", "pk").only(
            "pk", "model", "endpoint_name", "status", "options", "created_at", "finished_at", "matrix_id",
            "stop_reason", "unpriced", "concurrency",
        )
    )  # fmt: skip


def shared_slots(runs: list[Run]) -> list[caps.Shared]:
    """The endpoints whose slots the matrix's variants share, their concurrency together being more than the
    endpoint allows: each plays at most its own, and all of them at most the endpoint's cap."""
    return caps.shared(build_registry(), [(run.endpoint_name, run.concurrency) for run in runs])


def cost_limit(matrix: RunMatrix, runs: list[Run]) -> float | None:
    """The cost limit each variant's run has of its own: its launch's (one for every variant: they share the
    launch's options), else the suite's `max_cost`; None without one."""
    if not runs:
        return None
    first = runs[0]
    launched = (first.options or {}).get("max_cost")
    if launched is not None:
        return launched
    first.suite_version = matrix.suite_version  # loaded with the matrix: its facts need no query for it
    facts = selectors.suite_facts(first)
    return facts.max_cost if facts is not None else None


def label_of(run: Run) -> str:
    return (run.options or {}).get("label") or run.model


CELL_FIELDS = (
    "run_id", "index", "iteration", "eval_id", "status", "score", "passed_on_turn", "prompt_tokens",
    "completion_tokens", "judge_tokens", "user_tokens", "cost", "cached_calls", "saved_cost", "verdict",
    "error_head",
)  # fmt: skip
# Of an error's message, for its cell's title: a traceback's whole text stays in the database.
REASON_CHARS = 300


def grid(matrix: RunMatrix, runs: list[Run] | None = None, sort: str = "disagreement") -> Grid:
    """The grid from three queries: the runs, every conversation's outcome, every turn's latency."""
    runs = runs_of(matrix) if runs is None else runs
    cells: dict[object, list[CellIn]] = defaultdict(list)
    conversations = Conversation.objects.filter(run__matrix=matrix).annotate(
        error_head=Left("error", REASON_CHARS)
    )
    for row in conversations.values_list(*CELL_FIELDS).iterator():
        (
            run_id,
            index,
            iteration,
            eval_id,
            status,
            score,
            turn,
            prompt,
            completion,
            judge,
            user,
            cost,
            cached,
            saved,
            verdict,
            error,
        ) = row
        cells[run_id].append(
            CellIn(index=index, eval_id=eval_id, iteration=iteration, status=status, score=score,
                   passed_on_turn=turn, model_tokens=prompt + completion, judge_tokens=judge,
                   user_tokens=user, cost=cost, cached_calls=cached, saved_cost=saved,
                   reason=no_verdict_reason(status, error, verdict))
        )  # fmt: skip
    latencies: dict[object, list[int]] = defaultdict(list)
    turns = Turn.objects.filter(conversation__run__matrix=matrix).annotate(
        latency=KT("record__latency_ms"), cached=KT("record__cached")
    )
    for run_id, latency, cached in turns.values_list("conversation__run_id", "latency", "cached").iterator():
        # A reply from the response cache took no time of the model's: it would pull p50 and p95 to zero.
        if latency not in (None, "") and str(cached).lower() not in ("true", "1"):
            latencies[run_id].append(int(float(latency)))
    columns = [
        ColumnIn(key=str(run.pk), label=label_of(run), model=run.model, status=run.status,
                 cells=cells.get(run.pk, []), latencies_ms=latencies.get(run.pk, []), unpriced=run.unpriced or (),
                 stop_reason=run.stop_reason)
        for run in runs
    ]  # fmt: skip
    return build_grid(columns, sort=sort)
