"""YAML text -> Suite: a suite validated against engine.schema, its attached files read, every error located.

Reading the YAML is engine.source's; a calibration set (engine.calibration) is loaded as the suite it plays.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping

import yaml
from pydantic import ValidationError

from . import bounds, suitevars
from .datasets import rows_to_evals
from .schema import MAX_FOLLOWUP_DEPTH, Check, CodeSpec, Suite, Tool
from .schema.grading import check_rubric
from .source import (
    BoundedLoader,
    Path,
    SuiteError,
    SuiteProblem,
    TreeBuilder,
    decode_source,
    format_path,
    load_yaml,
    parse_yaml,
    validated,
    where_written,
)


def _depth_problems(suite: Suite, builder: TreeBuilder) -> list[SuiteProblem]:
    problems: list[SuiteProblem] = []

    def walk(items: list[Check], path: Path, depth: int) -> None:
        for index, item in enumerate(items):
            item_path = (*path, index)
            if item.checks is not None:
                if depth + 1 > MAX_FOLLOWUP_DEPTH:
                    line, column = where_written((*item_path, "prompt"), builder, key=True)
                    problems.append(
                        SuiteProblem(
                            line,
                            column,
                            format_path((*item_path, "prompt")),
                            f"follow-ups nest at most {MAX_FOLLOWUP_DEPTH} levels below the first prompt; "
                            f"this one is level {depth + 1}",
                        )
                    )
                    continue
                walk(item.checks, (*item_path, "checks"), depth + 1)
            if item.or_:
                walk(item.or_, (*item_path, "or"), depth)

    for index, ev in enumerate(suite.evals):
        walk(ev.checks or [], ("evals", index, "checks"), 0)
    return problems


def _metadata_conflicts(raw: dict, builder: TreeBuilder) -> list[SuiteProblem]:
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict):
        return []
    problems = []
    for field, meta_field in (("name", "name"), ("model", "model"), ("system", "system_prompt")):
        if field in raw and meta_field in metadata and raw[field] != metadata[meta_field]:
            line, column = where_written(("metadata", meta_field), builder, key=True)
            problems.append(
                SuiteProblem(
                    line,
                    column,
                    f"metadata.{meta_field}",
                    f"`{field}` and `metadata.{meta_field}` disagree; keep one",
                )
            )
    return problems


def _attachments(
    suite: Suite, raw: dict, builder: TreeBuilder, files: Mapping[str, str]
) -> list[SuiteProblem]:
    """Every file the suite names must be attached; the dataset's rows become evals."""
    problems: list[SuiteProblem] = []

    def missing(path: Path, name: str) -> None:
        line, column = where_written(path, builder, key=False)
        attached = ", ".join(sorted(files)) or "none"
        problems.append(
            SuiteProblem(
                line, column, format_path(path), f"file `{name}` is not attached (attached: {attached})"
            )
        )

    # Named graders' rubric files: read on loading, so a worker grades with the text the suite was saved with.
    for where, _, grader in suite.named_graders():
        if grader.rubric_file is None:
            continue
        path = (*where, "rubric_file")
        if grader.rubric_file not in files:
            missing(path, grader.rubric_file)
            continue
        try:
            grader.rubric = check_rubric(files[grader.rubric_file])
        except ValueError as exc:
            line, column = where_written(path, builder, key=False)
            problems.append(SuiteProblem(line, column, format_path(path), f"{grader.rubric_file}: {exc}"))

    # Code checks' programs and modules: attached, so a server can run them where the CLI did.
    for where, spec in suite.code_checks() if _holds_key(raw, "code") else ():
        for name in spec.files:
            if name not in files:
                missing((*where, "function" if spec.function is not None else "command"), name)

    # Replayed tools' results: attached, and a results document, so a run finds what it replays.
    replayed = list(_replayed_tools(suite))
    if replayed:
        # engine.tools brings the model clients (aiohttp, openai): only a suite that replays tools loads them.
        from .tools.replay import NotRecorded, read_recorded
    for where, tool in replayed:
        if tool.replay not in files:
            missing((*where, "replay"), tool.replay)
            continue
        try:
            tool.recorded = read_recorded(files[tool.replay])
        except NotRecorded as exc:
            line, column = where_written((*where, "replay"), builder, key=False)
            problems.append(
                SuiteProblem(line, column, format_path((*where, "replay")), f"{tool.replay}: {exc}")
            )

    for index, ev in enumerate(suite.evals):
        for m, message in enumerate(ev.messages or []):
            if isinstance(message.content, list):
                for k, part in enumerate(message.content):
                    if part.type == "file" and part.value not in files:
                        missing(("evals", index, "messages", m, "content", k, "value"), part.value)
    if suite.dataset:
        if suite.dataset not in files:
            missing(("dataset",), suite.dataset)
        else:
            rows, row_problems = rows_to_evals(
                suite.dataset,
                files[suite.dataset],
                grader=suite.grader,
                rubric=suite.rubric,
                graders=suite.graders,
            )
            problems += [
                SuiteProblem(p.line, 1 if p.line else 0, "dataset", p.message, suite.dataset)
                for p in row_problems
            ]
            # The ids the suite's own evals run under, defaults (eval-<n>) included.
            taken = {suite.eval_id(index) for index in range(len(suite.evals))}
            for number, row in enumerate(rows, start=1):
                row.id = row.id or f"row-{number}"
                if row.id in taken:
                    problems.append(
                        SuiteProblem(
                            0, 0, "dataset", f"row {number}: id {row.id!r} is used twice", suite.dataset
                        )
                    )
                    break
                taken.add(row.id)
            suite.evals.extend(rows)
    return problems


