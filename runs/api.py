"""Runs API, for the browser and for CI (a bearer token acts as its user, in its project; evalsite/api.py):

- launch a run from a project's saved suite (by name, latest or a given version) or from YAML in the body;
- list a project's runs with filters; a run's status and progress; its results as JSON, JUnit XML or Markdown;
- cancel a run, retry its errored conversations, re-grade it, compare two runs.

Every route checks the project of what it acts on (projects/requests.py): a run outside the user's projects
(or the token's) is a 404, never a 403, so the API says nothing of what a user cannot see; a member whose
role is too low gets a 403 naming the role it needs.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError

from engine import compare, exports
from engine.options import RunOptions
from engine.source import SuiteError
from projects.requests import check_request, request_project
from projects.roles import Can
from suites import selectors as suite_selectors
from suites import services as suite_services
from suites.models import Suite

from . import display, launch_keys, launching, selectors, services
from .models import Run
from .views.exports import export_response, stored_run

router = Router(tags=["runs"])


def _run(request, run_id, can: Can) -> Run:
    """The run, once the user's role in its project allows `can` (404 outside their projects, 403 below)."""
    run = get_object_or_404(
        Run.objects.select_related("suite_version__suite", "project").defer(
            "summary", "suite_version__source"
        ),
        pk=run_id,
    )
    check_request(request, run.project_id, can)
    return run


# --- launching and listing ---------------------------------------------------------------------------------


class LaunchIn(Schema):
    project: str | None = (
        None  # the project's slug; default: the token's project, or the session's current one
    )
    suite: str | None = None  # a saved suite's name in that project
    version: int | None = None  # its version number (default: the latest)
    yaml: str | None = None  # or a suite's YAML: saved as a new version of the suite it names, if it changed
    files: dict[str, str] | None = None  # attached files for `yaml` (name -> text); default: the latest's
    model: str | None = None  # override the suite's model ("endpoint/model", "mock")
    # Conversations in flight at once; more than the model's endpoint allows is refused (422). Default: 10,
    # held to the endpoint's cap.
    concurrency: int | None = None
    vars: dict[str, str] | None = None  # values for the suite's variables ({{var:NAME}}), over their defaults
    ref: str | None = (
        None  # with `yaml`: the branch, tag or commit CI sent it from; kept off the suite's line
    )
    commit: str | None = None  # with `ref`: the commit's sha, recorded on the version
    # Over the suite's own keys (engine.options): model/judge/user settings, cache, max_cost.
    options: RunOptions | None = None


class Problem(Schema):
    line: int
    column: int
    path: str
    message: str
    file: str = ""  # an attached file's name when the problem is in that file (or its name, or its size)


class RefusedOut(Schema):
    detail: str
    problems: list[Problem] = []


class RunOut(Schema):
    id: UUID
    project: str  # the project's slug
    suite: str
    version: int
    model: str
    endpoint: str
    status: str
    # The status in words: "stopped: cost limit $5.00 reached" for a run its cost limit stopped, else `status`.
    state: str = ""
    stop_reason: str = ""  # why the run stopped short ("cost limit $5.00 reached"); "" when it did not
    concurrency: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    regraded_from: UUID | None = None
    vars: dict[str, str] = {}  # the suite's variables as the run filled them
    ref: str = ""  # the branch, tag or commit a CI launch came from
    # The endpoints without prices that its calls have gone to: its costs count 0 for their calls, so they are
    # not known.
    unpriced: list[str] = []
    url: str  # the run page
    links: dict[str, str]  # results (JSON), junit, markdown, progress


class LaunchedOut(RunOut):
    # What the run may cost, as `evalsite run` says it before it plays: a line each ("≈ $1.20 (up to $3.10):
    # 300 conversations × 1–3 turns, … · limit $5.00"); none when no endpoint it calls has prices and no
    # limit is set.
    estimate: list[str] = []


def _links(request, run: Run) -> dict[str, str]:
    base = f"/api/runs/{run.pk}"
    return {
        "page": request.build_absolute_uri(reverse("runs:detail", args=[run.pk])),
        "results": request.build_absolute_uri(f"{base}/results"),
        "junit": request.build_absolute_uri(f"{base}/results.junit.xml"),
        "markdown": request.build_absolute_uri(f"{base}/results.md"),
        "progress": request.build_absolute_uri(f"{base}/progress"),
    }


