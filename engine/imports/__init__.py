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

import importlib
import json
import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from .common import (
    KINDS,
    ImportProblem,
    ImportResult,
    Loss,
    Report,
    a,
    basename,
    is_yaml_name,
    parse_yaml,
    repair_plain_colons,
)
from .locate import locate

ImportError_ = ImportProblem  # another name for it, which callers may import


def detect(files: Mapping[str, str]) -> str:
    """Which tool wrote the suite among `files`: "vibecheck", "letta", "agentv", "agtlantis" or "calibrate";
    ImportProblem if none."""
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
    return _convert_one(kind, main, normalised, name_unused=True)[0]


def _convert_one(
    kind: str, main: Parsed, files: dict[str, str], *, name_unused: bool = False
) -> tuple[ImportResult, set[str]]:
    """One suite file converted, its losses located; and the names of the files its converter read."""
    module = importlib.import_module(f"{__name__}.{kind}")
    report = Report()
    for line in main.repairs:
        report.map(line)
    tracked = _Tracked(files)
    try:
        header, sections, attached = module.convert(main.name, main.data, tracked, report)
    except ImportProblem as problem:
        raise _located(problem, main.name, files) from None
    for name in files if name_unused else ():
        if name != main.name and name not in tracked.used:
            report.skip(f"{name}: uploaded, but the suite does not refer to it — ignored")
    result = report.finish(header, sections, attached, kind)
    result.origin = main.name
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
    tree = _normalise_paths(files)
    hidden = {posixpath.normpath(path) for path in hidden}
    visible = {path: text for path, text in tree.items() if path not in hidden}
    found, unreadable = _scan(visible)
    units = _calibration_sets(visible, any(kind == "calibrate" for kind, _ in found))
    found = [(kind, parsed) for kind, parsed in found if kind != "calibrate"]  # calibrate goes by set, below
    if not found and not units:
        if any(path.endswith(".deck.md") for path in visible):  # decks, but no samples: calibrate says why
            from . import calibrate

            calibrate.convert_files(dict(visible), Report())
        if 0 < len(visible) <= 10:
            _main_file(
                visible
            )  # raises the single-suite message: what Import reads, or which file is not valid
        readable = [path for path in _candidates(visible) if path not in unreadable]
        raise ImportProblem(
            f"no suite of a tool Import knows among {len(visible)} files"
            + (f"; {len(readable)} YAML or TOML files ({_few(readable)}) are not suites" if readable else "")
            + (f"; not valid: {_few(list(unreadable.values()), 3)}" if unreadable else "")
        )
    imported = Imported()
    used: set[str] = set()
    suite_of: dict[str, tuple[ImportResult, set[str]]] = {}
    for kind, parsed in found:
        folder = posixpath.dirname(parsed.name)
        view = {_relative(path, folder): text for path, text in tree.items()}
        main = Parsed(posixpath.basename(parsed.name), parsed.data, parsed.repairs)
        try:
            result, read = _convert_one(kind, main, view)
        except ImportProblem as problem:
            message = str(problem)  # it starts with the suite file's name, or names the file at fault
            if message.startswith(main.name):
                message = parsed.name + message[len(main.name) :]
            elif not message.startswith(parsed.name):
                message = f"{parsed.name}: {message}"
            imported.problems.append(message)
            continue
        result.origin = parsed.name
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
    imported.ignored = sorted(path for path in tree if path not in used | suites | hidden)
    imported.unreadable = [message for path, message in unreadable.items() if path not in used]
    return imported


def _calibration_sets(tree: dict[str, str], samples_found: bool) -> list:
    """calibrate's sets among a folder's files: its grader decks with the samples they embed, and sample
    files no deck embeds (engine.imports.calibrate.plan)."""
    from . import calibrate

    if not samples_found and not any(calibrate.is_deck(path) or path.endswith(".jsonl") for path in tree):
        return []
    try:
        return calibrate.plan(tree)[0]
    except ImportProblem:
        return []