def _replayed_tools(suite: Suite):
    """Every tool with `replay`, where it is declared: (its path in the suite, the tool)."""
    lists = [(("tools",), suite.tools)]
    lists += [(("evals", index, "tools"), ev.tools) for index, ev in enumerate(suite.evals)]
    for where, tools in lists:
        for position, tool in enumerate(tools or ()):
            if isinstance(tool, Tool) and tool.replay is not None:
                yield (*where, position), tool


def is_calibration(raw: object) -> bool:
    """Whether parsed YAML is a calibration set (engine.calibration) rather than a suite."""
    return isinstance(raw, dict) and ("samples" in raw or "samples_file" in raw) and "evals" not in raw


def load_suite(
    data: bytes | str, filename: str = "suite.yaml", files: Mapping[str, str] | None = None
) -> Suite:
    """Parse and validate a suite with its attached files (name -> text); raises SuiteError listing every
    problem found. Dataset rows are appended to `evals`."""
    try:
        raw, builder = parse_yaml(data)
    except SuiteError as exc:
        exc.filename = filename
        raise
    return load_parsed_suite(raw, builder, filename, files)


def load_parsed_suite(
    raw: dict, builder: TreeBuilder, filename: str = "suite.yaml", files: Mapping[str, str] | None = None
) -> Suite:
    """load_suite for a file already parsed (engine.source.parse_yaml), so a caller that also needs the raw
    data (the files it names, whether it is a calibration set) reads it once."""
    if is_calibration(raw):
        # A calibration set is played as a suite of given replies (its module is imported for one only).
        from .calibration import as_suite, load_parsed

        return as_suite(load_parsed(raw, builder, filename, files))
    problems = _metadata_conflicts(raw, builder)
    if problems:
        raise SuiteError(problems, filename)
    suite = validated(Suite, raw, builder, filename)
    written = len(suite.evals)
    problems = (
        _reference_problems(raw, builder)
        or _depth_problems(suite, builder)
        or _attachments(suite, raw, builder, files or {})
        or _too_many_conversations(suite, written, raw, builder)
    )
    if problems:
        raise SuiteError(problems, filename)
    return suite


def _reference_problems(raw: dict, builder: TreeBuilder) -> list[SuiteProblem]:
    """`{{var:…}}` the suite does not declare, `{{secret:…}}` no environment variable could hold."""
    problems = []
    if "{{" not in _as_text(raw):
        return problems  # no reference can be written without braces
    for path, message in suitevars.reference_problems(raw):
        line, column = where_written(path, builder, key=False)
        problems.append(SuiteProblem(line, column, format_path(path), message))
    return problems


def _as_text(raw: object) -> str:
    """Parsed YAML as JSON text: json's C encoder visits every value far faster than a walk in Python, so
    looking for a key or a mark in this text first spares the walks of a large suite that has none."""
    return json.dumps(raw, default=str, ensure_ascii=False)


def _holds_key(raw: object, key: str) -> bool:
    """Whether `key` may be a key anywhere in parsed YAML (a value's own quotes are escaped in the text)."""
    return f'"{key}":' in _as_text(raw)


def conversation_count(suite: Suite) -> int:
    """How many conversations a run of the suite plays: every iteration of every eval is one."""
    return sum(ev.iterations or suite.iterations for ev in suite.evals)


