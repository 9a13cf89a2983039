"""How the suite pages show attached files and datasets, and read files sent from a form.

Plain functions; the views choose what to query and the templates lay it out.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest

from engine.datasets import preview as dataset_preview
from engine.history import INSTRUCTIONS_SUFFIX
from engine.schema import Suite as SuiteSpec
from engine.source import SuiteError, SuiteProblem, parse_yaml

from .models import SuiteFile
from .services import MAX_FILE_BYTES, decode_file

DATASET_PREVIEW_ROWS = 5


def read_uploads(request: HttpRequest) -> tuple[dict[str, str], list[SuiteProblem]]:
    """The files of a multipart `files` field as text, and the problems of those that are not acceptable."""
    files: dict[str, str] = {}
    problems: list[SuiteProblem] = []
    for uploaded in request.FILES.getlist("files"):
        # One byte over the limit is enough to refuse it; no need to read a huge file to the end.
        data = uploaded.read(MAX_FILE_BYTES + 1)
        try:
            files[uploaded.name] = decode_file(uploaded.name, data)
        except SuiteError as exc:
            problems += exc.problems
    return files, problems


def dataset_name(source: str) -> str | None:
    """The `dataset` a piece of YAML names, read leniently: the preview helps most when the suite is broken."""
    try:
        raw, _ = parse_yaml(source)
    except SuiteError:
        return None
    name = raw.get("dataset")
    return name if isinstance(name, str) and name else None


def dataset_panel(name: str | None, files: Mapping[str, str]) -> dict | None:
    """The row count and the first rows of the suite's dataset, or its problems with their line numbers.

    Only the first rows are rendered, so a 10,000-row dataset costs one parse, not a 10,000-row table.
    """
    if not name:
        return None
    if name not in files:
        return {"name": name, "attached": False}
    result = dataset_preview(name, files[name], limit=DATASET_PREVIEW_ROWS)
    rows = []
    for number, row in enumerate(result["first"], start=1):
        inputs = row["input"] if isinstance(row["input"], list) else [row["input"]]
        truth = row.get("ground_truth")
        rows.append(
            {
                "number": number,
                "id": row.get("id"),
                "default_id": f"row-{number}",  # what the loader names a row without an id
                "inputs": inputs,
                "truths": truth if isinstance(truth, list) else None,
                "truth": truth if isinstance(truth, str) else None,
                "tags": row.get("tags") or [],
            }
        )
    return {
        "name": name,
        "attached": True,
        "count": result["rows"],
        "more": result["rows"] - len(rows),
        "rows": rows,
        "problems": result["problems"],
    }


def file_rows(attached: list[SuiteFile], spec: SuiteSpec | None) -> list[dict]:
    used = set(spec.files_used()) if spec is not None else set()
    dataset = spec.dataset if spec is not None else None
    calibration = getattr(spec, "calibration", None)
    samples_file = calibration.spec.samples_file if calibration is not None else None
    return [
        {
            "name": item.name,
            "size": item.size,
            "dataset": item.name == dataset,
            "samples": item.name == samples_file,
            "guidelines": item.name.endswith(INSTRUCTIONS_SUFFIX),
            "used": item.name in used,
        }
        for item in attached
    ]
