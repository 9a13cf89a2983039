"""The YAML editor as every suite page renders it: live validation (located problems, the routes each model
takes, warnings) and the files panel. The pages themselves are in suites.py and files.py beside this module;
the launch panel and the recent runs are runs' own (its `launching` template tags), as is launching.

Saving goes through suites.services, which validates first: a broken suite (or a file it cannot use)
re-renders the editor with the located problems and the user's text, HTTP 400, and stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from endpoints.routes import SuiteRoutes, suite_routes
from engine.schema import Suite as SuiteSpec
from engine.source import SuiteError, SuiteProblem
from projects.access import check, role_of
from projects.current import current_project
from projects.models import Project
from projects.roles import Can, allows

from .. import display, selectors, services
from ..models import Suite, SuiteVersion

VERSIONS_SHOWN = 50


def project_to_create_in(request: HttpRequest) -> Project:
    """The current project, where a new suite goes, when the user may create suites there (a 404 for a user
    of no project, a 403 for a role too low)."""
    project = current_project(request)
    if project is None:
        raise Http404("no project")
    check(request.user, project.pk, Can.EDIT)
    return project


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


def validate_text(
    source: str,
    project,
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
    project_id = suite.project_id if suite is not None else getattr(project, "pk", None)
    routes = suite_routes(spec, source, project_id=project_id)
    result = Validation(spec=spec, problems=list(file_problems), routes=routes)
    if suite is None and project is not None and selectors.suites_in(project).filter(name=spec.name).exists():
        result.warnings.append(
            f"This project already has a suite named “{spec.name}”: change `name` to create a new one."
        )
    elif suite is not None and spec.name != suite.name:
        result.warnings.append(
            f"This suite keeps its name “{suite.name}”; `name` is only read when a suite is created."
        )
    return result


def parse_version(version: SuiteVersion | None, files: Mapping[str, str] | None = None) -> SuiteSpec | None:
    """A saved version's suite, None when it no longer validates (or there is no version)."""
    if version is None:
        return None
    try:
        return services.validate_source(version.source, files=version.file_map() if files is None else files)
    except SuiteError:
        return None


def render_editor(
    request: HttpRequest,
    *,
    suite: Suite | None = None,
    source: str | None = None,
    note: str = "",
    status: int = 200,
    error: str | None = None,
    error_anchor: str = "problems",
    extra_context: Mapping | None = None,
    base_version: int | None = None,
    restored_from: SuiteVersion | None = None,
    uploads: Mapping[str, str] | None = None,
    file_problems: list[SuiteProblem] = (),
    files_error: str | None = None,
) -> HttpResponse:
    """The editor page. `uploads`: files sent with a new suite that failed to save (checked with its text);
    `files_error` and `file_problems`: an attach or remove that failed, shown in the Files panel;
    `extra_context`: what a refused launch gives the launch panel (its form and error)."""
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
        line = suite.versions.select_related("created_by").order_by("-number")
        versions = list(line.filter(ref="")[:VERSIONS_SHOWN])
        # Versions CI sent under a ref: listed apart, as they are not the line people edit.
        ci_versions = list(line.exclude(ref="")[:VERSIONS_SHOWN])
        latest = versions[0] if versions else None
        if source is None:
            source = latest.source if latest else ""
        attached = list(latest.files.all()) if latest else []
        files = {item.name: item.content for item in attached}
        latest_spec = parse_version(latest, files)
        context.update(
            versions=versions,
            ci_versions=ci_versions,
            latest=latest,
            latest_spec=latest_spec,
            attached=display.file_rows(attached, latest_spec),
            base_version=base_version or (latest.number if latest else None),
            restored_from=restored_from,
            **(extra_context or {}),
        )
    context["source"] = source or ""
    # Text the page shows that is not the saved version: the editor warns before it is lost.
    saved = latest.source if latest else ""
    context["dirty"] = context["source"] != saved
    context["line_numbers"] = "\n".join(str(n) for n in range(1, context["source"].count("\n") + 2))
    # The saved text with its saved files was parsed just above: a large dataset is not parsed twice.
    known = latest_spec if latest is not None and context["source"] == latest.source else None
    validation = validate_text(
        context["source"],
        current_project(request),
        suite,
        files,
        file_problems=[] if suite else file_problems,
        known=known,
        idle_when_empty=error is None,
    )
    context["validation"] = validation
    project_id = suite.project_id if suite is not None else getattr(current_project(request), "pk", None)
    context["can_edit"] = allows(role_of(request.user, project_id), Can.EDIT)
    name = validation.spec.dataset if validation.spec is not None else display.dataset_name(context["source"])
    context["dataset"] = display.dataset_panel(name, files)
    return render(request, "suites/editor.html", context, status=status)


def not_saved(exc: SuiteError, previous: SuiteVersion | None = None) -> str:
    count = len(exc.problems)
    kept = f" v{previous.number} is unchanged." if previous is not None else ""
    return f"Not saved: {count} problem{'' if count == 1 else 's'} to fix, nothing was stored.{kept}"


def first_error(form) -> str:
    return next(f"{name}: {errors[0]}" for name, errors in form.errors.items())
