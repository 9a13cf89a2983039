"""Suite pages: the list, a new suite, the editor of a saved one, its versions, live validation and upload."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.module_loading import import_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from engine.source import MAX_SUITE_BYTES, SuiteError, SuiteProblem, decode_source
from engine.suite_diff import diff_suites
from projects.access import check, needs
from projects.current import current_project
from projects.roles import Can

from .. import display, selectors, services
from ..forms import TOO_LARGE, SuiteSourceForm, normalise_newlines, oversized, source_to_show
from ..models import Suite, SuiteVersion
from .editor import (
    Validation,
    first_error,
    not_saved,
    parse_version,
    project_to_create_in,
    render_editor,
    validate_text,
)

DEMO_SUITE = settings.BASE_DIR / "examples" / "demo-mock.yaml"
STARTER_SUITE = """\
name: my-suite
description: What this suite checks, in one line.
model: gpt-4o-mini            # "model" on the default endpoint, "endpoint/model", or "mock"
system: You are a helpful assistant.

evals:
  - id: arithmetic
    prompt: What is 15 * 7?
    checks:
      - match: "*105*"
        # Sent in the same conversation when the check above fails:
        prompt: That is not right. Please recalculate 15 multiplied by 7.
        checks:
          - match: "*105*"
"""


def _launch_saved(request: HttpRequest, suite: Suite, version: SuiteVersion) -> HttpResponse:
    """Save & run: hand the version just saved to what settings name to launch it (runs does)."""
    return import_string(settings.EVALSITE_SAVE_AND_RUN)(request, suite, version)


@needs(Can.VIEW)
@login_required
@require_GET
def suite_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None:
        return render(request, "projects/none_yet.html")
    # Meta.ordering is dropped from GROUP BY queries. The page adds each suite's last run (runs' template tag).
    suites = selectors.suites_in(project).order_by("-updated_at")
    return render(request, "suites/list.html", {"suites": suites, "project": project})


@needs(Can.EDIT)
@login_required
@require_http_methods(["GET", "POST"])
def new(request: HttpRequest) -> HttpResponse:
    project = project_to_create_in(request)
    if request.method == "GET":
        start = request.GET.get("start")
        source = DEMO_SUITE.read_text() if start == "demo" else STARTER_SUITE if start == "starter" else ""
        return render_editor(request, source=source)
    form = SuiteSourceForm(request.POST)
    uploads, file_problems = display.read_uploads(request)
    if not form.is_valid():
        source = source_to_show(request.POST.get("source", ""))
        return render_editor(request, source=source, status=400, error=first_error(form), uploads=uploads)
    source, note = form.cleaned_data["source"], form.cleaned_data["note"]
    again = dict(source=source, note=note, status=400, uploads=uploads, file_problems=file_problems)
    if file_problems:
        return render_editor(request, error=not_saved(SuiteError(file_problems)), **again)
    try:
        suite = services.create_suite(
            owner=request.user, source=source, note=note, files=uploads, project=project
        )
    except SuiteError as exc:
        return render_editor(request, error=not_saved(exc), **again)
    except ValueError as exc:
        return render_editor(request, error=str(exc), **again)
    version = suite.latest_version
    messages.success(request, f"Created “{suite.name}” — v{version.number} saved.")
    if request.POST.get("action") == "launch":
        return _launch_saved(request, suite, version)
    return redirect("suites:detail", public_id=suite.public_id)


@needs(Can.VIEW, to_post=Can.EDIT)
@login_required
@require_http_methods(["GET", "POST"])
def detail(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    suite = selectors.get_suite_for_user(request.user, public_id)
    if request.method == "POST":
        check(request.user, suite.project_id, Can.EDIT)
        return _save(request, suite)
    restored = request.GET.get("from_version", "")
    if restored.isdigit():
        version = selectors.get_version_for_user(request.user, public_id, int(restored))
        return render_editor(request, suite=suite, source=version.source, restored_from=version)
    return render_editor(request, suite=suite)


def _save(request: HttpRequest, suite: Suite) -> HttpResponse:
    form = SuiteSourceForm(request.POST)
    base = request.POST.get("base_version", "")
    base_version = int(base) if base.isdigit() else None
    if not form.is_valid():
        source = source_to_show(request.POST.get("source", ""))
        return render_editor(
            request,
            suite=suite,
            source=source,
            status=400,
            error=first_error(form),
            base_version=base_version,
        )
    source, note = form.cleaned_data["source"], form.cleaned_data["note"]
    previous = suite.latest_version
    try:
        version = services.save_version(suite=suite, source=source, user=request.user, note=note)
    except SuiteError as exc:
        return render_editor(
            request,
            suite=suite,
            source=source,
            note=note,
            status=400,
            error=not_saved(exc, previous),
            base_version=base_version,
        )
    if previous is not None and version.pk == previous.pk:
        messages.info(request, f"No changes — v{version.number} already has this text.")
    else:
        messages.success(request, f"Saved v{version.number}.")
        if previous is not None and base_version is not None and base_version != previous.number:
            messages.warning(
                request,
                f"v{previous.number} was saved after you opened v{base_version} in this editor; "
                f"your text replaced it as v{version.number}. Compare them in the history.",
            )
    if request.POST.get("action") == "launch":
        return _launch_saved(request, suite, version)
    return redirect("suites:detail", public_id=suite.public_id)


@needs(Can.VIEW)
@login_required
@require_GET
def version(request: HttpRequest, public_id: uuid.UUID, number: int) -> HttpResponse:
    version = selectors.get_version_for_user(request.user, public_id, number)
    suite = version.suite
    numbers = list(suite.versions.values_list("number", flat=True))
    context = {
        "suite": suite,
        "version": version,
        "lines": version.source.split("\n"),
        "spec": parse_version(version),
        "files": list(version.files.values("name", "size")),
        "latest_number": suite.latest_version.number if suite.latest_version else None,
        "previous_number": max((n for n in numbers if n < number), default=None),
        "next_number": min((n for n in numbers if n > number), default=None),
    }
    return render(request, "suites/version.html", context)


@needs(Can.VIEW)
@login_required
@require_GET
def version_diff(request: HttpRequest, public_id: uuid.UUID, number: int, other: int) -> HttpResponse:
    """Version `other` (older) against `number` (newer): the YAML diff, and the evals added, removed and
    changed. `?to=N` picks another version from the page's menu."""
    if "older" in request.GET or "newer" in request.GET:  # the page's version menus
        try:
            picked = int(request.GET.get("newer", number)), int(request.GET.get("older", other))
        except ValueError:
            picked = number, other
        return redirect("suites:version_diff", public_id, max(picked), min(picked))
    newer = selectors.get_version_for_user(request.user, public_id, number)
    older = selectors.get_version_for_user(request.user, public_id, other)
    diff = diff_suites(older.source, newer.source, parse_version(older), parse_version(newer))
    numbers = list(newer.suite.versions.order_by("-number").values_list("number", flat=True))
    context = {
        "suite": newer.suite,
        "newer": newer,
        "older": older,
        "diff": diff,
        "numbers": numbers,
    }
    return render(request, "suites/version_diff.html", context)


