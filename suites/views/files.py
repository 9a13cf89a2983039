"""A suite's attached files: attach or replace, remove (asking first when the suite uses the file), download."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from engine.source import SuiteError
from engine.text import plural
from projects.access import needs
from projects.roles import Can

from .. import display, selectors, services
from ..models import Suite
from .editor import parse_version, render_editor


def _files_url(suite: Suite) -> str:
    return reverse("suites:detail", args=[suite.public_id]) + "#files"


@needs(Can.EDIT)
@login_required
@require_POST
def attach_files(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Attach (or replace) files: a new version with the same YAML. All or nothing: one bad file, or a suite
    the new files would break, stores nothing and leaves the latest version as it is."""
    suite = selectors.get_suite_for_user(request.user, public_id, Can.EDIT)
    uploads, problems = display.read_uploads(request)
    previous = suite.latest_version
    if not uploads and not problems:
        return render_editor(
            request, suite=suite, status=400, files_error="Choose one or more files to attach."
        )
    if not problems:
        try:
            version = services.change_files(suite=suite, user=request.user, add=uploads)
        except SuiteError as exc:
            problems = exc.problems
    if problems:
        message = f"Not attached: {plural(len(problems), 'problem')}, nothing was stored."
        return render_editor(
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


@needs(Can.EDIT)
@login_required
@require_POST
def remove_file(request: HttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """Remove an attached file: a new version without it. Asks first (`confirm=yes`, added by a JS dialog or
    by the confirmation page); a file the suite still uses is refused with the suite's own problem."""
    suite = selectors.get_suite_for_user(request.user, public_id, Can.EDIT)
    name = request.POST.get("name", "")
    latest = suite.latest_version
    attached = latest.files.filter(name=name).only("name", "size").first() if latest else None
    if attached is None:
        messages.info(
            request, f"{name or 'That file'} is not attached to v{latest.number}; nothing to remove."
        )
        return redirect(_files_url(suite))
    if request.POST.get("confirm") != "yes":
        spec = parse_version(latest)
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
        return render_editor(
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


@needs(Can.VIEW)
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
