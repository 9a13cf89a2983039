"""Suite pages: the list, the YAML editor with live validation, attached files, a dataset preview, version
history and the launch panel.

Saving goes through suites.services, which validates first: a broken suite (or a file it cannot use)
re-renders the editor with the located problems and the user's text, HTTP 400, and stores nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from engine.loader import MAX_SUITE_BYTES, SuiteError, SuiteProblem, decode_source
from engine.schema import Suite as SuiteSpec
from engine.text import plural
from runs import selectors as run_selectors
from runs.endpoint_checks import SuiteRoutes, model_choices, suite_routes
from runs.services import LaunchError, create_run

from . import display, selectors, services
from .forms import LaunchForm, SuiteSourceForm, normalise_newlines
from .models import Suite, SuiteVersion

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
RECENT_RUNS = 8
VERSIONS_SHOWN = 50


@dataclass
class Validation:
    """What the problems panel shows for a piece of YAML and the files it would be saved with."""

    empty: bool = False
    spec: SuiteSpec | None = None
    problems: list[SuiteProblem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Where its model references go, and located warnings about them (an unknown endpoint, an unset key).
    routes: SuiteRoutes | None = None

    @property
    def valid(self) -> bool:
        return self.spec is not None and not self.problems

    @property
    def conversations(self) -> int:
        """How many conversations a run of it plays: every iteration of every eval is one."""
        spec = self.spec
        return sum(ev.iterations or spec.iterations for ev in spec.evals) if spec is not None else 0


def _validate(
    source: str,
    user,
    suite: Suite | None,
    files: Mapping[str, str],
    *,
    file_problems: list[SuiteProblem] = (),
    known: SuiteSpec | None = None,
    idle_when_empty: bool = True,
) -> Validation:
    """`known`: the spec of exactly this source with these files, already parsed (the saved version).
    `idle_when_empty`: an empty editor shows a hint rather than a problem, except after a failed save."""
    if idle_when_empty and not source.strip():
        return Validation(empty=True, problems=list(file_problems))
    spec = known
    if spec is None:
        try:
            spec = services.validate_source(source, files=files)
        except SuiteError as exc:
            return Validation(problems=[*file_problems, *exc.problems])
    result = Validation(spec=spec, problems=list(file_problems), routes=suite_routes(spec, source))
    if suite is None and selectors.suites_for(user).filter(name=spec.name).exists():
        result.warnings.append(
            f"You already have a suite named “{spec.name}”: change `name` to create a new one."
        )
    elif suite is not None and spec.name != suite.name:
        result.warnings.append(
            f"This suite keeps its name “{suite.name}”; `name` is only read when a suite is created."
        )
    return result


def _parse(version: SuiteVersion | None, files: Mapping[str, str] | None = None) -> SuiteSpec | None:
    if version is None:
        return None
    try:
        return services.validate_source(version.source, files=version.file_map() if files is None else files)
    except SuiteError:
        return None


def _render_editor(
    request: HttpRequest,
    *,
    suite: Suite | None = None,
    source: str | None = None,
    note: str = "",
    status: int = 200,
    error: str | None = None,
    error_anchor: str = "problems",
    launch_form: LaunchForm | None = None,
    launch_error: str | None = None,
    base_version: int | None = None,
    restored_from: SuiteVersion | None = None,
    uploads: Mapping[str, str] | None = None,
    file_problems: list[SuiteProblem] = (),
    files_error: str | None = None,
) -> HttpResponse:
    """The editor page. `uploads`: files sent with a new suite that failed to save (checked with its text);
    `files_error` and `file_problems`: an attach or remove that failed, shown in the Files panel."""
    context: dict = {
        "suite": suite,
        "note": note,
        "error": error,
        "error_anchor": error_anchor,
        "schema_url": reverse("api:suite_schema"),
        "files_error": files_error,
        "file_problems": file_problems,
        # A browser does not keep chosen files after a failed save: say which ones to choose again.
        "uploaded_names": sorted({*(uploads or {}), *(p.file for p in file_problems if p.file)}),
    }
    files: dict[str, str] = dict(uploads or {})
    latest = latest_spec = None
    if suite is not None:
        versions = list(suite.versions.select_related("created_by").order_by("-number")[:VERSIONS_SHOWN])
        latest = versions[0] if versions else None
        if source is None:
            source = latest.source if latest else ""
        attached = list(latest.files.all()) if latest else []
        files = {item.name: item.content for item in attached}
        latest_spec = _parse(latest, files)
        numbers = [version.number for version in versions]
        context.update(
            versions=versions,
            latest=latest,
            latest_spec=latest_spec,
            attached=display.file_rows(attached, latest_spec),
            base_version=base_version or (latest.number if latest else None),
            restored_from=restored_from,
            runs=run_selectors.recent_runs(request.user, RECENT_RUNS, suite_version__suite=suite),
            launch_form=launch_form
            or LaunchForm(
                initial={"concurrency": 10, "version": numbers[0] if numbers else None}, versions=numbers
            ),
            launch_error=launch_error,
        )
        context.update(_launch_panel(request, latest_spec, (launch_form or context["launch_form"])))
    context["source"] = source or ""
    # Text the page shows that is not the saved version: the editor warns before it is lost.
    saved = latest.source if latest else ""
    context["dirty"] = context["source"] != saved
    context["line_numbers"] = "\n".join(str(n) for n in range(1, context["source"].count("\n") + 2))
    # The saved text with its saved files was parsed just above; a 10,000-row dataset is not parsed twice.
    known = latest_spec if latest is not None and context["source"] == latest.source else None
    validation = _validate(
        context["source"],
        request.user,
        suite,
        files,
        file_problems=[] if suite else file_problems,
        known=known,
        idle_when_empty=error is None,
    )
    context["validation"] = validation
    name = validation.spec.dataset if validation.spec is not None else display.dataset_name(context["source"])
    context["dataset"] = display.dataset_panel(name, files)
    return render(request, "suites/editor.html", context, status=status)


def _launch_panel(request: HttpRequest, spec: SuiteSpec | None, form: LaunchForm) -> dict:
    """The launch form's model suggestions, and where the chosen model (and the judges) will go."""
    model = (form["model"].value() or "").strip()
    return {
        "model_choices": model_choices(request.user, spec),
        "launch_routes": suite_routes(spec, model=model or None) if spec is not None else None,
    }


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
@require_GET
def suite_list(request: HttpRequest) -> HttpResponse:
    suites = run_selectors.with_last_run(selectors.suites_for(request.user), request.user)
    suites = suites.order_by("-updated_at")  # Meta.ordering is dropped from GROUP BY queries
    return render(request, "suites/list.html", {"suites": suites})


