"""Import suites written for other tools as evalsite suites: vibecheck, Letta Evals, AgentV (v2 and today's
`tests` format) and calibrate.

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

import importlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from .common import (
    KINDS,
    ImportProblem,
    ImportResult,
    Report,
    basename,
    is_yaml_name,
    parse_yaml,
    repair_plain_colons,
)

ImportError_ = ImportProblem  # another name for it, which callers may import


def detect(files: Mapping[str, str]) -> str:
    """Which tool wrote the suite among `files`: "vibecheck", "letta", "agentv" or "calibrate"; ImportProblem
    if none."""
    if _is_calibrate(files):
        return "calibrate"
    return _main_file(_normalise(files))[0]


@dataclass
class Parsed:
    name: str
    data: object
    repairs: list[str] = field(default_factory=list)  # report lines for text fixed before parsing


def convert(files: Mapping[str, str], kind: str | None = None) -> ImportResult:
    """Convert uploaded files (name -> text) to an evalsite suite. `kind` skips detection."""
    if kind in (None, "", "auto", "calibrate") and (kind == "calibrate" or _is_calibrate(files)):
        unreadable: list[str] = []
        return _convert_calibrate(_paths(files, unreadable), unreadable)
    normalised = _normalise(files)
    if kind in (None, "", "auto"):
        kind, main = _main_file(normalised)
    else:
        if kind not in KINDS:
            raise ImportProblem(f"unknown kind {kind!r}: choose {', '.join(KINDS)}")
        main = _main_file_for(normalised, kind)
    module = importlib.import_module(f"{__name__}.{kind}")
    report = Report()
    for line in main.repairs:
        report.map(line)
    tracked = _Tracked(normalised)
    try:
        header, sections, attached = module.convert(main.name, main.data, tracked, report)
    except ImportProblem as problem:
        raise _located(problem, main.name, normalised) from None
    for name in normalised:
        if name != main.name and name not in tracked.used:
            report.skip(f"{name}: uploaded, but the suite does not refer to it — ignored")
    return report.finish(header, sections, attached, kind)


def _is_calibrate(files: Mapping[str, str]) -> bool:
    """calibrate's files: a grader deck (*.deck.md) among them, or its samples and nothing else's suite."""
    from . import calibrate

    if any(calibrate.is_deck(basename(name)) for name in files):
        return True
    try:
        paths = _paths(files, [])
    except ImportProblem:
        return False
    kinds = set()
    for name in _candidates(paths):  # by path: a folder may hold several samples.jsonl
        parsed = _parse_candidate(name, paths[name], strict=False)
        kinds.add(looks_like(parsed.data) if parsed else None)
    return "calibrate" in kinds and kinds <= {"calibrate", None}


def _convert_calibrate(files: dict[str, str], unreadable: list[str]) -> ImportResult:
    """calibrate reads a folder as aibff does: decks embed cards and sample files by relative path."""
    from . import calibrate

    report = Report()
    for name in unreadable:
        report.skip(f"{name}: not UTF-8 text — ignored")
    tracked = _Tracked(files)
    try:
        main, (header, sections, attached) = calibrate.convert_files(tracked, report)
    except ImportProblem as problem:
        raise _located(problem, next(iter(files)), files) from None
    for name in files:
        if name != main and name not in tracked.used:
            report.skip(f"{name}: uploaded, but no deck or sample file refers to it — ignored")
    return report.finish(header, sections, attached, "calibrate")


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


# --- finding the suite file among the uploads ------------------------------------------------------


def _text(name: str, text: str | bytes) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ImportProblem(f"{name} is not UTF-8 text") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _paths(files: Mapping[str, str], unreadable: list[str] | None = None) -> dict[str, str]:
    """The uploads by their relative path (a folder's layout kept, `./` and `a/../` folded away). With
    `unreadable`, a file that is not UTF-8 text (a picture in a deck's folder) is listed there, not refused."""
    if not files:
        raise ImportProblem("no files: upload the suite file (and its dataset or attachments)")
    out: dict[str, str] = {}
    for name, text in files.items():
        path = posixpath.normpath(name.replace("\\", "/")).lstrip("/")
        if not basename(path) or path == ".":
            raise ImportProblem(f"{name!r} is not a file name")
        try:
            out[path] = _text(path, text)
        except ImportProblem:
            if unreadable is None:
                raise
            unreadable.append(path)
    return out


def _normalise(files: Mapping[str, str]) -> dict[str, str]:
    if not files:
        raise ImportProblem("no files: upload the suite file (and its dataset or attachments)")
    out: dict[str, str] = {}
    for name, text in files.items():
        base = basename(name)
        if not base:
            raise ImportProblem(f"{name!r} is not a file name")
        if base in out:
            raise ImportProblem(f"two uploaded files are named {base!r}; upload one of them")
        out[base] = _text(base, text)
    return out


def _candidates(files: dict[str, str]) -> list[str]:
    names = [name for name in files if is_yaml_name(name) or name.lower().endswith(".toml")]
    if not names:  # JSONL of calibrate's samples, when there is no suite file it could be a dataset of
        names = [
            name for name in files if name.lower().endswith(".jsonl") and _holds_samples(name, files[name])
        ]
    if not names and len(files) == 1:
        names = list(files)  # a single file with another extension: try it as YAML
    return names


def _holds_samples(name: str, text: str) -> bool:
    from .calibrate import parse_file, sample_shape

    try:
        return sample_shape(parse_file(name, text))
    except ImportProblem:
        return False


def _parse_candidate(name: str, text: str, strict: bool) -> Parsed | None:
    if name.lower().endswith(".jsonl"):
        from .calibrate import parse_file

        try:
            return Parsed(name, parse_file(name, text))
        except ImportProblem:
            if strict:
                raise
            return None
    if name.lower().endswith(".toml"):
        try:
            return Parsed(name, _toml(name, text))
        except ImportProblem:
            if strict:
                raise
            return None
    try:
        return Parsed(name, parse_yaml(name, text))
    except ImportProblem as problem:
        repaired, repairs = repair_plain_colons(text)
        if repairs:
            try:
                return Parsed(name, parse_yaml(name, repaired), [f"{name} {line}" for line in repairs])
            except ImportProblem:
                pass
        if strict:
            raise problem from None
        return None


def _main_file(files: dict[str, str]) -> tuple[str, Parsed]:
    names = _candidates(files)
    if not names:
        listed = ", ".join(sorted(files))
        raise ImportProblem(
            f"no suite file among {listed}: upload the .yaml file of the suite together with its dataset "
            "or attachments"
        )
    found: list[tuple[str, Parsed]] = []
    others: list[Parsed] = []
    for name in names:
        parsed = _parse_candidate(name, files[name], strict=len(names) == 1)
        if parsed is None:
            continue
        kind = looks_like(parsed.data)
        if kind:
            found.append((kind, parsed))
        else:
            others.append(parsed)
    if not found:
        if len(others) == 1 and _is_native(others[0].data):
            raise ImportProblem(
                f"{others[0].name} is already an evalsite suite: upload it in the editor instead of importing it"
            )
        what = " and ".join(p.name for p in others) or ", ".join(names)
        raise ImportProblem(
            f"{what}: this is not a format Import knows; it reads vibecheck YAML (metadata + evals of "
            "prompt/checks), Letta Evals suites (suite.yaml with dataset, target and graders), AgentV eval "
            "files (tests with input / criteria / assertions, or v2 evalcases with input_messages) and calibrate TOML "
            "([samples.<id>] tables), JSONL samples and grader decks (*.deck.md)"
        )
    if len(found) > 1 and any(kind != "calibrate" for kind, _ in found):
        listed = ", ".join(f"{parsed.name} ({KINDS[kind]})" for kind, parsed in found)
        raise ImportProblem(f"several suite files were uploaded ({listed}): import one suite at a time")
    return found[0]


def _is_native(data: object) -> bool:
    from engine.schema import Suite

    return isinstance(data, dict) and bool(data) and set(data) <= set(Suite.model_fields) and "name" in data


def _main_file_for(files: dict[str, str], kind: str) -> Parsed:
    names = _candidates(files)
    parsed = [_parse_candidate(name, files[name], strict=len(names) == 1) for name in names]
    parsed = [p for p in parsed if p is not None and isinstance(p.data, dict)]
    matching = [p for p in parsed if looks_like(p.data) == kind]
    if len(matching) == 1:
        return matching[0]
    if len(matching) > 1:
        raise ImportProblem(
            f"several {KINDS[kind]} suite files were uploaded ({', '.join(p.name for p in matching)}): "
            "import one suite at a time"
        )
    if len(parsed) == 1:
        other = looks_like(parsed[0].data)
        if other:
            raise ImportProblem(
                f"{parsed[0].name} is a {KINDS[other]} file, not {KINDS[kind]}: choose “auto-detect”"
            )
        raise ImportProblem(f"{parsed[0].name} is not a {KINDS[kind]} suite: {_expected_shape(kind)}")
    if not parsed:
        raise ImportProblem(f"no YAML suite file was uploaded: {_expected_shape(kind)}")
    raise ImportProblem(f"none of the uploaded YAML files is a {KINDS[kind]} suite: {_expected_shape(kind)}")


def _expected_shape(kind: str) -> str:
    return {
        "vibecheck": "expected `metadata` and `evals` of `prompt` + `checks`",
        "letta": "expected a suite.yaml with `dataset`, `target` and `graders` (or `gate`)",
        "agentv": "expected `tests` with `input` (or v2's `evalcases` with `input_messages`)",
        "calibrate": "expected a grader deck (*.deck.md) or samples: TOML [samples.<id>] tables with a "
        "score and messages (or userMessage / assistantResponse), or JSONL rows of them",
    }.get(kind, f"expected a {KINDS[kind]} suite")


def _toml(name: str, text: str) -> dict:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ImportProblem(f"{name} is not valid TOML: {exc}") from None


AGENTV_TEST_KEYS = {"input", "input_messages", "criteria", "expected_output", "assertions"}


def looks_like(data: object) -> str | None:
    """The tool whose suite format `data` (a parsed YAML or TOML file) has, or None."""
    from .calibrate import sample_shape

    if sample_shape(data):  # calibrate's samples (TOML tables or JSONL rows) or a deck's contexts
        return "calibrate"
    if not isinstance(data, dict):
        return None
    schema = data.get("$schema")
    if (isinstance(schema, str) and schema.startswith("agentv-eval")) or isinstance(
        data.get("evalcases"), list
    ):
        return "agentv"
    tests = data.get("tests")  # today's AgentV: `tests` of input / criteria / expected_output / assertions
    if (
        isinstance(tests, list)
        and tests
        and "evals" not in data
        and all(isinstance(t, dict) and (AGENTV_TEST_KEYS & set(t)) for t in tests)
    ):
        return "agentv"
    letta_keys = ("graders", "grader", "gate", "target", "reward")
    if isinstance(data.get("dataset"), str) and any(isinstance(data.get(key), dict) for key in letta_keys):
        return "letta"
    evals = data.get("evals")
    if isinstance(data.get("metadata"), dict) and ("evals" in data):
        return "vibecheck"
    if (
        isinstance(evals, list)
        and evals
        and all(isinstance(ev, dict) and ("prompt" in ev or "conditionals" in ev) for ev in evals)
    ):
        return "vibecheck"
    return None


__all__ = ["KINDS", "ImportError_", "ImportProblem", "ImportResult", "convert", "detect"]
