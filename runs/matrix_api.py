"""Matrices API: launch a suite against several models or settings variants at once (a run each), and read a
matrix back with each variant's figures. The same project checks as the runs API (runs/api.py)."""

from __future__ import annotations

from uuid import UUID

from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Field, Router, Schema, Status

from engine.matrix import MAX_VARIANTS, Variant, VariantError, parse_variant
from engine.options import RunOptions
from engine.schema.settings import ModelSettings
from projects.requests import check_request, request_project
from projects.roles import Can

from . import launch_keys, launching
from . import matrix as matrices
from .api import LAUNCH_REFUSALS, LaunchIn, RefusedOut, RunOut, _ref, _refusal, _run_out, _version_to_launch
from .models import RunMatrix

router = Router(tags=["matrices"])


class VariantIn(Schema):
    model: str  # a model reference ("endpoint/model", "mock"), or `model@temperature=0.7` as the CLI takes
    model_settings: ModelSettings | None = None  # over the launch's and the suite's, for this variant only
    label: str | None = Field(None, max_length=100)  # its name on the page (default: model and settings)


class MatrixIn(LaunchIn):
    variants: list[VariantIn | str] = Field(..., min_length=2, max_length=MAX_VARIANTS)


class VariantOut(Schema):
    label: str
    run: RunOut
    passed: int
    graded: int
    pass_rate: float | None
    interval: list[float] | None  # the pass rate's 95% Wilson interval
    mean_score: float | None
    tokens: int  # all together: model_tokens + judge_tokens + user_tokens
    model_tokens: int  # the model's prompt and completion tokens
    judge_tokens: int
    user_tokens: int  # the simulated user's
    cost: float  # the model's, the judges' and the simulated user's
    cached_calls: int  # calls answered from the response cache
    saved_cost: float  # what those calls cost when first asked: saved, not in `cost`
    # The endpoints without prices that its run's calls went to: `cost` then counts 0 for theirs, a lower bound.
    unpriced: list[str] = []
    latency_p50_ms: float | None
    latency_p95_ms: float | None


class DifferenceOut(Schema):
    better: str
    worse: str
    wins: int  # evals the better one passed and the worse failed (of several iterations: passed more often)
    losses: int
    p_value: float  # exact McNemar test on those discordant pairs


class SharedSlotsOut(Schema):
    endpoint: str  # its name; "default" for the default endpoint
    allows: int  # its cap: the most conversations in flight on it, every variant's together
    variants: int  # the matrix's variants on it
    text: str  # "fake allows 20 at once, shared by its 2 variants"


class MatrixOut(Schema):
    id: UUID
    project: str
    suite: str
    version: int
    url: str  # the matrix page
    finished: bool
    variants: list[VariantOut]
    significant: list[DifferenceOut]  # pairs that differ beyond chance (p < 0.05)
    # The endpoints whose cap is less than their variants' concurrency together: they share its slots.
    shared_slots: list[SharedSlotsOut] = []


class LaunchedMatrixOut(MatrixOut):
    # What its runs may cost, as `evalsite run --model a,b` says it before they play: each variant's lines,
    # then their sum; each variant's run has the cost limit of its own.
    estimate: list[str] = []


def _variant(item: VariantIn | str) -> Variant:
    if isinstance(item, str):
        return parse_variant(item)
    parsed = parse_variant(item.model)
    settings = parsed.model_settings
    if item.model_settings is not None:
        settings = settings.merged(item.model_settings) if settings else item.model_settings
    return Variant(model=parsed.model, model_settings=settings, label=(item.label or "").strip())