@login_required
@require_http_methods(["GET", "POST"])
def new(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        start = request.GET.get("start")
        source = DEMO_SUITE.read_text() if start == "demo" else STARTER_SUITE if start == "starter" else ""
        return _render_editor(request, source=source)
    form = SuiteSourceForm(request.POST)
    uploads, file_problems = display.read_uploads(request)
    if not form.is_valid():
        source = normalise_newlines(request.POST.get("source", ""))
        return _render_editor(request, source=source, status=400, error=_first_error(form), uploads=uploads)
    source, note = form.cleaned_data["source"], form.cleaned_data["note"]
    again = dict(source=source, note=note, status=400, uploads=uploads, file_problems=file_problems)
    if file_problems:
        return _render_editor(request, error=_not_saved(SuiteError(file_problems)), **again)
    try:
        suite = services.create_suite(owner=request.user, source=source, note=note, files=uploads)
    except SuiteError as exc:
        return _render_editor(request, error=_not_saved(exc), **again)
    except ValueError as exc:
        return _render_editor(request, error=str(exc), **again)
    version = suite.latest_version
    messages.success(request, f"Created “{suite.name}” — v{version.number} saved.")
    if request.POST.get("action") == "launch":
        return _launch_saved(request, suite, version)
    return redirect("suites:detail", public_id=suite.public_id)


@login_required
@require_http_methods(["GET", "POST"])
def detail(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    suite = selectors.get_suite_for_user(request.user, public_id)
    if request.method == "POST":
        return _save(request, suite)
    restored = request.GET.get("from_version", "")
    if restored.isdigit():
        version = selectors.get_version_for_user(request.user, public_id, int(restored))
        return _render_editor(request, suite=suite, source=version.source, restored_from=version)
    return _render_editor(request, suite=suite)


def _save(request: HttpRequest, suite: Suite) -> HttpResponse:
    form = SuiteSourceForm(request.POST)
    base = request.POST.get("base_version", "")
    base_version = int(base) if base.isdigit() else None
    if not form.is_valid():
        source = normalise_newlines(request.POST.get("source", ""))
        return _render_editor(
            request,
            suite=suite,
            source=source,
            status=400,
            error=_first_error(form),
            base_version=base_version,
        )
    source, note = form.cleaned_data["source"], form.cleaned_data["note"]
    previous = suite.latest_version
    try:
        version = services.save_version(suite=suite, source=source, user=request.user, note=note)
    except SuiteError as exc:
        return _render_editor(
            request,
            suite=suite,
            source=source,
            note=note,
            status=400,
            error=_not_saved(exc, previous),
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


def _not_saved(exc: SuiteError, previous: SuiteVersion | None = None) -> str:
    count = len(exc.problems)
    kept = f" v{previous.number} is unchanged." if previous is not None else ""
    return f"Not saved: {count} problem{'' if count == 1 else 's'} to fix, nothing was stored.{kept}"


def _first_error(form) -> str:
    return next(f"{name}: {errors[0]}" for name, errors in form.errors.items())


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
        "spec": _parse(version),
        "files": list(version.files.values("name", "size")),
        "latest_number": max(numbers),
        "previous_number": max((n for n in numbers if n < number), default=None),
        "next_number": min((n for n in numbers if n > number), default=None),
        "runs": run_selectors.recent_runs(request.user, RECENT_RUNS, suite_version=version),
    }
    return render(request, "suites/version.html", context)


def _posted_suite(request: HttpRequest) -> Suite | None:
    """The user's suite named by the form's `suite` field, if any (404 for anyone else's)."""
    suite_id = request.POST.get("suite")
    if not suite_id:
        return None
    try:
        return selectors.get_suite_for_user(request.user, uuid.UUID(suite_id))
    except ValueError:
        raise Http404("no such suite") from None


@login_required
@require_POST
def validate(request: HttpRequest) -> HttpResponse:
    suite = _posted_suite(request)
    source = normalise_newlines(request.POST.get("source", ""))
    if suite is not None:
        latest = suite.latest_version
        files, file_problems = (latest.file_map() if latest else {}), []
    else:  # a new suite: the files chosen in its form come along with every check
        files, file_problems = display.read_uploads(request)
    validation = _validate(source, request.user, suite, files, file_problems=file_problems)
    return render(request, "suites/editor.html#problems", {"validation": validation, "suite": suite})


@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """Save a .yaml file from disk, as a new suite or (with `suite`) a new version of one.

    The bytes are checked first (1 MB, UTF-8, naming the bad byte); the text then takes the same path as
    typed text, so a broken file is shown in the editor with its located problems and nothing is saved.
    """
    suite = _posted_suite(request)
    uploaded = request.FILES.get("file")
    if uploaded is None:
        return _render_editor(request, suite=suite, status=400, error="Choose a .yaml file to upload.")
    try:
        source = normalise_newlines(decode_source(uploaded.read(MAX_SUITE_BYTES + 1)))
    except SuiteError as exc:
        problems = "; ".join(str(problem) for problem in exc.problems)
        return _render_editor(
            request, suite=suite, status=400, error=f"Not saved: {uploaded.name}: {problems}"
        )
    note = f"uploaded {uploaded.name}"[:200]
    try:
        if suite is None:
            suite = services.create_suite(owner=request.user, source=source, note=note)
        else:
            services.save_version(suite=suite, source=source, user=request.user, note=note)
    except SuiteError as exc:
        return _render_editor(request, suite=suite, source=source, status=400, error=_not_saved(exc))
    except ValueError as exc:
        return _render_editor(request, source=source, status=400, error=str(exc))
    messages.success(request, f"Saved {uploaded.name} as v{suite.latest_version.number} of “{suite.name}”.")
    return redirect("suites:detail", public_id=suite.public_id)


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


# --- Attached files -----------------------------------------------------------------------------------------


def _files_url(suite: Suite) -> str:
    return reverse("suites:detail", args=[suite.public_id]) + "#files"


@login_required
@require_POST
def attach_files(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Attach (or replace) files: a new version with the same YAML. All or nothing: one bad file, or a suite
    the new files would break, stores nothing and leaves the latest version as it is."""
    suite = selectors.get_suite_for_user(request.user, public_id)
    uploads, problems = display.read_uploads(request)
    previous = suite.latest_version
    if not uploads and not problems:
        return _render_editor(
            request, suite=suite, status=400, files_error="Choose one or more files to attach."
        )
    if not problems:
        try:
            version = services.change_files(suite=suite, user=request.user, add=uploads)
        except SuiteError as exc:
            problems = exc.problems
    if problems:
        message = f"Not attached: {plural(len(problems), 'problem')}, nothing was stored."
        return _render_editor(
            request,
            suite=suite,
            status=400,
            error=f"{message} v{previous.number} is unchanged.",
            error_anchor="files",
            files_error=message,
            file_problems=problems,
        )
    names = ", ".join(sorted(uploads))
    if version.pk == previous.pk:
        messages.info(request, f"No changes — v{version.number} already has {names} exactly as uploaded.")
    else:
        messages.success(request, f"Attached {names} — saved v{version.number}.")
    return redirect(_files_url(suite))


@login_required
@require_POST
def remove_file(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Remove an attached file: a new version without it. Asks first (`confirm=yes`, added by a JS dialog or
    by the confirmation page); a file the suite still uses is refused with the suite's own problem."""
    suite = selectors.get_suite_for_user(request.user, public_id)
    name = request.POST.get("name", "")
    latest = suite.latest_version
    attached = latest.files.filter(name=name).only("name", "size").first() if latest else None
    if attached is None:
        messages.info(
            request, f"{name or 'That file'} is not attached to v{latest.number}; nothing to remove."
        )
        return redirect(_files_url(suite))
    if request.POST.get("confirm") != "yes":
        spec = _parse(latest)
        context = {
            "suite": suite,
            "latest": latest,
            "file": attached,
            "used": spec is not None and name in spec.files_used(),
            "is_dataset": spec is not None and spec.dataset == name,
        }
        return render(request, "suites/remove_file.html", context)
    try:
        version = services.change_files(suite=suite, user=request.user, remove=[name])
    except SuiteError as exc:
        message = f"Not removed: the suite still needs {name}; stop using it in the YAML first."
        return _render_editor(
            request,
            suite=suite,
            status=400,
            error=f"{message} v{latest.number} is unchanged.",
            error_anchor="files",
            files_error=message,
            file_problems=exc.problems,
        )
    messages.success(request, f"Removed {name} — saved v{version.number}.")
    return redirect(_files_url(suite))


@login_required
@require_GET
def version_file(request: HttpRequest, public_id: uuid.UUID, number: int, name: str) -> HttpResponse:
    """An attached file of one version, as a download (never rendered as a page: it is user content)."""
    version = selectors.get_version_for_user(request.user, public_id, number)
    attached = version.files.filter(name=name).first()
    if attached is None:
        raise Http404("no such file")
    response = HttpResponse(attached.content, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    return response