def _run_out(request, run: Run) -> dict:
    version = run.suite_version
    links = _links(request, run)
    return {
        "id": run.pk,
        "project": run.project.slug,
        "suite": version.suite.name,
        "version": version.number,
        "model": run.model,
        "endpoint": run.endpoint_name,
        "status": run.status,
        "state": display.status_words(run),
        "stop_reason": run.stop_reason,
        "concurrency": run.concurrency,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "regraded_from": run.regraded_from_id,
        "vars": run.vars or {},
        "ref": run.ref,
        "unpriced": run.unpriced or [],
        "finished_at": run.finished_at,
        "url": links.pop("page"),
        "links": links,
    }


def _problems(exc: SuiteError) -> list[dict]:
    return [problem.as_dict() for problem in exc.problems]


class _Refused(Exception):
    """A launch refused with this status and payload; raised inside the launch's transaction to undo it."""

    def __init__(self, status: int, payload: dict):
        self.status, self.payload = status, payload


# What a launch, a run's or a matrix's, may be refused with: caught together and answered by _refusal.
LAUNCH_REFUSALS = (_Refused, services.LaunchError, SuiteError, launch_keys.KeyRefused)


def _refusal(exc: Exception):
    """The answer to a launch refused with one of LAUNCH_REFUSALS."""
    if isinstance(exc, _Refused):
        return Status(exc.status, exc.payload)
    if isinstance(exc, SuiteError):
        return Status(422, {"detail": "the suite does not validate", "problems": _problems(exc)})
    return Status(422, {"detail": str(exc)})


@router.post(
    "",
    response={200: LaunchedOut, 201: LaunchedOut, 403: RefusedOut, 404: RefusedOut, 422: RefusedOut},
    summary="Launch a run",
    description="In the token's project (a session: `project`, a slug, else the current project), which needs "
    "the editor role there. From a saved suite of that project by name (`suite`, optionally `version`), or "
    "from `yaml` in the body, which is saved as the next version of the project's suite of that name (created "
    "if new; unchanged text reuses the latest version). With `ref` (a branch, tag or commit; `commit` its sha), "
    "`yaml` is stored as a version under that ref that never becomes the suite's latest (the same text and "
    "files reuse it), and the run records the ref; a suite that does not exist yet starts its line with it. "
    "`model` overrides the suite's; `concurrency` is how many conversations play at once (default 10, held to "
    "the endpoint's cap): more than the model's endpoint allows is a 422 naming the endpoint, its cap and "
    "where it is set, and nothing starts. `vars` gives values for "
    "the suite's variables (a variable with no default needs one). 422 with located "
    "problems when the YAML does not validate or the run cannot start; then nothing is saved. "
    "With an `Idempotency-Key` header, a launch sent again with the same key and body (a retry after a "
    "dropped connection) answers 200 with the run the first one made; the same key with another body is "
    "a 422. Keys are the user's own and kept for a day (EVALSITE_IDEMPOTENCY_HOURS). The answer's `estimate` "
    "says what the run may cost, in the lines `evalsite run` prints before a run: from the endpoints' prices "
    "and the suite's size, with the cost limit (`options.max_cost`, else the suite's `max_cost`).",
)
def launch(request, body: LaunchIn):
    user = request.user
    project = request_project(request, Can.EDIT, body.project)

    def make() -> Run:
        version = _version_to_launch(user, project, body)
        return services.create_run(
            version=version, user=user, model=body.model, concurrency=body.concurrency, vars=body.vars,
            ref=_ref(body) or None, options=body.options,
        )  # fmt: skip

    try:
        run, new = launch_keys.once(request, project, body.dict(), make)
    except LAUNCH_REFUSALS as exc:
        return _refusal(exc)
    return Status(
        201 if new else 200, {**_run_out(request, run), "estimate": launching.launched_estimate([run])}
    )


def _ref(body: LaunchIn) -> str:
    return (body.ref or "").strip()[:200]


