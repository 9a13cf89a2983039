"""Launching a run from the editor's launch panel, and the panel's "model → endpoint" line as you choose."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from engine.source import SuiteError
from runs.endpoint_checks import suite_routes
from runs.services import LaunchError, create_run

from .. import selectors
from ..forms import LaunchForm, launch_vars
from ..models import Suite, SuiteVersion
from .editor import _parse, _render_editor


def _warn_launched(request: HttpRequest, version: SuiteVersion, model: str | None) -> None:
    """What looked likely to fail in the run just launched, on the run page."""
    spec = _parse(version)
    if spec is not None:
        for warning in suite_routes(spec, model=model).warnings:
            messages.warning(request, f"{warning.path}: {warning.message}")


def _launch_saved(request: HttpRequest, suite: Suite, version: SuiteVersion) -> HttpResponse:
    """Save & run: launch what was just saved, on the suite's own model."""
    try:
        run = create_run(version=version, user=request.user)
    except (LaunchError, SuiteError) as exc:
        messages.error(request, f"Saved v{version.number}, but the run could not start: {exc}")
        return redirect("suites:detail", public_id=suite.public_id)
    _warn_launched(request, version, None)
    return redirect("runs:detail", run_id=run.pk)


@login_required
@require_POST
def launch(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    suite = selectors.get_suite_for_user(request.user, public_id)
    numbers = list(suite.versions.order_by("-number").values_list("number", flat=True))
    form = LaunchForm(request.POST, versions=numbers)
    error = None
    if form.is_valid():
        version = selectors.get_version_for_user(
            request.user, public_id, form.cleaned_data["version"] or numbers[0]
        )
        try:
            run = create_run(
                version=version,
                user=request.user,
                model=form.cleaned_data["model"] or None,
                concurrency=form.cleaned_data["concurrency"],
                vars=launch_vars(request.POST),
            )
        except LaunchError as exc:
            error = str(exc)
        except SuiteError as exc:
            error = f"v{version.number} no longer validates: {exc}"
        else:
            _warn_launched(request, version, form.cleaned_data["model"] or None)
            return redirect("runs:detail", run_id=run.pk)
    return _render_editor(request, suite=suite, status=400, launch_form=form, launch_error=error)


@login_required
@require_GET
def launch_routes(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """The launch panel's "model → endpoint" line, for the model and version chosen so far."""
    suite = selectors.get_suite_for_user(request.user, public_id)
    numbers = list(suite.versions.order_by("-number").values_list("number", flat=True))
    if not numbers:
        raise Http404("no version to launch")
    form = LaunchForm(request.GET, versions=numbers)
    chosen = form.cleaned_data.get("version") if form.is_valid() else None
    spec = _parse(selectors.get_version_for_user(request.user, public_id, chosen or numbers[0]))
    model = (request.GET.get("model") or "").strip()
    routes = suite_routes(spec, model=model or None) if spec is not None else None
    return render(request, "suites/editor.html#launch-routes", {"launch_routes": routes, "suite": suite})