def _few(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def suite_files(files: Mapping[str, str]) -> list[str]:
    """The paths among `files` that are suites of a tool Import knows, shallowest first."""
    return [parsed.name for _kind, parsed in _suites(_normalise_paths(files))]


def _suites(tree: dict[str, str]) -> list[tuple[str, Parsed]]:
    return _scan(tree)[0]


def _scan(tree: dict[str, str]) -> tuple[list[tuple[str, Parsed]], dict[str, str]]:
    """The suites among the files, shallowest first; and the YAML or TOML files that do not parse, and
    why (each might have been a suite)."""
    found, unreadable = [], {}
    for path in sorted(_candidates(tree), key=lambda path: (path.count("/"), path)):
        try:
            parsed = _parse_candidate(path, tree[path], strict=True)
        except ImportProblem as problem:
            unreadable[path] = str(problem) if str(problem).startswith(path) else f"{path}: {problem}"
            continue
        kind = looks_like(parsed.data) if parsed is not None else None
        if kind:
            found.append((kind, parsed))
    return found, unreadable


def _relative(path: str, folder: str) -> str:
    return posixpath.relpath(path, folder) if folder else path


def _normalise_paths(files: Mapping[str, str]) -> dict[str, str]:
    """Paths as `a/b/c.yaml` (no `..`, no leading `/`), text decoded as convert's files are."""
    if not files:
        raise ImportProblem("no files: give the suite files (or their folder) and the files they refer to")
    out: dict[str, str] = {}
    for name, text in files.items():
        path = posixpath.normpath(str(name).replace("\\", "/")).lstrip("/")
        if path in ("", ".") or path.startswith("../") or path == "..":
            raise ImportProblem(f"{name!r} is not a path inside the folder being imported")
        if path in out:
            raise ImportProblem(f"{path} was given twice")
        out[path] = _text(path, text)
    return out


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


# --- finding the suite file among the uploads ------------------------------------------------------


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


def _text(name: str, text: str | bytes) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ImportProblem(f"{name} is not UTF-8 text") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _candidates(files: dict[str, str]) -> list[str]:
    names = [name for name in files if is_yaml_name(name) or name.lower().endswith(".toml")]
    names += [name for name in files if name.lower().endswith(".jsonl") and _agentv_rows(files[name])]
    if not names:  # JSONL of calibrate's samples, when there is no suite file it could be a dataset of
        names = [
            name for name in files if name.lower().endswith(".jsonl") and _holds_samples(name, files[name])
        ]
    if not names and len(files) == 1:
        names = list(files)  # a single file with another extension: try it as YAML
    return names


def _agentv_rows(text: str) -> list[dict] | None:
    """AgentV's JSONL eval file (an eval of its own, beside an optional sidecar `<name>.yaml`): rows of
    `id`, `criteria` (or `expected_outcome`) and `input_messages` (or `input`); None for any other JSONL."""
    rows = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            return None
        if not (
            isinstance(row, dict)
            and "id" in row
            and {"criteria", "expected_outcome"} & set(row)
            and {"input_messages", "input"} & set(row)
        ):
            return None
        rows.append(row)
    return rows or None


def _holds_samples(name: str, text: str) -> bool:
    from .calibrate import parse_file, sample_shape

    try:
        return sample_shape(parse_file(name, text))
    except ImportProblem:
        return False


def _parse_candidate(name: str, text: str, strict: bool) -> Parsed | None:
    if name.lower().endswith(".jsonl") and (rows := _agentv_rows(text)):
        return Parsed(name, {"tests": rows})
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
            "files (tests with input / criteria / assertions, v2 evalcases with input_messages, v1 testcases), "
            "promptfoo configuration (prompts, providers, tests of vars and assert), agtlantis eval files "
            "(agent + cases of input objects), and calibrate TOML (Bolt Foundry's [samples.<id>] tables), "
            "JSONL samples and grader decks (*.deck.md)"
        )
    if len(found) > 1 and any(not parsed.name.lower().endswith(".jsonl") for _, parsed in found):
        # AgentV's JSONL eval file beside a YAML suite is that suite's cases, not a suite of its own.
        found = [
            (kind, p) for kind, p in found if not (kind == "agentv" and p.name.lower().endswith(".jsonl"))
        ]
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
                f"{parsed[0].name} is {a(KINDS[other])} file, not {a(KINDS[kind])} one: choose “auto-detect”"
            )
        raise ImportProblem(f"{parsed[0].name} is not {a(KINDS[kind])} suite: {_expected_shape(kind)}")
    if not parsed:
        raise ImportProblem(f"no YAML suite file was uploaded: {_expected_shape(kind)}")
    raise ImportProblem(f"none of the uploaded YAML files is {a(KINDS[kind])} suite: {_expected_shape(kind)}")


