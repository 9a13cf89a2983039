"""Importers never crash: every value of every fixture in tests/fixtures/imports/ (the suite file, and the
first rows of a JSONL dataset) is replaced in turn by a hostile value (NaN, infinities, huge and negative
numbers, a value of the wrong type, deep nesting), and every mapping key by a key of the wrong type. Each
upload must end in an ImportProblem that names the file, or in a suite whose losses are listed; never in
another exception, and never in a suite that smuggles a non-finite number through."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from engine.imports import ImportProblem, convert, looks_like
from engine.imports.common import parse_yaml, repair_plain_colons
from engine.imports.uploads import skills_file
from engine.loader import load_suite
from engine.source import SuiteError
from tests.engine.import_fixtures import CALIBRATE_TOML

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"
JSONL_ROWS = 2  # rows of a dataset fuzzed: the others are read by the same code


def _deep(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = [value]
    return value


NUMBERS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "10**100": 10**100, "-1": -1}
WRONG_TYPES = {
    "null": None,
    "bool": True,
    "number": 7,
    "text": "text",
    "list": ["a", 1],
    "mapping": {"k": "v"},
}
DEEP = _deep(40)
HOSTILE_KEYS = {"int key": 1, "null key": None}


def _hostile(value: object) -> dict[str, object]:
    """The values put in place of `value`: every other type, bad numbers where a number is read (and where
    text is, the non-finite ones), deep nesting where a collection is."""
    out = {name: new for name, new in WRONG_TYPES.items() if type(new) is not type(value)}
    if isinstance(value, int | float) and not isinstance(value, bool):
        out.update(NUMBERS)
    elif isinstance(value, str | bool | None):
        out.update(nan=math.nan, inf=math.inf)
    if isinstance(value, dict | list):
        out["deep"] = DEEP
    return out


def _parse(name: str, text: str) -> object:
    if name.endswith(".toml"):
        import tomllib

        return tomllib.loads(text)
    repaired, _ = repair_plain_colons(text)  # vibecheck's own examples need it
    return parse_yaml(name, repaired)


def _uploads() -> list[tuple[str, dict[str, str]]]:
    """(label, files) of every fixture upload: each folder, and each suite file of a folder of them."""
    out = []
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        files = {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}
        suites = [
            name
            for name in files
            if (name.endswith((".yaml", ".yml")) or skills_file(name))
            and looks_like(_parse(name, files[name]))
        ]
        if len(suites) > 1:  # several suites (and the files beside them, e.g. a prompt file): one upload each
            out += [(f"{folder.name}/{name}", {name: files[name]}) for name in suites]
        else:
            out.append((folder.name, files))
    # calibrate's TOML holds no null, so its samples are fuzzed as the same data in YAML, read alike
    out.append(("calibrate", {"samples.yaml": yaml.safe_dump(_parse("c.toml", CALIBRATE_TOML))}))
    return out


def _paths(value: object, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _shape(data: object, path: tuple) -> tuple:
    """A path with each list index replaced by what the item looks like (its type, its keys, its `type` or
    `kind`): items of the same shape are read by the same code, so one of them is fuzzed for all."""
    shape = []
    for step in path:
        item = data[step]
        if isinstance(step, int):
            if isinstance(item, dict):
                marks = tuple(str(item.get(key)) for key in ("type", "kind") if key in item)
                shape.append((tuple(sorted(map(str, item))), marks))
            else:
                shape.append(type(item).__name__)
        else:
            shape.append(step)
        data = item
    return tuple(shape)


def _at(data: object, path: tuple) -> object:
    for step in path:
        data = data[step]
    return data


def _replace(data: object, path: tuple, new: object) -> object:
    if not path:
        return new
    data = copy.deepcopy(data)
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return data


def _rekey(data: object, path: tuple, new_key: object) -> object:
    data = copy.deepcopy(data)
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    parent[new_key] = parent.pop(path[-1])
    return data


def _dump(data: object) -> str:
    return yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)


def _mutations(files: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """(what changed, files) for every hostile value at every path of an upload's data files."""
    targets: list[tuple[str, object, object]] = []  # (file, line number or None, parsed data)
    for name, text in files.items():
        if name.endswith((".yaml", ".yml")):
            targets.append((name, None, _parse(name, text)))
        elif name.endswith(".jsonl"):
            rows = [line for line in text.split("\n") if line.strip()]
            targets += [(name, number, json.loads(rows[number])) for number in range(JSONL_ROWS)]
    for name, row, data in targets:

        def written(new: object, name: str = name, row: int | None = row) -> dict[str, str]:
            if row is None:
                return {**files, name: _dump(new)}
            lines = [line for line in files[name].split("\n") if line.strip()]
            lines[row] = json.dumps(new)  # NaN and Infinity as Python's json writes them
            return {**files, name: "\n".join(lines) + "\n"}

        where = name if row is None else f"{name} row {row + 1}"
        seen: set[tuple] = set()
        for path in _paths(data):
            if (shape := _shape(data, path)) in seen:
                continue
            seen.add(shape)
            shown = ".".join(map(str, path)) or "(the whole file)"
            for value_name, value in _hostile(_at(data, path)).items():
                yield f"{where} {shown} = {value_name}", written(_replace(data, path, value))
            if path and isinstance(path[-1], str):
                for key_name, key in HOSTILE_KEYS.items():
                    yield f"{where} {shown} -> {key_name}", written(_rekey(data, path, key))
        yield f"{where} empty", {**files, name: ""}


