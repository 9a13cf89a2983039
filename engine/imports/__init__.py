"""Import suites written for other tools as evalsite suites: vibecheck, Letta Evals, AgentV (v2 and today's
`tests` format), promptfoo configuration, agtlantis (@agtlantis/eval YAML) and calibrate.

`convert(files)` takes the uploaded files (name -> text), finds the suite file among them, works out which
tool wrote it (`detect`) and returns an `ImportResult`: the evalsite YAML, the attached files to create
with it (e.g. a converted dataset.jsonl), and a report — what was mapped to what, what could not be
converted and why, and which referenced files were not uploaded.

Whenever `needs_files` is empty, `engine.loader.load_suite(result.source, files=result.files)` accepts the
result. Bad input (not YAML, another tool's file, a missing dataset) raises `ImportProblem` with a message
meant for the person who uploaded it.

Plain Python: no Django here.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import agentv, agtlantis, boltfoundry, letta, promptfoo, vibecheck
from .common import KINDS, Converted, ImportProblem, ImportResult, Loss, Report, basename
from .locate import locate
from .shapes import looks_like
from .uploads import (
    Parsed,
    by_name,
    candidates,
    main_file,
    main_file_for,
    parse_candidate,
    tree_paths,
    upload_paths,
)

ImportError_ = ImportProblem  # another name for it, which callers may import

# Each tool's converter: (suite file's name, its parsed data, the uploaded files, the report) -> Converted.
CONVERTERS: dict[str, Callable[[str, Any, dict[str, str], Report], Converted]] = {
    "vibecheck": vibecheck.convert,
    "letta": letta.convert,
    "agentv": agentv.convert,
    "calibrate": boltfoundry.convert,
    "promptfoo": promptfoo.convert,
    "agtlantis": agtlantis.convert,
}


def detect(files: Mapping[str, str]) -> str:
    """Which tool wrote the suite among `files`: "vibecheck", "letta", "agentv", "agtlantis" or "calibrate";
    ImportProblem if none."""
    if _is_calibrate(files):
        return "calibrate"
    return main_file(by_name(files))[0]


def convert(files: Mapping[str, str], kind: str | None = None) -> ImportResult:
    """Convert uploaded files (name -> text) to an evalsite suite. `kind` skips detection."""
    if kind in (None, "", "auto", "calibrate") and (kind == "calibrate" or _is_calibrate(files)):
        unreadable: list[str] = []
        return _convert_calibrate(upload_paths(files, unreadable), unreadable)
    if kind not in (None, "", "auto") and kind not in KINDS:
        raise ImportProblem(f"unknown kind {kind!r}: choose {', '.join(KINDS)}")
    if _in_folders(files):
        return _convert_laid_out(files, kind)
    normalised = by_name(files)
    if kind in (None, "", "auto"):
        kind, main = main_file(normalised)
    else:
        main = main_file_for(normalised, kind)
    return _convert_one(kind, main, normalised, name_unused=True)[0]


def _in_folders(files: Mapping[str, str]) -> bool:
    """Files that keep a folder's layout (a zip's entries, `evalsite import --kind` of files in folders)."""
    return any("/" in posixpath.normpath(str(name).replace("\\", "/")).lstrip("/") for name in files)


def _convert_laid_out(files: Mapping[str, str], kind: str | None) -> ImportResult:
    """One suite among files in folders, its files found from the suite file's folder as `convert_all` finds
    them: a folder of cases (AgentV's `tests: ./cases/`) and two files of one name in two folders stay
    apart, where a flat upload knows files by their names alone."""
    tree = tree_paths(files)
    if kind in (None, "", "auto"):
        kind, found = main_file(tree)
    else:
        found = main_file_for(tree, kind)
    folder = posixpath.dirname(found.name)
    view = {_relative(path, folder): text for path, text in tree.items()}
    main = Parsed(posixpath.basename(found.name), found.data, found.repairs)
    result = _convert_one(kind, main, view, name_unused=True, origin=found.name)[0]
    for loss in result.losses:
        loss.file = posixpath.normpath(posixpath.join(folder, loss.file))
    return result


def _convert_one(
    kind: str, main: Parsed, files: dict[str, str], *, name_unused: bool = False, origin: str = ""
) -> tuple[ImportResult, set[str]]:
    """One suite file converted, its losses located; and the names of the files its converter read.
    `origin`: the suite file's path among the files given, when it is not its name (files in folders)."""
    report = Report(origin or main.name)
    for line in main.repairs:
        report.map(line)
    tracked = _Tracked(files)
    try:
        header, sections, attached = CONVERTERS[kind](main.name, main.data, tracked, report)
    except ImportProblem as problem:
        raise _located(problem, main.name, files) from None
    for name in files if name_unused else ():
        if name != main.name and name not in tracked.used:
            report.skip(
                agentv.typescript_eval(name)
                or f"{name}: uploaded, but the suite does not refer to it — ignored"
            )
    result = report.finish(header, sections, attached, kind)
    result.origin = report.origin
    result.losses = [locate(line, main.name, files) for line in result.lost]
    return result, tracked.used


@dataclass
class Imported:
    """Every suite found among many files (`convert_all`)."""

    results: list[ImportResult] = field(default_factory=list)  # one per suite, in path order
    problems: list[str] = field(default_factory=list)  # "path: why" for each suite file that did not convert
    ignored: list[str] = field(default_factory=list)  # files no suite refers to
    unreadable: list[str] = field(default_factory=list)  # "path …: why" for YAML or TOML that does not parse


def convert_all(files: Mapping[str, str], hidden: Collection[str] = ()) -> Imported:
    """Every suite among `files` (path -> text, paths relative to one folder: a project as the tool lays
    it out), each converted with the files it refers to, found as that tool finds them: from the suite
    file's folder. A suite file that another suite reads (a shared tests file) is not a suite of its own,
    nor is a file among `hidden` (in a hidden folder: read only when a suite names it).
    ImportProblem when no file is a suite of a tool Import knows."""
    tree = tree_paths(files)
    hidden = {posixpath.normpath(path) for path in hidden}
    visible = {path: text for path, text in tree.items() if path not in hidden}
    found, unreadable = _scan(visible)
    units = _calibration_sets(visible, any(kind == "calibrate" for kind, _ in found))
    found = [(kind, parsed) for kind, parsed in found if kind != "calibrate"]  # calibrate goes by set, below
    code = {path: why for path in sorted(visible) if (why := agentv.typescript_eval(path))}
    if not found and not units and code:
        raise ImportProblem("; ".join(code.values()))
    if not found and not units:
        if any(path.endswith(".deck.md") for path in visible):  # decks, but no samples: calibrate says why
            boltfoundry.convert_files(dict(visible), Report())
        if 0 < len(visible) <= 10:
            main_file(
                visible
            )  # raises the single-suite message: what Import reads, or which file is not valid
        readable = [path for path in candidates(visible) if path not in unreadable]
        raise ImportProblem(
            f"no suite of a tool Import knows among {len(visible)} files"
            + (f"; {len(readable)} YAML or TOML files ({_few(readable)}) are not suites" if readable else "")
            + (f"; not valid: {_few(list(unreadable.values()), 3)}" if unreadable else "")
        )
    imported = Imported(problems=list(code.values()))
    used: set[str] = set()
    suite_of: dict[str, tuple[ImportResult, set[str]]] = {}
    for kind, parsed in found:
        folder = posixpath.dirname(parsed.name)
        view = {_relative(path, folder): text for path, text in tree.items()}
        main = Parsed(posixpath.basename(parsed.name), parsed.data, parsed.repairs)
        try:
            result, read = _convert_one(kind, main, view, origin=parsed.name)
        except ImportProblem as problem:
            message = str(problem)  # it starts with the suite file's name, or names the file at fault
            if message.startswith(main.name):
                message = parsed.name + message[len(main.name) :]
            elif not message.startswith(parsed.name):
                message = f"{parsed.name}: {message}"
            imported.problems.append(message)
            continue
        read = {posixpath.normpath(posixpath.join(folder, name)) for name in read}
        for loss in result.losses:
            loss.file = posixpath.normpath(posixpath.join(folder, loss.file))
        suite_of[parsed.name] = (result, read)
        used |= read
    for unit in units:
        origin = (unit.graders or unit.sample_files)[0]
        try:
            result = _convert_calibrate({path: tree[path] for path in unit.files}, [])
        except ImportProblem as problem:
            message = str(problem)
            imported.problems.append(message if message.startswith(origin) else f"{origin}: {message}")
            continue
        suite_of[origin] = (result, set(unit.files))
        used |= set(unit.files)
    for path, (result, _read) in suite_of.items():
        if not any(path in read for other, (_, read) in suite_of.items() if other != path):
            imported.results.append(result)
    suites = {parsed.name for _kind, parsed in found}
    imported.ignored = sorted(path for path in tree if path not in used | suites | hidden | set(code))
    imported.unreadable = [message for path, message in unreadable.items() if path not in used]
    return imported


def _calibration_sets(tree: dict[str, str], samples_found: bool) -> list:
    """calibrate's sets among a folder's files: its grader decks with the samples they embed, and sample
    files no deck embeds (engine.imports.boltfoundry.plan)."""
    if not samples_found and not any(boltfoundry.is_deck(path) or path.endswith(".jsonl") for path in tree):
        return []
    try:
        return boltfoundry.plan(tree)[0]
    except ImportProblem:
        return []


def _few(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def suite_files(files: Mapping[str, str]) -> list[str]:
    """The paths among `files` that are suites of a tool Import knows, shallowest first."""
    return [parsed.name for _kind, parsed in _suites(tree_paths(files))]


def _suites(tree: dict[str, str]) -> list[tuple[str, Parsed]]:
    return _scan(tree)[0]


def _scan(tree: dict[str, str]) -> tuple[list[tuple[str, Parsed]], dict[str, str]]:
    """The suites among the files, shallowest first; and the YAML or TOML files that do not parse, and
    why (each might have been a suite)."""
    found, unreadable = [], {}
    found_files = candidates(tree)
    for path in sorted(found_files, key=lambda path: (path.count("/"), path)):
        try:
            parsed = parse_candidate(path, tree[path], True, found_files[path])
        except ImportProblem as problem:
            unreadable[path] = str(problem) if str(problem).startswith(path) else f"{path}: {problem}"
            continue
        kind = looks_like(parsed.data) if parsed is not None else None
        if kind:
            found.append((kind, parsed))
    return found, unreadable


def _relative(path: str, folder: str) -> str:
    return posixpath.relpath(path, folder) if folder else path


def _is_calibrate(files: Mapping[str, str]) -> bool:
    """calibrate's files: a grader deck (*.deck.md) among them, or its samples and nothing else's suite."""
    if any(boltfoundry.is_deck(basename(name)) for name in files):
        return True
    try:
        paths = upload_paths(files, [])
    except ImportProblem:
        return False
    kinds = set()
    for name, ready in candidates(paths).items():  # by path: a folder may hold several samples.jsonl
        parsed = parse_candidate(name, paths[name], False, ready)
        kinds.add(looks_like(parsed.data) if parsed else None)
    return "calibrate" in kinds and kinds <= {"calibrate", None}


def _convert_calibrate(files: dict[str, str], unreadable: list[str]) -> ImportResult:
    """calibrate reads a folder as aibff does: decks embed cards and sample files by relative path."""
    report = Report()
    for name in unreadable:
        report.skip(f"{name}: not UTF-8 text — ignored")
    tracked = _Tracked(files)
    try:
        main, (header, sections, attached) = boltfoundry.convert_files(tracked, report)
    except ImportProblem as problem:
        raise _located(problem, next(iter(files)), files) from None
    for name in files:
        if name != main and name not in tracked.used:
            report.skip(f"{name}: uploaded, but no deck or sample file refers to it — ignored")
    result = report.finish(header, sections, attached, "calibrate")
    result.origin = main
    result.losses = [locate(line, main, files) for line in result.lost]
    return result


def _located(problem: ImportProblem, main: str, files: dict[str, str]) -> ImportProblem:
    """The problem, naming the suite file when the converter named no file: the person who uploaded
    several files is told which one to fix."""
    message = str(problem)
    if any(name in message for name in files):
        return problem
    return ImportProblem(f"{main}: {message}")


class _Tracked(dict):
    """The uploaded files, remembering which ones a converter read."""

    def __init__(self, files: dict[str, str]):
        super().__init__(files)
        self.used: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.used.add(name)
        return super().__getitem__(name)


__all__ = [
    "KINDS",
    "ImportError_",
    "ImportProblem",
    "ImportResult",
    "Imported",
    "Loss",
    "convert",
    "convert_all",
    "looks_like",
    "detect",
    "suite_files",
]
