"""`evalsite import PATH... [--out DIR]`: every suite among files and folders (engine.imports.convert_all),
each written as an evalsite suite (or calibration set) with its attached files, then validated.

One suite and `--out NAME.yaml`: that file, its attached files beside it. Otherwise `--out` is a folder:
a suite with attached files gets a folder of its own (`DIR/<name>/<name>.yaml` and its files, so two
suites' `dataset.jsonl` never meet), one without gets `DIR/<name>.yaml`. Nothing is written when any
target exists (unless --force), so a collision never leaves half an import behind.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.attached import MAX_FILE_BYTES
from engine.imports import KINDS, ImportProblem, ImportResult, convert, convert_all
from engine.imports.tree import read_paths
from engine.text import plural

from .common import (
    FAILED,
    PASSED,
    InvalidSuite,
    UserError,
    check_writable,
    holds_calibration,
    load_calibration_file,
    load_suite_file,
    read_suite_file,
)

SUITE_SUFFIXES = (".yaml", ".yml")
# File names that say nothing of the suite (`examples/simple/suite.yaml`): the suite is named after its folder.
GENERIC_STEMS = frozenset(
    {"suite", "eval", "evals", "config", "promptfooconfig", "samples", "dataset", "main"}
)
DEFAULT_OUT = Path("imported")


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="PATH",
        help="files or folders: the other tools' suite files and the files they refer to (datasets, "
        "prompt, rubric and grader files)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, metavar="DIR",
        help="the folder to write the suites into (default: imported/); NAME.yaml for a single suite",
    )  # fmt: skip
    parser.add_argument(
        "--kind", choices=["auto", *KINDS], default="auto",
        help="the tool that wrote the files, for one suite given as files (default: auto-detect every "
        "suite, as the Import page does)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="overwrite files that already exist")


@dataclass
class Unit:
    result: ImportResult
    suite: Path  # where its YAML goes
    writes: dict[Path, str]


def import_tree(args: argparse.Namespace) -> int:
    try:
        tree = read_paths(list(args.files))
        imported = convert_all(tree.files, tree.hidden)
    except ImportProblem as exc:
        raise UserError(str(exc)) from None
    if not imported.results:  # each suite file failed: the one's message, or every one's on one line
        if len(imported.problems) == 1:
            raise UserError(imported.problems[0])
        raise UserError(f"no suite could be imported: {'; '.join(imported.problems)}")
    out: Path = args.out or DEFAULT_OUT
    single = len(imported.results) == 1 and out.suffix.lower() in SUITE_SUFFIXES and not out.is_dir()
    if out.suffix.lower() in SUITE_SUFFIXES and not out.is_dir() and not single:
        listed = ", ".join(result.origin for result in imported.results)
        raise UserError(f"--out {out}: {len(imported.results)} suites were found ({listed}); give a folder")
    units = [_single(imported.results[0], out)] if single else _plan(imported.results, out)
    _check_targets(units, args, [Path(path).resolve() for path in args.files])
    _write(units)
    code = PASSED
    for unit in units:
        code = max(code, report_unit(unit, detailed=len(units) == 1))
    for problem in imported.problems:
        print(f"not imported: {problem}", file=sys.stderr)
        code = max(code, FAILED)
    for line in imported.unreadable:
        print(f"Not searched for a suite (it does not parse): {line}")
    if imported.ignored:
        print(f"Not read by any suite: {_listed(imported.ignored)}")
    if tree.left_out:
        print(f"Left out of the folders: {_listed(tree.left_out)}")
    lost = sum(len(unit.result.losses) for unit in units)
    if len(units) > 1 or lost or imported.problems:
        summary = f"{plural(len(units), 'suite')} imported"
        if imported.problems:
            summary += f", {len(imported.problems)} not"
        if lost:
            summary += f"; {lost} {'loss' if lost == 1 else 'losses'} listed on stderr"
        print(summary)
    return code


def _write(units: list[Unit]) -> None:
    for unit in units:
        for path, text in unit.writes.items():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise UserError(f"{path}: cannot write it ({exc.strerror or exc})") from None


def _listed(names: list[str], limit: int = 10) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _single(result: ImportResult, out: Path) -> Unit:
    folder = out.parent
    return Unit(
        result, out, {out: result.source, **{folder / name: text for name, text in result.files.items()}}
    )


def stem(origin: str) -> str:
    """A suite's name on disk, from its file's path: `evals/code-review.eval.yaml` → `code-review`,
    `letta/simple/suite.yaml` → `simple`."""
    name = posixpath.basename(origin)
    for suffix in (
        ".eval.yaml",
        ".eval.yml",
        ".deck.toml",
        ".deck.md",
        ".yaml",
        ".yml",
        ".toml",
        ".json",
        ".jsonl",
    ):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    folder = posixpath.basename(posixpath.dirname(origin))
    first, rest = re.match(r"([^.\-_]*)[.\-_]?(.*)", name).groups()
    if first.lower() in GENERIC_STEMS and folder:
        name = f"{folder}-{rest}" if rest else folder  # `reward/suite.weighted.yaml` → `reward-weighted`
    return _clean(name)


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", name).strip("-.")[:80] or "suite"


def _plan(results: list[ImportResult], out: Path) -> list[Unit]:
    """Where each suite goes: its stem; when taken, its folders' names before it (`a-simple`), nearest
    first; else a number after it."""
    taken: set[str] = set()
    units = []
    for result in results:
        name = stem(result.origin)
        folders = [part for part in posixpath.dirname(result.origin).split("/") if part]
        if folders and folders[-1] == name:
            folders.pop()  # named after its folder already
        while name.lower() in taken and folders:
            name = f"{_clean(folders.pop())}-{name}"
        base, number = name, 2
        while name.lower() in taken:
            name, number = f"{base}-{number}", number + 1
        taken.add(name.lower())
        if result.files:
            suite = out / name / f"{name}.yaml"
            units.append(
                Unit(
                    result,
                    suite,
                    {suite: result.source, **{suite.parent / n: t for n, t in result.files.items()}},
                )
            )
        else:
            suite = out / f"{name}.yaml"
            units.append(Unit(result, suite, {suite: result.source}))
    return units


def _check_targets(units: list[Unit], args: argparse.Namespace, inputs: list[Path]) -> None:
    """Never overwrite silently: an input file in the same folder (a Letta dataset.jsonl) would be replaced
    by its converted form. Checked for every target before anything is written."""
    for unit in units:
        for path, text in unit.writes.items():
            if path.is_dir():
                raise UserError(f"--out {path}: is a folder; give a file name or a folder to write into")
            if not path.exists() or args.force:
                continue
            try:
                same = path.read_text(encoding="utf-8") == text
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                resolved = path.resolve()
                given = any(resolved == p or p in resolved.parents for p in inputs)
                what = "one of the files being imported" if given else "a file"
                raise UserError(f"{path} exists ({what}): write elsewhere with --out, or pass --force")


def report_unit(unit: Unit, detailed: bool) -> int:
    """What became of one suite, on stdout; its losses on stderr, located. Its exit code."""
    result = unit.result
    attached = f", with {', '.join(result.files)} beside it" if result.files else ""
    origin = "" if detailed else f" {result.origin}"
    print(f"Converted {result.tool}{origin} → {unit.suite}{attached}")
    lost = set(result.lost)
    sections = [("Not converted", [line for line in result.unmapped if line not in lost])]
    if detailed:
        sections.insert(0, ("Mapped", result.mapped))
    for title, lines in sections:
        if lines:
            print(f"{title}:")
            print(*(f"  - {line}" for line in lines), sep="\n")
    for loss in result.losses:
        print(f"lost: {loss}", file=sys.stderr)
    code = FAILED if result.losses else PASSED
    if result.losses:
        print(f"Lost (it graded or drove the conversation): {plural(len(result.losses), 'item')}, on stderr")
    if result.needs_files:
        print(f"Files it needs that were not given: {', '.join(result.needs_files)}")
        print(
            f"{unit.suite}: attach them in {unit.suite.parent.resolve()} (or import again with them), then validate it"
        )
        return FAILED
    try:
        if holds_calibration(unit.suite):  # calibrate's samples: a calibration set
            loaded = load_calibration_file(unit.suite)
            print(f"{unit.suite}: ok — calibration set {loaded.spec.name!r}, "
                  f"{plural(len(loaded.samples), 'sample')}; run it with `evalsite calibrate {unit.suite}`")  # fmt: skip
            return code
        suite, _ = load_suite_file(unit.suite)
    except InvalidSuite as exc:
        print(f"{unit.suite}: written, but not valid yet:")
        print(*(f"  {line}" for line in exc.lines), sep="\n")
        return FAILED
    except UserError as exc:
        print(f"{unit.suite}: written, but not valid yet: {exc}")
        return FAILED
    model = "" if suite.model else " --model M"  # other tools' suites seldom name a chat model
    model += "".join(f" --var {name}=…" for name, default in (suite.vars or {}).items() if default is None)
    print(f"{unit.suite}: ok — suite {suite.name!r}, {plural(len(suite.evals), 'eval')}; run it with "
          f"`evalsite run {unit.suite}{model}`")  # fmt: skip
    return code


def import_files(args: argparse.Namespace) -> int:
    """`evalsite import`: the Import page's converter (engine.imports.convert) from the terminal."""
    if args.kind == "auto":
        return import_tree(args)
    if args.out is None:
        raise UserError("--kind needs --out SUITE.yaml")
    uploads: dict[str, bytes] = {}
    # Named from the folder the files share, as a folder import names them (`decks/a.deck.md`, never the
    # absolute path a deck's embeds would be resolved against).
    base = Path(os.path.commonpath([path.resolve().parent for path in args.files]))
    for path in args.files:
        uploads[path.resolve().relative_to(base).as_posix()] = read_suite_file(path, MAX_FILE_BYTES)
    try:
        result = convert(uploads, args.kind)
    except ImportProblem as exc:
        raise UserError(str(exc)) from None
    if not args.out.is_dir():
        args.out.parent.mkdir(parents=True, exist_ok=True)  # `--out imported/suite.yaml` makes imported/
    check_writable(args.out, "--out")
    unit = _single(result, args.out)
    _check_targets([unit], args, [path.resolve() for path in args.files])
    _write([unit])
    return report_unit(unit, detailed=True)
