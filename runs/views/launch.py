"""Launching a run from a suite's pages: the launch panel's form, Save & run, and the panel's
"model → endpoint" line as you choose. The URLs sit under the suite's (evalsite.urls adds them there)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from endpoints.routes import suite_routes
from engine.matrix import VariantError
from engine.options import RunOptions
from engine.source import SuiteError
from projects.access import needs
from projects.roles import Can
from suites import selectors as suite_selectors
from suites.models import Suite, SuiteVersion
from suites.views.editor import parse_version, render_editor

from ..launching import (
    LaunchForm,
    as_launched,
    cache_option,
    launch_cap,
    launch_costs,
    launch_variants,
    launch_vars,
    limit_note,
)
from ..matrix import create_matrix
from ..services import ConcurrencyRefused, LaunchError, create_run


def _warn_launched(request: HttpRequest, version: SuiteVersion, model: str | None) -> None:
    """What looked likely to fail in the run just launched, on the run page until the model answers (the
    `run-launch` tag: templates/runs/run/_launch_warnings.html)."""
    spec = parse_version(version)
    if spec is not None:
        for warning in suite_routes(spec, model=model, project_id=version.suite.project_id).warnings:
            messages.warning(request, f"{warning.path}: {warning.message}", extra_tags="run-launch")


def launch_saved(request: HttpRequest, suite: Suite, version: SuiteVersion) -> HttpResponse:
    """Save & run (settings.EVALSITE_SAVE_AND_RUN): launch what was just saved, on the suite's own model."""
    try:
        run = create_run(version=version, user=request.user)
    except (LaunchError, SuiteError) as exc:
        messages.error(request, f"Saved v{version.number}, but the run could not start: {exc}")
        return redirect("suites:detail", public_id=suite.public_id)
    _warn_launched(request, version, None)
    return redirect("runs:detail", run_id=run.pk)


def with_variant(options: RunOptions | None, variant) -> RunOptions | None:
    """The form's options with a lone `model@key=value` variant's settings over its model settings."""
    if variant is None or not variant.model_settings:
        return options
    options = options or RunOptions()
    own = options.model_settings
    settings = own.merged(variant.model_settings) if own is not None else variant.model_settings
    return options.model_copy(update={"model_settings": settings})


def _launchable(suite: Suite) -> tuple[list[int], int | None]:
    """Every version's number, as any may be launched again (a CI run's "Run again" too), and the default:
    the latest of the suite's line, never a version CI kept under its ref."""
    rows = list(suite.versions.order_by("-number").values_list("number", "ref"))
    return [number for number, _ in rows], next((number for number, ref in rows if not ref), None)


@needs(Can.EDIT)
@login_required
@require_POST
def launch(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    suite = suite_selectors.get_suite_for_user(request.user, public_id, Can.EDIT)
    numbers, latest = _launchable(suite)
    form = LaunchForm(request.POST, versions=numbers)
    error = None
    if form.is_valid():
        version = suite_selectors.get_version_for_user(
            request.user, public_id, form.cleaned_data["version"] or latest
        )
        try:
            spec = parse_version(version)
            variants = launch_variants(form, spec)
            cache = cache_option(form, spec)
            if len(variants) > 1:
                matrix = create_matrix(
                    version=version, user=request.user, variants=variants,
                    concurrency=form.cleaned_data["concurrency"], vars=launch_vars(request.POST),
                    options=form.options(cache),
                )  # fmt: skip
                return redirect("matrices:detail", matrix_id=matrix.pk)
            variant = variants[0] if variants else None
            run = create_run(
                version=version,
                user=request.user,
                model=variant.model if variant else form.cleaned_data["model"] or None,
                concurrency=form.cleaned_data["concurrency"],
                vars=launch_vars(request.POST),
                options=with_variant(form.options(cache), variant),
            )
        except ConcurrencyRefused as exc:  # said beside the field, which keeps what was typed
            form.add_error(exc.field, str(exc))
        except (LaunchError, VariantError) as exc:
            error = str(exc)
        except SuiteError as exc:
            error = f"v{version.number} no longer validates: {exc}"
        else:
            _warn_launched(request, version, run.model if variant else form.cleaned_data["model"] or None)
            return redirect("runs:detail", run_id=run.pk)
    launch_context = {"launch_form": form, "launch_error": error}
    return render_editor(request, suite=suite, status=400, extra_context=launch_context)


@needs(Can.VIEW)
@login_required
@require_GET
def launch_routes(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """The launch panel's "model → endpoint" line, for the model and version chosen so far."""
    suite = suite_selectors.get_suite_for_user(request.user, public_id)
    numbers, latest = _launchable(suite)
    if not numbers:
        raise Http404("no version to launch")
    form = LaunchForm(request.GET, versions=numbers)
    chosen = form.cleaned_data.get("version") if form.is_valid() else None
    spec = parse_version(suite_selectors.get_version_for_user(request.user, public_id, chosen or latest))
    model = (request.GET.get("model") or "").strip()
    routes = (
        suite_routes(spec, model=model or None, project_id=suite.project_id) if spec is not None else None
    )
    spec = as_launched(form, spec)  # the settings typed so far and the cache box, for the estimate
    costs = launch_costs(spec, model, request.GET.get("compare"), suite.project_id)
    context = {
        "launch_routes": routes, "suite": suite, "launch_cost": costs, "launch_form": form,
        # The concurrency field follows the endpoints chosen, out of band (templates/suites/_launch_routes.html).
        "launch_cap": launch_cap(spec, model, request.GET.get("compare"), suite.project_id),
        "launch_cap_oob": True,
        # The cost limit's note, beside its field, redrawn out of band as the Compare with lines change.
        "launch_limit": limit_note(spec, model, request.GET.get("compare")),
        "oob": True,
    }  # fmt: skip
    return render(request, "suites/_launch_routes.html", context)
