"""`evalsite validate suite.yaml ...`: check suite files (and calibration sets), each problem as
`file:line:col path: message`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.text import plural

from .common import (
    PASSED,
    InvalidSuite,
    UserError,
    load_calibration_file,
    load_suite_file,
    problem_line,
    read_suite,
)


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="file", help="suite files (YAML)")


def validate(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        try:
            read = read_suite(path)
            if read.is_calibration:
                loaded = load_calibration_file(path, read)
                for warning in loaded.warnings:
                    print(f"warning: {problem_line(path, warning)}", file=sys.stderr)
                print(
                    f"{path}: ok — calibration set {loaded.spec.name!r}, "
                    f"{plural(len(loaded.samples), 'sample')}, {plural(len(loaded.spec.all_judges), 'judge')}"
                )
                continue
            suite, _ = load_suite_file(path, read)
        except UserError as exc:
            bad += 1
            print(exc, file=sys.stderr)
            continue
        except InvalidSuite as exc:
            bad += 1
            print(*exc.lines, sep="\n", file=sys.stderr)
            continue
        needed = [name for name, default in (suite.vars or {}).items() if default is None]
        given = f"; give {', '.join(needed)} when launching (--var NAME=VALUE)" if needed else ""
        print(f"{path}: ok — suite {suite.name!r}, {plural(len(suite.evals), 'eval')}{given}")
    if bad:
        raise UserError(
            f"{bad} of {plural(len(args.files), 'file')} {'has' if bad == 1 else 'have'} problems"
        )
    return PASSED
