"""Calibration sets: conversations with a human's expected score, for checking an LLM judge.

The format follows Bolt Foundry's calibrate: a sample is an OpenAI-style `messages` array (any role, any
order, system messages included) with `expected = {score, reason}`. The judge grades each sample's
conversation as it stands; the final assistant message is the reply under judgement and no agent model is
called. Comparing the judge's scores with the expected ones (engine/agreement.py) says whether the judge
can be trusted.

A set is written like a suite, with `samples` where a suite has `evals`:

    name: tutor-politeness
    judge: {criteria: Polite and correct, scale: -3..3}
    samples:
      - messages: [{role: user, content: What is 2+2?}, {role: assistant, content: The answer is 4}]
        expected: {score: 3, reason: Correct answer}

Samples may also come from an attached JSONL file (one sample per line) or a calibrate TOML file
(`[[samples]]` tables). A sample that breaks one of calibrate's rules (a non-empty `messages` array, each
message with a `role` string and a `content` string) is skipped with a warning naming it and the rule;
the others still count. An expected score off the judge's scale is an error, located.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import Field, model_validator

from .. import bounds
from ..bounds import loads_json
from ..schema import SCALES, JudgeSpec, MockSpec, StrictModel
from ..schema.base import LocatedError
from ..schema.settings import CacheSetting
from ..source import SuiteError, SuiteProblem, TreeBuilder, format_path, parse_yaml, validated, where_written

MAX_REPEATS = 20
MAX_JUDGES = 10


class NamedJudge(JudgeSpec):
    """A judge under calibration: the options of a suite's `llm_judge`, plus a name to tell several apart."""

    name: str | None = Field(None, max_length=100, description="Shown on the result page (default judge-N).")


class CalibrationGates(StrictModel):
    min_agreement: float | None = Field(
        None, ge=0.0, le=1.0, description="Fail the calibration below this exact agreement (0-1)."
    )
    min_kappa: float | None = Field(
        None, ge=-1.0, le=1.0, description="Fail the calibration below this Cohen's kappa."
    )


class CalibrationSet(StrictModel):
    name: str = Field(max_length=200)
    description: str | None = None
    judge: NamedJudge | None = Field(None, description="The judge to calibrate.")
    judges: list[NamedJudge] = Field(
        default_factory=list, description="Several judges, calibrated side by side on the same samples."
    )
    repeats: int = Field(1, ge=1, le=MAX_REPEATS, description="Ask each judge this many times per sample.")
    cache: CacheSetting = (
        None  # the judges' first answer about each sample; `repeats: true` for the repeats too
    )
    gates: CalibrationGates | None = None
    mock: MockSpec | None = Field(
        None, description="Replies of the built-in `mock` judge, for trying a set offline."
    )
    samples_file: str | None = Field(
        None, description="An attached JSONL (one sample per line) or calibrate TOML ([[samples]]) file."
    )
    # Each sample is checked on its own below, so that one bad sample is skipped rather than failing the set.
    samples: list[object] = Field(default_factory=list)

    @model_validator(mode="after")
    def _judges(self) -> CalibrationSet:
        if self.judge is not None and self.judges:
            raise LocatedError(("judges",), "write `judge` or `judges`, not both")
        if self.judge is None and not self.judges:
            raise ValueError("a calibration set needs a `judge` (or `judges`)")
        if len(self.judges) > MAX_JUDGES:
            raise LocatedError(("judges",), f"at most {MAX_JUDGES} judges are calibrated at once")
        judges = self.all_judges
        first = judges[0].scale
        for index, judge in enumerate(judges):
            if judge.scale != first:
                # Expected scores are written once per sample, so every judge must read them on one scale.
                raise LocatedError(
                    ("judges", index, "scale"),
                    f"every judge needs the same scale: this one is on {judge.scale}, judges[0] on {first}",
                )
        seen: set[str] = set()
        for index, judge in enumerate(judges):
            judge.name = judge.name or ("judge" if len(judges) == 1 else f"judge-{index + 1}")
            if judge.name in seen:
                raise LocatedError(
                    ("judges", index, "name"), f"two judges are named {judge.name!r}; names must differ"
                )
            seen.add(judge.name)
        if not self.samples and not self.samples_file:
            raise ValueError("a calibration set needs `samples` or a `samples_file`")
        return self

    @property
    def all_judges(self) -> list[NamedJudge]:
        return [self.judge] if self.judge is not None else list(self.judges)

    @property
    def scale(self) -> str:
        return self.all_judges[0].scale

    @property
    def threshold(self) -> float:
        """Pass/fail line on the scale: the first judge's threshold (its scale's default unless set)."""
        return float(self.all_judges[0].threshold)


@dataclass(frozen=True)
class Sample:
    index: int  # position among the set's valid and skipped samples, in order: samples, then the file's
    label: str  # where it was written: "samples[3]" or "samples.jsonl line 4"
    messages: list[dict]
    expected_score: float
    expected_reason: str = ""
    tags: tuple[str, ...] = ()

    @property
    def reply(self) -> str:
        """The message under judgement: the last assistant message with text (an agent's tool calls before
        it are part of the conversation the judge reads)."""
        return self.messages[self.reply_at]["content"] if self.reply_at is not None else ""

    @property
    def reply_at(self) -> int | None:
        for at in range(len(self.messages) - 1, -1, -1):
            if _is_reply(self.messages[at]):
                return at
        return None