def _version_to_launch(user, project, body: LaunchIn):
    """The version a launch runs: `yaml` saved as the project's suite's next version (under its ref, off the
    suite's line, when it has one), or a saved one."""
    if body.yaml is not None:
        spec = suite_services.validate_source(body.yaml, files=body.files or {})
        suite = Suite.objects.filter(project=project, name=spec.name).order_by("pk").first()
        if suite is not None and _ref(body):
            return suite_services.save_ref_version(
                suite=suite, source=body.yaml, user=user, ref=_ref(body),
                commit=(body.commit or "").strip()[:64], files=body.files or {},
            )  # fmt: skip
        if suite is None:
            try:
                suite = suite_services.create_suite(
                    owner=user,
                    source=body.yaml,
                    note="created through the API",
                    files=body.files or {},
                    project=project,
                )
            except ValueError as exc:  # the name is taken (made by another request meanwhile)
                raise _Refused(422, {"detail": str(exc)}) from None
        else:
            suite_services.save_version(
                suite=suite, source=body.yaml, user=user, note="saved through the API", files=body.files
            )
        return suite.latest_version
    if body.suite:
        suite = Suite.objects.filter(project=project, name=body.suite).order_by("pk").first()
        if suite is None:
            raise _Refused(404, {"detail": f"the project {project.slug!r} has no suite named {body.suite!r}"})
        version = suite_selectors.version_of(suite, body.version)
        if version is None:
            raise _Refused(404, {"detail": f"{body.suite} has no version {body.version}"})
        return version
    raise _Refused(422, {"detail": "give `suite` (a saved suite's name) or `yaml`"})


class RunFilters(Schema):
    project: str | None = (
        None  # the project's slug; default: the token's project, or the session's current one
    )
    suite: str | None = None  # the suite's name contains this (any case)
    suite_name: str | None = None  # the suite's name is exactly this
    pinned: bool | None = None  # true: only its suite's pinned baseline
    ref: str | None = None  # launched from this CI ref exactly; empty: launched from no ref
    model: str | None = None  # the model reference contains this
    status: str | None = None  # queued, running, passed, failed, error or cancelled
    since: datetime | None = None  # launched at or after
    until: datetime | None = None  # launched before
    limit: int = 50
    offset: int = 0


class RunListOut(Schema):
    count: int
    runs: list[RunOut]


@router.get("", response=RunListOut, summary="List a project's runs, newest first, with filters")
def list_runs(request, filters: Query[RunFilters]):
    project = request_project(request, Can.VIEW, filters.project)
    runs = (
        Run.objects.filter(project=project)
        .select_related("suite_version__suite", "project")
        .defer("summary", "suite_version__source")
    )
    if filters.suite:
        runs = runs.filter(suite_version__suite__name__icontains=filters.suite)
    if filters.suite_name:
        runs = runs.filter(suite_version__suite__name=filters.suite_name)
    if filters.pinned is not None:
        runs = runs.filter(pinned_at__isnull=not filters.pinned)
    if filters.ref is not None:
        runs = runs.filter(ref=filters.ref.strip())
    if filters.model:
        runs = runs.filter(model__icontains=filters.model)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.since:
        runs = runs.filter(created_at__gte=filters.since)
    if filters.until:
        runs = runs.filter(created_at__lt=filters.until)
    limit = max(1, min(filters.limit, 200))
    offset = max(0, filters.offset)
    page = runs.order_by("-created_at")[offset : offset + limit]
    return {"count": runs.count(), "runs": [_run_out(request, run) for run in page]}


class StatusOut(RunOut):
    progress: dict


@router.get("/{run_id}", response=StatusOut, summary="A run's status and progress")
def run_status(request, run_id: UUID):
    run = _run(request, run_id, Can.VIEW)
    return {**_run_out(request, run), "progress": selectors.progress(run)}


@router.get("/{run_id}/progress", summary="A run's live progress")
def run_progress(request, run_id: UUID):
    run = _run(request, run_id, Can.VIEW)
    return {"status": run.status, "state": display.status_words(run), **selectors.progress(run)}


# --- results and their exports ------------------------------------------------------------------------------


@router.get("/{run_id}/results", summary="A run's results (evalsite.results/1)")
def run_results(request, run_id: UUID):
    run = _run(request, run_id, Can.VIEW)
    return selectors.streamed_report(run)  # streamed: a run of 100,000 conversations is never held


def _export_route(entry: exports.ExportFormat) -> None:
    """GET /api/runs/{id}/results.<suffix> for one format of engine.exports.FORMATS."""
    path = f"/{{run_id}}/results.{entry.suffix}"
    name = f"run_export_{entry.key.replace('.', '_')}"

    def export(request, run_id: UUID):
        run = _run(request, run_id, Can.VIEW)
        return export_response(entry, stored_run(run, run_url=_page_url(request, run)))

    def compared(request, run_id: UUID, baseline: UUID | None = None):
        run = _run(request, run_id, Can.VIEW)
        report = selectors.report(run)
        comparison = baseline_url = None
        if baseline is not None:
            base = _run(request, baseline, Can.VIEW)
            comparison = compare.compare_runs(selectors.report(base).evals, report.evals)
            baseline_url = _page_url(request, base)
        source = stored_run(
            run,
            report=report,
            run_url=_page_url(request, run),
            comparison=comparison,
            baseline_url=baseline_url,
        )
        return export_response(entry, source)

    view = compared if entry.compares else export
    view.__name__ = name
    description = (
        "With `baseline` (another run's id), it lists the regressions against it." if entry.compares else None
    )
    router.get(path, summary=entry.summary, description=description, url_name=name)(view)


