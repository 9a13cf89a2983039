"""Import of several suites at once: a zip of a project as the tool lays it out, or several suite files
chosen together (engine.imports.convert_all).

The preview lists each suite: where it came from, what it became, what it lost (a check, a grader or a
user turn: shown first), what was not converted, and the files it still needs. One `Create all` saves
every suite in one transaction (suites.services.create_suites): a problem in any of them, or a name that
is taken, saves none and says which. The converted suites ride along in hidden `suite[]` fields as JSON,
validated again on saving, or, when too large to carry, the same files are uploaded again.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from engine.bounds import loads_json
from engine.imports import KINDS, Imported, ImportProblem, ImportResult
from engine.source import SuiteError

from .. import services
from ..forms import normalise_newlines
from . import import_upload
from .editor import project_to_create_in
from .import_upload import carry_limit, convert_upload, read_uploads, render_import


def units_of(imported: Imported) -> list[dict]:
    return [_unit(result) for result in imported.results]


def _unit(result: ImportResult) -> dict:
    """One suite as the page carries it: what decides (source, files) and what is only shown (the rest)."""
    return {
        "origin": result.origin,
        "kind": result.kind,
        "source": result.source,
        "files": result.files,
        "mapped": result.mapped,
        "unmapped": [line for line in result.unmapped if line not in set(result.lost)],
        "losses": [str(loss) for loss in result.losses] or list(result.lost),
        "needs_files": result.needs_files,
    }


def _carried(request: HttpRequest) -> list[dict]:
    """The suites the preview carried back: anyone can post anything, so each value is checked for shape;
    what decides (source, files) is validated again when it is saved."""
    units = []
    posted = request.POST.getlist("suite[]")
    limit = import_upload.MAX_SUITES
    if len(posted) > limit:
        raise ImportProblem(f"at most {limit} suites at a time")
    for raw in posted:
        try:
            data = loads_json(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("source"), str):
            raise ImportProblem("the converted suites did not come back whole: import the files again")
        files = data.get("files") if isinstance(data.get("files"), dict) else {}
        unit = {
            "origin": str(data.get("origin", ""))[:300],
            "kind": data.get("kind") if data.get("kind") in KINDS else "",
        }
        unit["source"] = normalise_newlines(data["source"])
        unit["files"] = {str(name): normalise_newlines(str(text)) for name, text in files.items()}
        for key in ("mapped", "unmapped", "losses", "needs_files"):
            value = data.get(key)
            unit[key] = [str(line) for line in value] if isinstance(value, list) else []
        units.append(unit)
    if not units:
        raise ImportProblem("no converted suites came back: import the files again")
    return units


def create_all(request: HttpRequest) -> HttpResponse:
    failed = [str(line) for line in request.POST.getlist("failed[]")]
    try:
        if request.FILES.getlist("files"):  # too large to carry: the same files, uploaded again
            upload = read_uploads(request)
            converted = convert_upload(upload, "")
            if not isinstance(converted, Imported):
                raise ImportProblem(
                    "these files hold one suite, not the ones shown: choose the same files again"
                )
            units, failed = units_of(converted), converted.problems
        else:
            units = _carried(request)
    except ImportProblem as exc:
        return render_import(request, {"error": str(exc)}, status=400)
    if any(unit["needs_files"] for unit in units):
        error = "Nothing was saved: a suite needs files that were not uploaded (listed below); import again with them."
        return render_batch(request, units, failed=failed, error=error, status=400)
    labelled = [
        (unit["origin"] or f"suite {number}", unit["source"], unit["files"], _note(unit))
        for number, unit in enumerate(units, 1)
    ]
    try:
        created = services.create_suites(
            owner=request.user, suites=labelled, project=project_to_create_in(request)
        )
    except services.SuitesRefused as exc:
        count = len(exc.problems)
        error = f"Nothing was saved: {count} problem{'' if count == 1 else 's'} to fix."
        return render_batch(request, units, failed=failed, error=error, refused=exc.problems, status=400)
    names = ", ".join(f"“{suite.name}”" for suite in created)
    messages.success(request, f"Imported {len(created)} suite{'' if len(created) == 1 else 's'}: {names}.")
    return redirect("suites:list")


def _note(unit: dict) -> str:
    tool = KINDS.get(unit["kind"], "another tool")
    return f"imported from {tool} ({unit['origin']})"[:200] if unit["origin"] else f"imported from {tool}"


def render_batch(
    request: HttpRequest,
    units: list[dict],
    *,
    failed: list[str] = (),
    left_out: list[str] = (),
    error: str | None = None,
    refused: list[str] = (),
    status: int = 200,
) -> HttpResponse:
    shown = []
    for unit in units:
        problems, spec = [], None
        if not unit["needs_files"]:
            try:
                spec = services.validate_source(unit["source"], files=unit["files"])
            except SuiteError as exc:
                problems = [str(problem) for problem in exc.problems]
            except ValueError as exc:
                problems = [str(exc)]
        shown.append(
            {
                **unit,
                "tool": KINDS.get(unit["kind"], unit["kind"]),
                "spec": spec,
                "problems": problems,
                "payload": json.dumps(unit, ensure_ascii=False),
                "file_names": list(unit["files"]),
            }
        )
    size = sum(len(item["payload"].encode("utf-8")) for item in shown)
    context = {
        "batch": shown,
        "failed": list(failed),
        "left_out": list(left_out),
        "error": error,
        "refused": list(refused),
        "carry": size <= carry_limit(),
        "lost_count": sum(len(item["losses"]) for item in shown),
        "blocked": any(item["needs_files"] or item["problems"] for item in shown),
    }
    return render_import(request, context, status=status)