def _is_reply(message: dict) -> bool:
    return (
        message["role"] == "assistant"
        and isinstance(message.get("content"), str)
        and bool(message["content"])
    )


def _tool_calls_problem(calls: object) -> str | None:
    """What is wrong with an assistant message's `tool_calls`, in OpenAI's shape; None when nothing is."""
    if not isinstance(calls, list) or not calls:
        return "`tool_calls` is a non-empty list of OpenAI tool calls"
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(function, dict)
            and isinstance(call.get("id"), str)
            and isinstance(function.get("name"), str)
            and isinstance(function.get("arguments", ""), str)
        ):
            return "each tool call is {id, type: function, function: {name, arguments}} with strings"
    return None


@dataclass
class LoadedSet:
    spec: CalibrationSet
    samples: list[Sample]
    warnings: list[SuiteProblem] = field(default_factory=list)


class _SampleSkipped(Exception):
    def __init__(self, path: tuple, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


def _checked_sample(raw: object, scale: str) -> tuple[list[dict], float, str, tuple[str, ...]]:
    """calibrate's rules for one sample. Raises _SampleSkipped (the sample is left out, with a warning) or
    ValueError with a path (an error: an expected score off the scale is a mistake in the labels)."""
    if not isinstance(raw, dict):
        raise _SampleSkipped((), "a sample is a mapping with `messages` and `expected`")
    if "messages" not in raw and ("userMessage" in raw or "assistantResponse" in raw):
        raise _SampleSkipped(
            (),
            "userMessage/assistantResponse is calibrate's old form: use a `messages` array (Import converts it)",
        )
    unknown = sorted(set(raw) - {"messages", "expected", "tags", "id"})
    if unknown:
        raise _SampleSkipped(
            (unknown[0],), f"unknown key `{unknown[0]}` (a sample has messages, expected, tags)"
        )
    messages = raw.get("messages")
    if not isinstance(messages, list):
        raise _SampleSkipped(("messages",), "a sample must have a `messages` array")
    if not messages:
        raise _SampleSkipped(("messages",), "the `messages` array cannot be empty")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _SampleSkipped(("messages", i), "each message is a mapping with `role` and `content`")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role:
            raise _SampleSkipped(("messages", i, "role"), "each message must have a role string")
        # An agent's conversation, in OpenAI's shape: an assistant message may only call tools, and a tool's
        # answer may be empty; every other message says something.
        if role == "assistant" and "tool_calls" in message:
            problem = _tool_calls_problem(message["tool_calls"])
            if problem:
                raise _SampleSkipped(("messages", i, "tool_calls"), problem)
            if content is not None and not isinstance(content, str):
                raise _SampleSkipped(
                    ("messages", i, "content"), "content is a string (or null beside tool calls)"
                )
        elif role == "tool":
            if not isinstance(content, str):
                raise _SampleSkipped(("messages", i, "content"), "a tool message's content is a string")
            if not isinstance(message.get("tool_call_id", ""), str):
                raise _SampleSkipped(("messages", i, "tool_call_id"), "`tool_call_id` is a string")
        elif not isinstance(content, str) or not content:
            raise _SampleSkipped(("messages", i, "content"), "each message must have a content string")
    if not any(_is_reply(message) for message in messages):
        raise _SampleSkipped(("messages",), "no assistant message with text: there is no reply to judge")
    expected = raw.get("expected")
    if expected is None:
        raise _SampleSkipped((), "no `expected` score: nothing to calibrate the judge against")
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        expected = {"score": expected}
    if (
        not isinstance(expected, dict)
        or not isinstance(expected.get("score"), (int, float))
        or isinstance(expected.get("score"), bool)
    ):
        raise _SampleSkipped(("expected",), "`expected` is {score: <number>, reason: <text>}")
    score = float(expected["score"])
    low, high, _ = SCALES[scale]
    if not low <= score <= high:
        error = ValueError(f"expected score {score:g} is outside the judge's {scale} scale")
        error.path = ("expected", "score")  # type: ignore[attr-defined]
        raise error
    reason = expected.get("reason") or ""
    tags = raw.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise _SampleSkipped(("tags",), "`tags` is a list of strings")
    clean = [
        {"role": m["role"], "content": m.get("content")}
        | {key: m[key] for key in ("tool_calls", "tool_call_id") if m.get(key) is not None}
        for m in messages
    ]
    return clean, score, str(reason), tuple(tags)


def _file_samples(name: str, text: str) -> tuple[list[tuple[str, object]], list[SuiteProblem]]:
    """(label, raw sample) pairs from an attached JSONL or calibrate TOML file."""
    if name.lower().endswith(".toml"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            return [], [SuiteProblem(0, 0, "", f"not valid TOML: {exc}", file=name)]
        rows = data.get("samples")
        if isinstance(rows, dict):  # calibrate's keyed [samples.<id>] tables: the key is the sample's id
            return [(f"{name} sample {key}", _keyed(key, row)) for key, row in rows.items()], []
        if not isinstance(rows, list):
            return [], [
                SuiteProblem(
                    0, 0, "", "a calibrate TOML file holds [samples.<id>] or [[samples]] tables", file=name
                )
            ]
        return [(f"{name} sample {i + 1}", row) for i, row in enumerate(rows)], []
    pairs, problems = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            pairs.append((f"{name} line {number}", loads_json(line)))
        except ValueError as exc:
            problems.append(SuiteProblem(number, 1, "", f"not valid JSON: {exc}", file=name))
    return pairs, problems


def _keyed(key: str, row: object) -> object:
    """A keyed calibrate sample in evalsite's form: its flat `score` and `description` as `expected`."""
    if not isinstance(row, dict) or "expected" in row or "score" not in row:
        return row
    row = dict(row)
    expected = {"score": row.pop("score")}
    if isinstance(row.get("description"), str):
        expected["reason"] = row.pop("description")
    return {"id": key, **row, "expected": expected}


def load_calibration(
    data: bytes | str, filename: str = "calibration.yaml", files: Mapping[str, str] | None = None
) -> LoadedSet:
    """Parse and validate a calibration set with its attached files; raises SuiteError for errors. Samples
    that break calibrate's rules are skipped and listed in `warnings`."""
    try:
        raw, builder = parse_yaml(data)
    except SuiteError as exc:
        exc.filename = filename
        raise
    return load_parsed(raw, builder, filename, files)


def load_parsed(raw: dict, builder: TreeBuilder, filename: str, files: Mapping[str, str] | None) -> LoadedSet:
    """load_calibration after the YAML is parsed (engine.loader.load_suite hands sets over here)."""
    spec = validated(CalibrationSet, raw, builder, filename)

    written: list[tuple[str, object, tuple | None]] = [
        (f"samples[{i}]", sample, ("samples", i)) for i, sample in enumerate(spec.samples)
    ]
    errors: list[SuiteProblem] = []
    warnings: list[SuiteProblem] = []
    if spec.samples_file:
        text = (files or {}).get(spec.samples_file)
        if text is None:
            line, column = where_written(("samples_file",), builder, key=False)
            errors.append(
                SuiteProblem(line, column, "samples_file", f"{spec.samples_file} is not attached to the set")
            )
        else:
            pairs, problems = _file_samples(spec.samples_file, text)
            errors += problems
            written += [(label, sample, None) for label, sample in pairs]

    samples: list[Sample] = []
    for index, (label, raw_sample, path) in enumerate(written):
        identifier = raw_sample.get("id") if isinstance(raw_sample, dict) else None
        if (
            isinstance(identifier, str | int)
            and not isinstance(identifier, bool)
            and str(identifier) not in label
        ):
            label = f"{label} ({identifier})"  # the sample's own name, as its author knows it
        try:
            messages, score, reason, tags = _checked_sample(raw_sample, spec.scale)
        except _SampleSkipped as skipped:
            warnings.append(
                _problem(builder, path, skipped.path, label, f"{label} skipped: {skipped.message}")
            )
            continue
        except ValueError as exc:
            errors.append(_problem(builder, path, getattr(exc, "path", ()), label, f"{label}: {exc}"))
            continue
        samples.append(Sample(index, label, messages, score, reason, tags))
    if errors:
        raise SuiteError(errors, filename)
    if not samples:
        line, column = where_written(("samples",) if spec.samples else ("samples_file",), builder, key=True)
        raise SuiteError(
            [
                *warnings,
                SuiteProblem(line, column, "samples", "no sample can be calibrated (see the warnings)"),
            ],
            filename,
        )
    total = len(spec.all_judges) * len(samples) * spec.repeats
    if total > bounds.MAX_CONVERSATIONS_PER_RUN:
        line, column = where_written(("samples",) if spec.samples else ("samples_file",), builder, key=True)
        message = (
            f"a calibration would play {total:,} judgements ({len(spec.all_judges)} judges × {len(samples):,} "
            f"samples × {spec.repeats} repeats); at most {bounds.MAX_CONVERSATIONS_PER_RUN:,} are allowed "
            "(EVALSITE_MAX_CONVERSATIONS_PER_RUN)"
        )
        raise SuiteError([SuiteProblem(line, column, "samples", message)], filename)
    return LoadedSet(spec, samples, warnings)


def _problem(
    builder: TreeBuilder, path: tuple | None, inner: tuple, label: str, message: str
) -> SuiteProblem:
    if path is None:  # in an attached file: its line is in the label
        file, _, rest = label.partition(" line ")
        line = int(rest.split(" ", 1)[0]) if rest.split(" ", 1)[0].isdigit() else 0
        return SuiteProblem(
            line, 1 if line else 0, "", message, file=file.split(" sample ")[0].split(" (")[0]
        )
    full = (*path, *inner)
    line, column = where_written(full, builder, key=bool(inner))
    return SuiteProblem(line, column, format_path(full), message)