def _page_url(request, run: Run) -> str:
    return request.build_absolute_uri(reverse("runs:detail", args=[run.pk]))


for _entry in exports.FORMATS.values():
    _export_route(_entry)


# --- acting on a run ----------------------------------------------------------------------------------------


class CancelOut(Schema):
    cancelled: bool
    status: str


@router.post("/{run_id}/cancel", response=CancelOut, summary="Cancel a queued or running run")
def cancel(request, run_id: UUID):
    run = _run(request, run_id, Can.EDIT)
    cancelled = services.cancel(run, by=request.user)
    run.refresh_from_db(fields=["status"])
    return {"cancelled": cancelled, "status": run.status}


class RetryOut(Schema):
    retried: int
    status: str


@router.post(
    "/{run_id}/retry-errored",
    response={200: RetryOut, 409: RefusedOut},
    summary="Retry a finished run's errored conversations",
    description="Each errored conversation is queued again and resumes after its last stored turn; the run "
    "is running until they end. 409 when the run is still going, was cancelled, or has no errors a retry can "
    "change: a re-grade's conversations that diverged from its source run are left as they are.",
)
def retry_errored(request, run_id: UUID):
    run = _run(request, run_id, Can.EDIT)
    try:
        retried = services.retry_errored(run, by=request.user)
    except services.RetryRefused as exc:
        raise HttpError(409, str(exc)) from None
    return {"retried": retried, "status": run.status}


class RegradeIn(Schema):
    version: int | None = None  # a version of the run's suite (default: the latest)


@router.post(
    "/{run_id}/regrade",
    response={201: RunOut, 404: RefusedOut, 409: RefusedOut},
    summary="Re-grade a finished run",
    description="A new run that grades this run's stored conversations again under a version of its suite "
    "(default the latest), calling no model but judges. A conversation whose edited checks would send another "
    "follow-up ends in error, `diverged at turn N: needs a new run`.",
)
def regrade(request, run_id: UUID, body: RegradeIn):
    run = _run(request, run_id, Can.EDIT)
    suite = run.suite_version.suite
    version = suite_selectors.version_of(suite, body.version)
    if version is None:
        return Status(404, {"detail": f"{suite.name} has no version {body.version}"})
    try:
        new = services.regrade(run, version=version, user=request.user)
    except (services.RegradeRefused, services.LaunchError) as exc:
        return Status(409, {"detail": str(exc)})
    return Status(201, _run_out(request, new))


@router.get(
    "/{run_id}/compare/{other_id}",
    summary="Compare two runs",
    description="`run_id` is the earlier run (before), `other_id` the later one (after). Evals are matched "
    "by id; iterated evals compare pass rates.",
)
def compare_runs(request, run_id: UUID, other_id: UUID):
    before = _run(request, run_id, Can.VIEW)
    after = _run(request, other_id, Can.VIEW)
    result = compare.compare_runs(selectors.report(before).evals, selectors.report(after).evals)
    return comparison_json(result, before, after)


def comparison_json(result: compare.Comparison, before: Run, after: Run) -> dict:
    def side(item: compare.Side | None) -> dict | None:
        if item is None:
            return None
        return {
            "status": item.status, "score": item.score, "cost": item.cost, "turns": item.turns,
            "passed_on_turn": item.passed_on_turn, "iterations": item.iterations, "passes": item.passes,
            "graded": item.graded, "pass_rate": item.pass_rate, "pass_rate_low": item.pass_rate_low,
            "pass_rate_high": item.pass_rate_high,
        }  # fmt: skip

    return {
        "before": str(before.pk),
        "after": str(after.pk),
        "counts": {str(change): n for change, n in result.counts.items()},
        "score_before": result.score_before,
        "score_after": result.score_after,
        "score_delta": result.score_delta,
        "cost_before": result.cost_before,
        "cost_after": result.cost_after,
        "cost_delta": result.cost_delta,
        "evals": [
            {
                "id": row.id,
                "change": str(row.change),
                "prompt": row.prompt,
                "before": side(row.before),
                "after": side(row.after),
                "score_delta": row.score_delta,
                "cost_delta": row.cost_delta,
                "rates_differ": row.rates_differ,
            }  # fmt: skip
            for row in result.rows
        ],
    }
