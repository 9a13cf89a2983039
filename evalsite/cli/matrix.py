"""`evalsite run --model a,b,c` (or `--variant` repeated): one suite against several models, or settings
variants of one (`gpt-4o-mini@temperature=0.7`, engine.matrix), played here one variant after another, then
the grid of evals × variants on the terminal and the exports a run has: JUnit with a testsuite per variant, a
CSV of the grid, a Markdown table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from django.conf import settings
from django.utils.text import slugify

from engine.codegrade.run import CodeRunner
from engine.exports import FORMATS, junit_xml
from engine.matrix import (
    Variant,
    build_grid,
    column_of_report,
    grid_csv,
    grid_markdown,
    grid_text,
    matrix_junit,
)
from engine.options import RunOptions
from engine.options import apply as apply_options
from engine.runner import run_suite

from .common import BROKEN, FAILED, PASSED, UserError, suite_to_run
from .database import endpoint_registry
from .local import bind_vars, check_model_refs, say_slow, say_wait
from .options import run_options
from .outputs import exit_code


def json_paths(path: Path, variants: list[Variant]) -> list[Path]:
    """--json OUT.json for a matrix: a results file per variant beside it, OUT.<variant>.json."""
    return [
        path.with_name(f"{path.stem}.{slugify(variant.name) or n}.json") for n, variant in enumerate(variants)
    ]


def run_matrix_here(args: argparse.Namespace, variants: list[Variant]) -> int:
    suite, files = suite_to_run(args.file, "nothing was run")
    suite, values = bind_vars(args.file, suite, getattr(args, "vars", None))
    suite = apply_options(suite, run_options(args))
    registry, unread = endpoint_registry()
    for variant in variants:  # every reference checked before the first variant spends anything
        check_model_refs(suite, variant.model, registry, unread)
    columns, reports = [], []
    for number, variant in enumerate(variants, 1):
        print(f"[{number}/{len(variants)}] {variant.name}", flush=True)
        played = apply_options(suite, RunOptions(model_settings=variant.model_settings))
        report = run_suite(
            played, registry, model=variant.model, concurrency=args.concurrency, files=files,
            on_wait=say_wait, timeout=getattr(args, "timeout", None), on_slow=say_slow(),
            slow_min_seconds=settings.EVALSITE_SLOW_CALL_SECONDS,
            code=CodeRunner(folder=args.file.parent.resolve(), inherit_env=True),
        )  # fmt: skip
        report.vars = values or None
        reports.append(report)
        totals = report.totals
        print(f"    {totals.passed} passed, {totals.failed} failed, {totals.error} errors of {totals.evals}")
        columns.append(column_of_report(str(number), variant.name, report))
    grid = build_grid(columns)
    print()
    print(grid_text(grid))
    write_matrix_outputs(args, variants, reports, grid, suite.system)
    codes = {exit_code(report) for report in reports}  # each variant as a run of its own, gates too
    return BROKEN if BROKEN in codes else FAILED if FAILED in codes else PASSED


WRITTEN = {"junit": "JUnit XML (a testsuite per variant)", "csv": "CSV grid", "md": "Markdown table"}


def write_matrix_outputs(args, variants, reports, grid, system) -> None:
    json_path = getattr(args, "json_path", None)
    if json_path is not None:
        for path, report in zip(json_paths(json_path, variants), reports, strict=True):
            _write(
                path,
                "--json",
                json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n",
            )
            print(f"Wrote the results (JSON) to {path}")
    writers = {
        "junit": lambda: matrix_junit(
            [
                (variant.name, junit_xml(report, system))
                for variant, report in zip(variants, reports, strict=True)
            ]
        ),
        "csv": lambda: grid_csv(grid),
        "md": lambda: grid_markdown(grid),
    }
    for key, write in writers.items():
        option = FORMATS[key].cli
        path = getattr(args, option.dest, None)
        if path is not None:
            _write(path, option.flag, write())
            print(f"Wrote the matrix's {WRITTEN[key]} to {path}")


def _write(path: Path, option: str, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{option} {path}: {exc.strerror or exc}", code=BROKEN) from None