def _posted_suite(request: HttpRequest, can: Can) -> Suite | None:
    """The suite named by the form's `suite` field, if any, when the user's role allows `can` there."""
    suite_id = request.POST.get("suite")
    if not suite_id:
        return None
    try:
        return selectors.get_suite_for_user(request.user, uuid.UUID(suite_id), can)
    except ValueError:
        raise Http404("no such suite") from None


@needs(Can.VIEW)
@login_required
@require_POST
def validate(request: HttpRequest) -> HttpResponse:
    suite = _posted_suite(request, Can.VIEW)
    source = request.POST.get("source", "")
    if oversized(source):
        validation = Validation(problems=[SuiteProblem(0, 0, "", TOO_LARGE)])
        return render(request, "suites/_problems.html", {"validation": validation, "suite": suite})
    source = normalise_newlines(source)
    if suite is not None:
        latest = suite.latest_version
        files, file_problems = (latest.file_map() if latest else {}), []
    else:  # a new suite: the files chosen in its form come along with every check
        files, file_problems = display.read_uploads(request)
    validation = validate_text(source, current_project(request), suite, files, file_problems=file_problems)
    return render(request, "suites/_problems.html", {"validation": validation, "suite": suite})


@needs(Can.EDIT)
@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """Save a .yaml file from disk, as a new suite or (with `suite`) a new version of one.

    The bytes are checked first (the size limit, UTF-8, naming the bad byte); the text then takes the same path as
    typed text, so a broken file is shown in the editor with its located problems and nothing is saved.
    """
    suite = _posted_suite(request, Can.EDIT)
    project = project_to_create_in(request) if suite is None else suite.project
    uploaded = request.FILES.get("file")
    if uploaded is None:
        return render_editor(request, suite=suite, status=400, error="Choose a .yaml file to upload.")
    try:
        source = normalise_newlines(decode_source(uploaded.read(MAX_SUITE_BYTES + 1)))
    except SuiteError as exc:
        problems = "; ".join(str(problem) for problem in exc.problems)
        return render_editor(
            request, suite=suite, status=400, error=f"Not saved: {uploaded.name}: {problems}"
        )
    note = f"uploaded {uploaded.name}"[:200]
    try:
        if suite is None:
            suite = services.create_suite(owner=request.user, source=source, note=note, project=project)
        else:
            services.save_version(suite=suite, source=source, user=request.user, note=note)
    except SuiteError as exc:
        return render_editor(request, suite=suite, source=source, status=400, error=not_saved(exc))
    except ValueError as exc:
        return render_editor(request, source=source, status=400, error=str(exc))
    messages.success(request, f"Saved {uploaded.name} as v{suite.latest_version.number} of “{suite.name}”.")
    return redirect("suites:detail", public_id=suite.public_id)