def _non_finite(value: object) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(item) for item in value.values())
    if isinstance(value, list):
        return any(_non_finite(item) for item in value)
    return False


def _outcome(files: dict[str, str], number: bool) -> str | None:
    """None when the upload ends as it should; else what went wrong."""
    try:
        result = convert(files)
    except ImportProblem as problem:
        message = str(problem)
        if not any(name.rsplit("/", 1)[-1] in message for name in files):  # convert reads base names
            return f"ImportProblem names no file: {message}"
        return None
    except Exception as exc:  # noqa: BLE001 - the point: any other exception is the failure
        return f"{type(exc).__name__}: {exc}"
    written = yaml.load(result.source, Loader=yaml.CSafeLoader)
    if _non_finite(written):
        return "the converted suite holds NaN or an infinity"
    if result.needs_files or not number:
        return None  # the loader's own fuzzing covers it; numbers are what a converter may pass through
    try:
        load_suite(result.source, files=result.files)
    except SuiteError:
        pass  # located problems, shown as "written, but not valid yet"
    except Exception as exc:  # noqa: BLE001
        return f"the converted suite crashes the loader: {type(exc).__name__}: {exc}"
    return None


@pytest.mark.parametrize(("label", "files"), _uploads(), ids=[label for label, _ in _uploads()])
def test_every_hostile_value_ends_in_a_located_problem_or_a_listed_loss(label, files):
    failures = []
    for what, mutated in _mutations(files):
        problem = _outcome(mutated, number=what.endswith(tuple(f"= {name}" for name in NUMBERS)))
        if problem:
            failures.append(f"{label}: {what}: {problem}")
    assert not failures, f"{len(failures)} hostile uploads went wrong:\n" + "\n".join(failures[:40])


def test_the_fuzz_reaches_every_converter():
    kinds = {convert(files).kind for _, files in _uploads()}
    assert kinds == {"vibecheck", "letta", "agentv", "calibrate", "agtlantis", "promptfoo"}


@pytest.mark.parametrize(
    ("written", "shown"),
    [(".nan", "NaN"), ("1.0e+400", "Infinity")],
)
def test_a_bad_token_count_is_a_listed_loss_at_its_key(written, shown):
    result = convert(
        {"bad.yaml": f"evals:\n  - prompt: hi\n    checks: [{{max_tokens: {written}}}, {{match: '*'}}]\n"}
    )
    loss = f"evals[0].checks[0].max_tokens: expected a whole number of tokens, got {shown}; left out"
    assert loss in result.unmapped
    assert load_suite(result.source).evals[0].checks[0].match == "*"