def _matrix_out(request, matrix: RunMatrix) -> dict:
    runs = matrices.runs_of(matrix)
    grid = matrices.grid(matrix, runs)
    labels = [column.label for column in grid.columns]
    version = matrix.suite_version
    return {
        "id": matrix.pk,
        "project": matrix.project.slug,
        "suite": version.suite.name,
        "version": version.number,
        "url": request.build_absolute_uri(reverse("matrices:detail", args=[matrix.pk])),
        "finished": grid.finished,
        "variants": [
            {
                "label": column.label,
                "run": _run_out(request, run),
                "passed": stats.passed,
                "graded": stats.graded,
                "pass_rate": stats.rate,
                "interval": None if stats.rate is None else [stats.low, stats.high],
                "mean_score": stats.mean_score,
                "tokens": stats.tokens,
                "model_tokens": stats.model_tokens,
                "judge_tokens": stats.judge_tokens,
                "user_tokens": stats.user_tokens,
                "cost": stats.cost,
                "cached_calls": stats.cached_calls,
                "saved_cost": stats.saved_cost,
                "unpriced": list(column.unpriced),
                "latency_p50_ms": stats.p50_ms,
                "latency_p95_ms": stats.p95_ms,
            }
            for column, stats, run in zip(grid.columns, grid.stats, runs, strict=True)
        ],  # fmt: skip
        "significant": [
            {
                "better": labels[d.better],
                "worse": labels[d.second if d.better == d.first else d.first],
                "wins": max(d.first_only, d.second_only),
                "losses": min(d.first_only, d.second_only),
                "p_value": d.p_value,
            }
            for d in grid.significant()
        ],  # fmt: skip
        "shared_slots": [
            {"endpoint": each.endpoint, "allows": each.allows, "variants": each.variants, "text": each.text}
            for each in matrices.shared_slots(runs)
        ],
    }


@router.post(
    "",
    response={
        200: LaunchedMatrixOut,
        201: LaunchedMatrixOut,
        403: RefusedOut,
        404: RefusedOut,
        422: RefusedOut,
    },
    summary="Launch a matrix: the suite against several models or settings variants, a run each",
    description="As launching a run (`suite`/`version` or `yaml`, `concurrency`, `vars`, `ref`, `options`), with "
    "`variants` in place of `model`: two to ten, each a model reference, `model@key=value@…` (settings as "
    "the CLI's --model takes them), or an object `{model, model_settings, label}`. Every run starts, or none "
    "(422 naming the variant that cannot). Answers the matrix with a run per variant, in the order given. "
    "`concurrency` is each variant's: one above what its endpoint allows is refused (422); variants on one "
    "endpoint share its slots, and `shared_slots` names each endpoint whose cap is less than they ask together. "
    "An `Idempotency-Key` header works as a run's launch: the same key and body again answer 200 with the "
    "matrix the first one made; the same key with another body is a 422. `options.max_cost` is each variant's "
    "run's own limit: three variants may spend three times it. The answer's `estimate` says what the runs may "
    "cost, in the lines `evalsite run --model a,b` prints: each variant's, then their sum.",
)
def launch_matrix(request, body: MatrixIn):
    project = request_project(request, Can.EDIT, body.project)
    if body.model:
        return Status(422, {"detail": "a matrix names its models in `variants`, not `model`"})

    def make() -> RunMatrix:
        version = _version_to_launch(request.user, project, body)
        return matrices.create_matrix(
            version=version, user=request.user, variants=variants, concurrency=body.concurrency,
            vars=body.vars, ref=_ref(body) or None, options=body.options or RunOptions(),
        )  # fmt: skip

    try:
        variants = [_variant(item) for item in body.variants]
        matrix, new = launch_keys.once(request, project, body.dict(), make)
    except VariantError as exc:
        return Status(422, {"detail": str(exc)})
    except LAUNCH_REFUSALS as exc:
        return _refusal(exc)
    out = _matrix_out(request, matrix)
    runs = list(matrix.runs.order_by("created_at", "pk").select_related("suite_version"))  # as runs_of
    estimate = launching.launched_estimate(runs, [matrices.label_of(run) for run in runs])
    return Status(201 if new else 200, {**out, "estimate": estimate})


@router.get("/{matrix_id}", response=MatrixOut, summary="A matrix: each variant's run and figures")
def matrix_status(request, matrix_id: UUID):
    matrix = get_object_or_404(
        RunMatrix.objects.select_related("suite_version__suite", "project"), pk=matrix_id
    )
    check_request(request, matrix.project_id, Can.VIEW)
    return _matrix_out(request, matrix)
