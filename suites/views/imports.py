"""Import: convert another tool's suite (vibecheck, Letta Evals, AgentV, promptfoo, agtlantis, calibrate) into an evalsite suite; several
suites at once (a zip of a project, or several suite files) go through import_batch.

Two steps on one URL. A POST with uploaded files (or a pasted suite, with any files it needs) converts them (engine.imports) and shows the report —
the detected tool, what was mapped, what was not, the files still needed — with the generated YAML in an
editable textarea. A POST with `action=create` creates the suite from that (possibly edited) YAML and the
converted files, carried through the page as hidden `file_name[]` / `file_content[]` inputs (or, when
they are too large to carry, uploaded again and converted again). Creating validates first: a broken
suite shows its located problems and nothing is saved.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from engine.attached import check_files
from engine.bounds import loads_json
from engine.imports import KINDS, Imported, ImportProblem, ImportResult
from engine.source import MAX_SUITE_BYTES, SuiteError, SuiteProblem
from projects.access import needs
from projects.roles import Can

from .. import services
from ..forms import TOO_LARGE, normalise_newlines, oversized
from . import import_batch as batch
from .editor import project_to_create_in
from .import_upload import PASTED, carry_limit, convert_upload, read_uploads, render_import


@needs(Can.EDIT)
@login_required
@require_http_methods(["GET", "POST"])
def import_suite(request: HttpRequest) -> HttpResponse:
    project_to_create_in(request)
    if request.method == "GET":
        return render_import(request, {})
    if request.POST.get("action") == "create":
        return _create(request)
    if request.POST.get("action") == "create-all":
        return batch.create_all(request)
    return _convert(request)


def _kind(request: HttpRequest) -> str:
    kind = request.POST.get("kind", "")
    return kind if kind in KINDS else ""


def _pasted(request: HttpRequest) -> str:
    text = normalise_newlines(request.POST.get("pasted", ""))
    return text if text.strip() else ""


def _convert(request: HttpRequest) -> HttpResponse:
    kind = _kind(request)
    if oversized(request.POST.get("pasted", "")):
        error = f"The pasted suite is larger than {MAX_SUITE_BYTES // 1_000_000} MB; nothing was converted."
        return render_import(request, {"error": error, "kind": kind}, status=400)
    pasted = _pasted(request)
    try:
        upload = read_uploads(request, pasted)
        result = convert_upload(upload, kind)
    except ImportProblem as exc:
        error = _for_paste(str(exc)) if pasted else str(exc)
        return render_import(request, {"error": error, "kind": kind, "pasted": pasted}, status=400)
    if isinstance(result, Imported):
        return batch.render_batch(
            request,
            batch.units_of(result),
            failed=result.problems,
            left_out=upload.left_out + result.unreadable,
        )
    return _render_preview(request, result, source=result.source, files=result.files, pasted=pasted)


def _for_paste(message: str) -> str:
    """A converter's message about the pasted text, which it knows only by its stand-in file name."""
    message = message.replace(PASTED, "the pasted suite")
    message = message[:1].upper() + message[1:]
    if "not uploaded" in message:
        message += ". Choose it under “Files it needs” below and convert again; the pasted text stays."
    return message


def _create(request: HttpRequest) -> HttpResponse:
    kind = _kind(request)
    if oversized(request.POST.get("source", "")) or oversized(request.POST.get("pasted", "")):
        return render_import(request, {"error": f"Not created: {TOO_LARGE}.", "kind": kind}, status=400)
    result = _report_from(request.POST.get("report", ""), kind)
    source = normalise_newlines(request.POST.get("source", ""))
    try:
        if request.FILES.getlist("files"):  # too large to carry: the same files, uploaded again
            converted = convert_upload(read_uploads(request, _pasted(request)), kind)
            if isinstance(converted, Imported):
                raise ImportProblem("these are not the files of this suite: choose the same files again")
            files = converted.files
            result.needs_files = converted.needs_files
        else:
            files = _carried_files(request)
    except ImportProblem as exc:
        return _render_preview(
            request, result, source=source, files={}, error=str(exc), status=400, carried=False
        )
    if result.needs_files:
        return _render_preview(
            request,
            result,
            source=source,
            files=files,
            error="Not created: upload the missing files with the others and import again.",
            status=400,
        )
    tool = result.tool or "another tool"
    try:
        suite = services.create_suite(
            owner=request.user,
            source=source,
            note=f"imported from {tool}",
            files=files,
            project=project_to_create_in(request),
        )
    except SuiteError as exc:
        count = len(exc.problems)
        error = f"Not created: {count} problem{'' if count == 1 else 's'} to fix, nothing was saved."
        return _render_preview(
            request, result, source=source, files=files, error=error, status=400, problems=exc.problems
        )
    except ValueError as exc:
        return _render_preview(request, result, source=source, files=files, error=str(exc), status=400)
    messages.success(request, f"Imported “{suite.name}” from {tool} — v1 saved.")
    return redirect("suites:detail", public_id=suite.public_id)


def _carried_files(request: HttpRequest) -> dict[str, str]:
    names = request.POST.getlist("file_name[]")
    contents = request.POST.getlist("file_content[]")
    if len(names) != len(contents):
        raise ImportProblem("the converted files did not come back whole: import the files again")
    files = {name: normalise_newlines(content) for name, content in zip(names, contents, strict=True)}
    try:
        check_files(files)
    except SuiteError as exc:
        refused = "; ".join(str(problem) for problem in exc.problems)
        raise ImportProblem(f"{refused}: import the files again") from None
    return files


def _report_from(raw: str, kind: str) -> ImportResult:
    """The import report, carried through the page as JSON (display only: it decides nothing)."""
    try:
        data = loads_json(raw) if raw else {}
    except ValueError:  # nested too deeply included: the page sent it back, but anyone can post anything
        data = {}
    if not isinstance(data, dict):
        data = {}

    def lines(key: str) -> list[str]:
        value = data.get(key)
        return [str(line) for line in value] if isinstance(value, list) else []

    found = data.get("kind") if data.get("kind") in KINDS else kind
    return ImportResult(
        source="",
        mapped=lines("mapped"),
        unmapped=lines("unmapped"),
        needs_files=lines("needs_files"),
        kind=found or "",
        lost=lines("lost"),
    )


def _render_preview(
    request: HttpRequest,
    result: ImportResult,
    *,
    source: str,
    files: dict[str, str],
    error: str | None = None,
    status: int = 200,
    problems: list[SuiteProblem] | None = None,
    carried: bool = True,
    pasted: str = "",
) -> HttpResponse:
    lost = [str(loss) for loss in result.losses] or result.lost  # located when just converted
    report = json.dumps(
        {
            "kind": result.kind,
            "mapped": result.mapped,
            "unmapped": result.unmapped,
            "needs_files": result.needs_files,
            "lost": lost,
        }
    )
    size = sum(len(text.encode("utf-8")) for text in (*files.values(), source, report))
    carry = carried and size <= carry_limit()
    if problems is None and not result.needs_files:
        try:
            spec = services.validate_source(source, files=files)
        except SuiteError as exc:
            problems, spec = exc.problems, None
    else:
        spec = None
    context = {
        "result": result,
        "lost": lost,
        "source": source,
        "files": [
            {"name": name, "content": text, "size": len(text.encode("utf-8"))} for name, text in files.items()
        ],
        "carry": carry,
        "report_json": report,
        "error": error,
        "problems": problems or [],
        "spec": spec,
        "kind": result.kind,
        "line_count": source.count("\n") + 1,
        "pasted": pasted,
    }
    return render_import(request, context, status=status)
