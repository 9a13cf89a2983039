"""What `evalsite run` leaves behind, here or on a server: the files asked for, and the exit code."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.compare import Comparison
from engine.exports import FORMATS, ExportFormat, RunExport
from engine.outcomes import Status
from engine.results import RunReport

from .common import BROKEN, FAILED, PASSED, UserError, check_writable

EXPORTS = [entry for entry in FORMATS.values() if entry.cli is not None]


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("exports, for CI")
    for entry in EXPORTS:
        option = entry.cli
        group.add_argument(option.flag, dest=option.dest, type=Path, metavar=option.metavar, help=option.help)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before anything runs, a file asked for that cannot be written."""
    if getattr(args, "json_path", None):
        check_writable(args.json_path)
    for entry in EXPORTS:
        if getattr(args, entry.cli.dest, None):
            check_writable(getattr(args, entry.cli.dest), entry.cli.flag)


def beside(entry: ExportFormat) -> list[ExportFormat]:
    """The formats written next to this one's file."""
    return [other for other in FORMATS.values() if other.beside == entry.key]


def write_outputs(args: argparse.Namespace, report: RunReport, system: str | None, *,
                  comparison: Comparison | None = None, run_url: str | None = None,
                  baseline_url: str | None = None) -> None:  # fmt: skip
    """Every file the command line asked for; a write that fails is exit 3 (the run happened)."""
    json_path = getattr(args, "json_path", None)
    if json_path is not None:
        text = json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        _write(json_path, "--json", text)
        print(f"Wrote the results (JSON) to {json_path}")
    run = RunExport.of_report(
        report, system, comparison=comparison, run_url=run_url, baseline_url=baseline_url
    )
    for entry in EXPORTS:
        path = getattr(args, entry.cli.dest, None)
        if path is None:
            continue
        _write(path, entry.cli.flag, entry.text(run))
        print(f"Wrote the {entry.written} to {path}")
        for other in beside(entry):
            companion = path.with_name(f"{path.stem}.{other.suffix}")
            _write(path, entry.cli.flag, other.text(run), companion)
            print(f"Wrote the {other.written} to {companion}")


def _write(path: Path, option: str, text: str, target: Path | None = None) -> None:
    try:
        (target or path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{option} {path}: {exc.strerror or exc}", code=BROKEN) from None


def exit_code(report: RunReport) -> int:
    if report.stop_reason:  # stopped at its cost limit: the evals it did not play have no result
        return BROKEN
    if any(result.status == Status.ERROR for result in report.evals):
        return BROKEN
    return PASSED if report.status == Status.PASSED else FAILED