def _too_many_conversations(
    suite: Suite, written: int, raw: dict, builder: TreeBuilder
) -> list[SuiteProblem]:
    cap = bounds.MAX_CONVERSATIONS_PER_RUN
    total = conversation_count(suite)
    if total <= cap:
        return []
    rows = len(suite.evals) - written
    counted = [(written, "eval"), (rows, "dataset row")]
    what = " and ".join(f"{n:,} {word}{'' if n == 1 else 's'}" for n, word in counted if n)
    if any(ev.iterations for ev in suite.evals):
        what += ", with their iterations"
    elif suite.iterations > 1:
        what += f" × {suite.iterations:,} iterations"
    # At what makes the number: the suite's iterations, else the dataset, else the list of evals.
    place = "iterations" if "iterations" in raw else "dataset" if rows else "evals"
    line, column = where_written((place,), builder, key=True)
    return [
        SuiteProblem(
            line,
            column,
            place,
            f"a run would play {total:,} conversations ({what}); at most {cap:,} are allowed "
            "(EVALSITE_MAX_CONVERSATIONS_PER_RUN)",
        )
    ]


def load_saved_suite(text: str, files: Mapping[str, str] | None = None) -> Suite:
    """Load a suite that was validated when it was saved (a stored version): skips locating errors.

    Workers load a suite for every conversation; a bad text still falls back to the full, located report.
    """
    try:
        suite = Suite.model_validate(yaml.load(text, Loader=BoundedLoader))
    except Exception:
        return load_suite(text, files=files)
    if suite.dataset:
        rows, problems = rows_to_evals(
            suite.dataset, (files or {}).get(suite.dataset, ""), grader=suite.grader, rubric=suite.rubric,
            graders=suite.graders,
        )  # fmt: skip
        if problems:
            return load_suite(text, files=files)  # raises, located
        for number, row in enumerate(rows, start=1):
            row.id = row.id or f"row-{number}"
        suite.evals.extend(rows)
    for _, _, grader in suite.named_graders():
        if grader.rubric_file is not None:
            text_of = (files or {}).get(grader.rubric_file)
            if text_of is None:
                return load_suite(text, files=files)  # raises, located
            grader.rubric = text_of
    replayed = list(_replayed_tools(suite))
    if replayed:
        # engine.tools brings the model clients (aiohttp, openai): only a suite that replays tools loads them.
        from .tools.replay import NotRecorded, read_recorded
    for _, tool in replayed:
        text_of = (files or {}).get(tool.replay)
        try:
            tool.recorded = read_recorded(text_of) if text_of is not None else None
        except NotRecorded:
            tool.recorded = None
        if tool.recorded is None:
            return load_suite(text, files=files)  # raises, located
    return suite


def file_references(data: bytes | str) -> list[str]:
    """The attached files a suite names (dataset, history file parts, a calibration set's samples_file, code
    checks' and tools' programs, replayed tools' results), read leniently from raw YAML."""
    try:
        raw = load_yaml(decode_source(data))
    except (SuiteError, yaml.YAMLError):
        return []
    return references(raw)


def references(raw: object) -> list[str]:
    """file_references for data already parsed."""
    if not isinstance(raw, dict):
        return []
    names = [raw[key] for key in ("dataset", "samples_file") if isinstance(raw.get(key), str)]
    listed = raw.get("evals") if isinstance(raw.get("evals"), list) else []  # a wrong shape is validation's
    holders = [raw.get("graders")] + [ev.get("graders") for ev in listed if isinstance(ev, dict)]
    for graders in holders:
        for grader in (graders or {}).values() if isinstance(graders, dict) else []:
            if isinstance(grader, dict) and isinstance(grader.get("rubric_file"), str):
                names.append(grader["rubric_file"])
    if _holds_key(raw, "code"):
        names += _code_files(raw)
    for tools in [raw.get("tools")] + [ev.get("tools") for ev in listed if isinstance(ev, dict)]:
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("replay"), str):
                names.append(tool["replay"])  # a replayed tool's results.json
    evals = raw.get("evals")
    for ev in evals if isinstance(evals, list) else []:  # a wrong shape is validation's to report
        for message in (ev.get("messages") or []) if isinstance(ev, dict) else []:
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else []:
                if (
                    isinstance(part, dict)
                    and part.get("type") == "file"
                    and isinstance(part.get("value"), str)
                ):
                    names.append(part["value"])
    return list(dict.fromkeys(names))


def _code_files(raw: object) -> list[str]:
    """The files code checks run, found anywhere in raw YAML but in messages (whose text is the model's)."""
    names: list[str] = []
    if isinstance(raw, dict):
        for key, value in raw.items():
            if key == "code":
                with contextlib.suppress(ValidationError):  # validation reports it
                    names += CodeSpec.model_validate(value).files
            elif key != "messages":
                names += _code_files(value)
    elif isinstance(raw, list):
        for item in raw:
            names += _code_files(item)
    return names
