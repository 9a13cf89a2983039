"""Runs API: a run's results in the documented JSON format, and its progress."""

from uuid import UUID

from django.http import JsonResponse
from ninja import Router

from . import selectors

router = Router(tags=["runs"])


@router.get("/{run_id}", summary="A run's results (evalsite.results/1)")
def run_results(request, run_id: UUID):
    run = selectors.get_run_for_user(request.user, run_id)
    return JsonResponse(selectors.report(run).model_dump(mode="json"))


@router.get("/{run_id}/progress", summary="A run's live progress")
def run_progress(request, run_id: UUID):
    run = selectors.get_run_for_user(request.user, run_id)
    return {"status": run.status, **selectors.progress(run)}
