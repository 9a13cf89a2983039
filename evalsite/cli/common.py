"""What the `evalsite` commands share: exit codes, the user's mistakes, reading suites, the endpoints.

A mistake the user can fix is a UserError: one line on stderr that says what to do, with exit code 2.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.attached import megabytes, read_limited, read_suite_files
from engine.collector import collect_for_one_run
from engine.loader import file_references, is_calibration, load_parsed_suite, references
from engine.schema import Suite
from engine.source import MAX_SUITE_BYTES, SuiteError, TreeBuilder, parse_yaml

if TYPE_CHECKING:
    from engine.calibration import LoadedSet

PASSED, FAILED, INVALID, BROKEN = 0, 1, 2, 3


class UserError(Exception):
    """A mistake the user can fix: printed as one line, never as a traceback."""

    def __init__(self, message: str, code: int = INVALID):
        super().__init__(message)
        self.code = code


class InvalidSuite(Exception):
    """The suite's problems, each as a printable line."""

    def __init__(self, lines: list[str]):
        super().__init__(lines)
        self.lines = lines


# --- reading suites ----------------------------------------------------------------------------------------


def read_suite_file(path: Path, limit: int = MAX_SUITE_BYTES) -> bytes:
    """The file's bytes; UserError, before anything is read, when os.stat says it is over `limit`."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise UserError(
                f"{path}: larger than {limit // 1_000_000} MB ({megabytes(size)}); nothing was read"
            )
        data = read_limited(path, limit)
    except IsADirectoryError:
        examples = sorted(str(p) for p in path.glob("*.y*ml"))[:3]
        hint = f", e.g. {', '.join(examples)}" if examples else ""
        raise UserError(f"{path}: is a folder; give a suite file{hint}") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (paths are relative to {Path.cwd()})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise UserError(f"{path}: larger than {limit // 1_000_000} MB; read no further")
    return data


@dataclass
class SuiteFile:
    """A suite file read and parsed once, with the attached files it names: every command that reads a suite
    (or a calibration set) starts here, and nothing reads or parses it again."""

    path: Path
    data: bytes
    raw: object  # None when the YAML is invalid (`problem` says why)
    builder: TreeBuilder | None
    problem: SuiteError | None
    files: dict[str, str]
    names: list[str]  # the attached files it names

    @property
    def is_calibration(self) -> bool:
        return is_calibration(self.raw)


def read_suite(path: Path) -> SuiteFile:
    """The file read, parsed once and its attached files read from its folder; UserError when a file cannot
    be read, InvalidSuite when an attached file is refused. Invalid YAML is kept in `problem`, for the loader
    to report (with the files it names, read leniently)."""
    data = read_suite_file(path)
    try:
        raw, builder = parse_yaml(data)
        problem, names = None, references(raw)
    except SuiteError as exc:
        raw, builder, problem, names = None, None, exc, file_references(data)
    try:
        files = read_suite_files(path, data, names)
    except OSError as exc:
        name = exc.filename or "an attached file"
        raise UserError(
            f"{name}: cannot read it ({exc.strerror or exc}); {path} names it as an attached file"
        ) from None
    except SuiteError as exc:
        raise InvalidSuite(problem_lines(path, exc)) from None
    return SuiteFile(path, data, raw, builder, problem, files, names)


def load_suite_file(path: Path, read: SuiteFile | None = None) -> tuple[Suite, dict[str, str]]:
    """The suite and its attached files, read from the suite's folder; InvalidSuite lists its problems."""
    read = read or read_suite(path)
    try:
        if read.problem is not None:
            read.problem.filename = str(path)
            raise read.problem
        return load_parsed_suite(read.raw, read.builder, str(path), read.files), read.files
    except SuiteError as exc:
        lines = problem_lines(path, exc)
        missing = [name for name in read.names if name not in read.files]
        if missing:
            folder = path.parent.resolve()
            lines.append(
                f"{path}: attached files are read from its folder ({folder}), which has no file "
                + ", ".join(missing)
            )
        raise InvalidSuite(lines) from None


def suite_to_run(path: Path, refused: str) -> tuple[Suite, dict[str, str]]:
    """The suite and its files; or its problems on stderr and a UserError that ends with `refused`."""
    try:
        return load_suite_file(path)
    except InvalidSuite as exc:
        print(*exc.lines, sep="\n", file=sys.stderr)
        raise UserError(f"the suite has problems; {refused}") from None


def load_calibration_file(path: Path, read: SuiteFile | None = None) -> LoadedSet:
    """The calibration set and its samples; InvalidSuite lists its problems."""
    from engine.calibration import load_parsed  # only calibration commands and files need it

    read = read or read_suite(path)
    try:
        if read.problem is not None:
            raise read.problem
        return load_parsed(read.raw, read.builder, str(path), read.files)
    except SuiteError as exc:
        raise InvalidSuite(problem_lines(path, exc)) from None


def holds_calibration(path: Path) -> bool:
    try:
        raw, _ = parse_yaml(read_suite_file(path))
    except SuiteError:
        return False  # reported by the suite loader, which says what a suite needs
    return is_calibration(raw)


def problem_line(path: Path, problem) -> str:
    """`file:line:col path: message`; a problem in an attached file names that file."""
    return os.path.join(os.path.dirname(path), str(problem)) if problem.file else f"{path}:{problem}"


def problem_lines(path: Path, exc: SuiteError) -> list[str]:
    return [problem_line(path, problem) for problem in exc.problems]


def collect_from_here() -> None:
    """What the command has loaded stays to the end: the cyclic collector, paused while it loaded (evalsite.cli.
    main), leaves it out of its walks from now on and looks only at what comes after, at a run's pace
    (engine.collector.collect_for_one_run)."""
    gc.freeze()
    collect_for_one_run()
    gc.enable()


# --- arguments ---------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def check_writable(path: Path, option: str = "--json") -> None:
    if path.is_dir():
        raise UserError(
            f"{option} {path}: is a folder; give a file name, e.g. {path / ('results' + (path.suffix or '.out'))}"
        )
    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"{option} {path}: there is no folder {folder}; create it or write elsewhere")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"{option} {path}: cannot write there (permission denied); write elsewhere")
