"""Runs API: a run's results in the documented JSON format, its progress, and retrying its errored conversations."""

from uuid import UUID

from django.http import JsonResponse
from ninja import Router, Schema
from ninja.errors import HttpError

from . import selectors, services

router = Router(tags=["runs"])


@router.get("/{run_id}", summary="A run's results (evalsite.results/1)")
def run_results(request, run_id: UUID):
    run = selectors.get_run_for_user(request.user, run_id)
    return JsonResponse(selectors.report(run).model_dump(mode="json"))


@router.get("/{run_id}/progress", summary="A run's live progress")
def run_progress(request, run_id: UUID):
    run = selectors.get_run_for_user(request.user, run_id)
    return {"status": run.status, **selectors.progress(run)}


class RetryOut(Schema):
    retried: int
    status: str


class RefusedOut(Schema):
    detail: str


@router.post(
    "/{run_id}/retry-errored",
    response={200: RetryOut, 409: RefusedOut},
    summary="Retry a finished run's errored conversations",
    description="Each errored conversation is queued again and resumes after its last stored turn; the run "
    "is running until they end. 409 when the run is still going, was cancelled, or has no errors.",
)
def retry_errored(request, run_id: UUID):
    run = selectors.get_run_for_user(request.user, run_id)
    try:
        retried = services.retry_errored(run)
    except services.RetryRefused as exc:
        raise HttpError(409, str(exc)) from None
    return {"retried": retried, "status": run.status}
