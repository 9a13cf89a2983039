"""Reading the uploaded files and finding the suite file among them: names and text normalised, the files
that may be a suite parsed, and the one suite file (with its tool) chosen or a message saying why not."""

from __future__ import annotations

import json
import posixpath
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.schema import Suite

from .agentv import typescript_eval
from .boltfoundry import parse_file, sample_shape
from .common import KINDS, ImportProblem, a, basename, is_yaml_name, parse_yaml, repair_plain_colons
from .shapes import looks_like


@dataclass
class Parsed:
    name: str
    data: object
    repairs: list[str] = field(default_factory=list)  # report lines for text fixed before parsing


def upload_paths(files: Mapping[str, str], unreadable: list[str] | None = None) -> dict[str, str]:
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
            out[path] = decoded(path, text)
        except ImportProblem:
            if unreadable is None:
                raise
            unreadable.append(path)
    return out


def by_name(files: Mapping[str, str]) -> dict[str, str]:
    if not files:
        raise ImportProblem("no files: upload the suite file (and its dataset or attachments)")
    out: dict[str, str] = {}
    for name, text in files.items():
        base = basename(name)
        if not base:
            raise ImportProblem(f"{name!r} is not a file name")
        if base in out:
            raise ImportProblem(f"two uploaded files are named {base!r}; upload one of them")
        out[base] = decoded(base, text)
    return out


def decoded(name: str, text: str | bytes) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ImportProblem(f"{name} is not UTF-8 text") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def tree_paths(files: Mapping[str, str]) -> dict[str, str]:
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
        out[path] = decoded(path, text)
    return out


def candidates(files: dict[str, str]) -> dict[str, Parsed | None]:
    """The files that may be a suite; a JSONL one comes parsed, since reading it is how it is chosen."""
    found: dict[str, Parsed | None] = {
        name: None
        for name in files
        if is_yaml_name(name) or name.lower().endswith(".toml") or skills_file(name)
    }
    for name in files:
        if name.lower().endswith(".jsonl") and (rows := agentv_rows(files[name])):
            found[name] = Parsed(name, {"tests": rows})
    if not found:  # JSONL of calibrate's samples, when there is no suite file it could be a dataset of
        for name in files:
            if name.lower().endswith(".jsonl") and (samples := _samples(name, files[name])):
                found[name] = samples
    if not found and len(files) == 1:
        found = dict.fromkeys(files)  # a single file with another extension: try it as YAML
    return found


def skills_file(name: str) -> bool:
    """Agent Skills' `evals.json` and `*.evals.json`, which AgentV runs beside its eval files: JSON is YAML."""
    base = basename(name).lower()
    return base == "evals.json" or base.endswith(".evals.json")


def agentv_rows(text: str) -> list[dict] | None:
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


def _samples(name: str, text: str) -> Parsed | None:
    try:
        data = parse_file(name, text)
    except ImportProblem:
        return None
    return Parsed(name, data) if sample_shape(data) else None


def parse_candidate(name: str, text: str, strict: bool, parsed: Parsed | None = None) -> Parsed | None:
    """A candidate file parsed (`parsed` when `candidates` has read it); None, or ImportProblem when
    `strict`, when it does not parse."""
    if parsed is not None:
        return parsed
    if name.lower().endswith((".jsonl", ".toml")):
        try:
            return Parsed(name, (parse_file if name.lower().endswith(".jsonl") else _toml)(name, text))
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


def _toml(name: str, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ImportProblem(f"{name} is not valid TOML: {exc}") from None


def main_file(files: dict[str, str]) -> tuple[str, Parsed]:
    names = candidates(files)
    code = [why for name in files if (why := typescript_eval(name))]
    if code and all(typescript_eval(name) for name in names):  # nothing but code to read
        raise ImportProblem("; ".join(code))
    if not names:
        listed = ", ".join(sorted(files))
        raise ImportProblem(
            f"no suite file among {listed}: upload the .yaml file of the suite together with its dataset "
            "or attachments"
        )
    found: list[tuple[str, Parsed]] = []
    others: list[Parsed] = []
    for name, ready in names.items():
        parsed = parse_candidate(name, files[name], strict=len(names) == 1, parsed=ready)
        if parsed is None:
            continue
        kind = looks_like(parsed.data)
        if kind:
            found.append((kind, parsed))
        else:
            others.append(parsed)
    if not found:
        if len(others) == 1 and is_native(others[0].data):
            raise ImportProblem(
                f"{others[0].name} is already an evalsite suite: upload it in the editor instead of importing it"
            )
        what = " and ".join(p.name for p in others) or ", ".join(names)
        raise ImportProblem(
            f"{what}: this is not a format Import knows; it reads vibecheck YAML (metadata + evals of "
            "prompt/checks), Letta Evals suites (suite.yaml with dataset, target and graders), AgentV eval "
            "files (tests with input / criteria / assertions, v2 evalcases with input_messages, v1 testcases) "
            "and the Agent Skills evals.json it runs (skill_name + evals), "
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


def is_native(data: object) -> bool:
    return isinstance(data, dict) and bool(data) and set(data) <= set(Suite.model_fields) and "name" in data


def main_file_for(files: dict[str, str], kind: str) -> Parsed:
    names = candidates(files)
    parsed = [parse_candidate(name, files[name], len(names) == 1, ready) for name, ready in names.items()]
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
        "`input_messages`), or an Agent Skills evals.json's `skill_name` and `evals`",
        "promptfoo": "expected `prompts`, `providers` and `tests` of `vars` and `assert`",
        "agtlantis": "expected `agent` and `cases`, each with an `input` object",
        "calibrate": "expected a grader deck (*.deck.md) or samples: TOML [samples.<id>] tables with a "
        "score and messages (or userMessage / assistantResponse), or JSONL rows of them",
    }.get(kind, f"expected {a(KINDS[kind])} suite")
