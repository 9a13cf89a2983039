"""Suites API: validation and the JSON Schema of the suite format for editors.

Validating needs no role but a signed-in user's; validating against a suite's attached files needs the viewer
role in its project (a suite outside the user's projects, or the token's, is a 404).
"""

from uuid import UUID

from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from ninja import Router, Schema

from endpoints.routes import suite_routes
from engine.loader import load_suite
from engine.schema import json_schema
from engine.source import SuiteError
from projects.current import current_project
from projects.requests import check_request, token_project
from projects.roles import Can

from .models import Suite

router = Router(tags=["suites"])


class ValidateIn(Schema):
    source: str
    suite: UUID | None = None  # validate against this suite's attached files (datasets, history files)


class ProblemOut(Schema):
    line: int
    column: int
    path: str
    message: str
    file: str = ""


class ValidateOut(Schema):
    valid: bool
    name: str | None = None
    evals: int = 0
    problems: list[ProblemOut] = []
    # Where each model reference goes ("model `fake/x` → fake (http://…)"), and what would likely fail there.
    routes: list[str] = []
    warnings: list[ProblemOut] = []


@router.get("/schema.json", auth=None, summary="JSON Schema of the suite format")
def suite_schema(request):
    # Served without login so editors (VS Code's yaml.schemas, etc.) can fetch it.
    return JsonResponse(json_schema())


@router.post("/validate", response=ValidateOut, summary="Validate suite YAML")
def validate(request, payload: ValidateIn):
    files = {}
    project = token_project(request) or current_project(request)
    project_id = project.pk if project is not None else None
    if payload.suite is not None:
        suite = get_object_or_404(Suite, public_id=payload.suite)
        check_request(request, suite.project_id, Can.VIEW)
        project_id = suite.project_id
        latest = suite.latest_version
        files = latest.file_map() if latest else {}
    try:
        spec = load_suite(payload.source, files=files)
    except SuiteError as exc:
        return ValidateOut(
            valid=False, problems=[ProblemOut(**problem.as_dict()) for problem in exc.problems]
        )
    routes = suite_routes(spec, payload.source, project_id=project_id)
    return ValidateOut(
        valid=True,
        name=spec.name,
        evals=len(spec.evals),
        routes=[str(line) for line in routes.lines],
        warnings=[ProblemOut(**warning.as_dict()) for warning in routes.warnings],
    )