def _expected_shape(kind: str) -> str:
    return {
        "vibecheck": "expected `metadata` and `evals` of `prompt` + `checks`",
        "letta": "expected a suite.yaml with `dataset`, `target` and `graders` (or `gate`)",
        "agentv": "expected `tests` with `vars` and `assert`, or with `input` (or v2's `evalcases` with "
        "`input_messages`)",
        "promptfoo": "expected `prompts`, `providers` and `tests` of `vars` and `assert`",
        "agtlantis": "expected `agent` and `cases`, each with an `input` object",
        "calibrate": "expected a grader deck (*.deck.md) or samples: TOML [samples.<id>] tables with a "
        "score and messages (or userMessage / assistantResponse), or JSONL rows of them",
    }.get(kind, f"expected {a(KINDS[kind])} suite")


def _toml(name: str, text: str) -> dict:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ImportProblem(f"{name} is not valid TOML: {exc}") from None


AGENTV_TEST_KEYS = {"input", "input_messages", "criteria", "expected_output", "assertions", "turns"}


def looks_like(data: object) -> str | None:
    """The tool whose suite format `data` (a parsed YAML or TOML file, or JSONL rows) has, or None."""
    from .calibrate import sample_shape

    if sample_shape(data):  # calibrate's samples (TOML tables or JSONL rows) or a deck's contexts
        return "calibrate"
    if not isinstance(data, dict):
        return None
    if _agtlantis(data):
        return "agtlantis"
    schema = data.get("$schema")
    if (
        (isinstance(schema, str) and schema.startswith("agentv-eval"))
        or isinstance(data.get("evalcases"), list)
        or isinstance(data.get("testcases"), list)  # AgentV's first format
    ):
        return "agentv"
    from .agentv import earlier_shape
    from .promptfoo import agentv_flavour, shared_shape

    if earlier_shape(data):  # AgentV before it took promptfoo's shape: no prompts, no providers, no vars
        return "agentv"
    if shared_shape(data):  # promptfoo's shape, which today's AgentV shares
        return "agentv" if agentv_flavour(data) else "promptfoo"
    tests = data.get("tests")  # AgentV: `tests` of input / criteria / expected_output / assertions
    if (
        isinstance(tests, list)
        and tests
        and "evals" not in data
        and "prompts" not in data  # promptfoo's shape, which today's AgentV shares
        and "providers" not in data
        and all(
            (isinstance(t, dict) and (AGENTV_TEST_KEYS & set(t)))
            or (isinstance(t, str) and t.startswith("file://"))
            for t in tests
        )
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


def _agtlantis(data: dict) -> bool:
    """@agtlantis/eval's eval file: `agent` (a name in its config) and `cases`, each with an `input` object."""
    cases = data.get("cases")
    if not isinstance(cases, list) or "evals" in data or "tests" in data:
        return False
    if isinstance(data.get("agent"), str):
        return True
    return bool(cases) and all(
        isinstance(case, dict) and isinstance(case.get("input"), dict) for case in cases
    )


__all__ = [
    "KINDS",
    "ImportError_",
    "ImportProblem",
    "ImportResult",
    "Imported",
    "Loss",
    "convert",
    "convert_all",
    "detect",
    "suite_files",
]
