"""Bolt Foundry's calibrate samples: `[samples.<id>]` TOML tables (with `score`, `description` and
`messages`, or `userMessage` / `assistantResponse`), `[[samples]]` tables, bff-eval JSONL rows and the aibff
GUI's `examples`, each read as a `Sample` in evalsite's sample form."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field

from ..common import ImportProblem, Report, as_number, is_yaml_name, non_finite, parse_yaml, short

SAMPLE_KEYS = {"messages", "userMessage", "assistantResponse"}
REASON_KEYS = ("description", "explanation", "reasoning", "reason")
KNOWN_KEYS = {*SAMPLE_KEYS, "score", "expected", "id", "tags", *REASON_KEYS}


def sample_shape(data: object) -> bool:
    """Whether parsed data (TOML, or JSONL rows as a list) holds calibrate samples or a deck's contexts."""
    if isinstance(data, list):  # JSONL rows
        rows = [row for row in data if not isinstance(row, Unreadable)]
        return bool(rows) and all(isinstance(row, dict) and _row_shape(row) for row in rows)
    if not isinstance(data, dict) or {"evals", "judge", "judges", "tests"} & set(data):
        return False
    examples = data.get("examples")  # the aibff GUI's ground truth: input, expected_output and a score
    if isinstance(examples, list) and examples and "samples" not in data:
        return all(isinstance(e, dict) and {"input", "expected_output"} <= set(e) for e in examples)
    samples = data.get("samples")
    if isinstance(samples, list):
        return bool(samples) and all(isinstance(s, dict) and SAMPLE_KEYS & set(s) for s in samples)
    if isinstance(samples, dict):
        rows = [row for row in samples.values() if isinstance(row, dict)]
        return bool(rows) and any(SAMPLE_KEYS & set(row) for row in rows)
    contexts = data.get("contexts")  # a deck's questions: each asks the assistantQuestion (or question)
    return (
        isinstance(contexts, dict)
        and bool(contexts)
        and all(isinstance(c, dict) and {"assistantQuestion", "question"} & set(c) for c in contexts.values())
    )


def _row_shape(row: dict) -> bool:
    if "userMessage" in row or "assistantResponse" in row:
        return True
    return isinstance(row.get("messages"), list) and "score" in row  # aibff's messages with a flat score


# --- reading sample files ----------------------------------------------------------------------------------


@dataclass
class Sample:
    id: str
    messages: list[dict]
    score: float
    reason: str = ""
    tags: list[str] = field(default_factory=list)
    legacy: bool = False  # written as userMessage / assistantResponse


def parse_file(name: str, text: str) -> object:
    """A TOML (or YAML) file as a dict, a JSONL file as its rows; ImportProblem when it cannot be read."""
    if is_yaml_name(name):
        return parse_yaml(name, text)
    if name.lower().endswith(".toml"):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ImportProblem(f"{name} is not valid TOML: {exc}") from None
    rows: list[object] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            rows.append(Unreadable(number, str(exc)))
    if rows and all(isinstance(row, Unreadable) for row in rows):
        raise ImportProblem(
            f"{name} line {rows[0].line} is not valid JSON (a JSONL file holds one object a line)"
        )
    return rows


@dataclass
class Unreadable:
    """A JSONL line that is not JSON: the sample it held is lost, the others are read."""

    line: int
    error: str


def sample_rows(name: str, data: object) -> list[tuple[str, str | None, object]]:
    """(where, id, row) for each sample a file holds."""
    if isinstance(data, list):
        return [(f"{name} line {n + 1}", None, row) for n, row in enumerate(data)]
    samples = data.get("samples") if isinstance(data, dict) else None
    if isinstance(samples, list):
        return [(f"{name} samples[{n}]", None, row) for n, row in enumerate(samples)]
    if isinstance(samples, dict):
        return [(f"{name} samples.{key}", key, row) for key, row in samples.items()]
    examples = data.get("examples") if isinstance(data, dict) else None
    if isinstance(examples, list):
        return [(f"{name} examples[{n}]", None, _example(row)) for n, row in enumerate(examples)]
    return []


def _example(row: object) -> object:
    """A ground-truth example of the aibff GUI as a sample: its input asked, its expected output replied."""
    if not isinstance(row, dict) or "messages" in row:
        return row
    out = {k: v for k, v in row.items() if k not in ("input", "expected_output")}
    return {"userMessage": row.get("input"), "assistantResponse": row.get("expected_output"), **out}


def read_samples(name: str, data: object, report: Report, taken: set[str]) -> list[Sample]:
    out = []
    for where, key, row in sample_rows(name, data):
        if isinstance(row, Unreadable):
            report.lose(f"{where}: not valid JSON ({row.error}); the sample it held is left out")
            continue
        if not isinstance(row, dict):
            report.skip(f"{where}: not a table, left out")
            continue
        sample = _sample(where, key, row, report)
        if sample is None:
            continue
        wanted = sample.id or where.rsplit(" ", 1)[-1]
        sample.id, number = wanted, 2
        while sample.id in taken:
            sample.id, number = f"{wanted}-{number}", number + 1
        taken.add(sample.id)
        out.append(sample)
    return out


def _sample(where: str, key: str | None, row: dict, report: Report) -> Sample | None:
    if "messages" in row:
        messages = row["messages"]
    elif "userMessage" in row or "assistantResponse" in row:
        messages = [
            {"role": role, "content": row[source]}
            for role, source in (("user", "userMessage"), ("assistant", "assistantResponse"))
            if row.get(source) not in (None, "")
        ]
    else:
        report.lose(f"{where}: no messages (nor userMessage / assistantResponse): the sample is left out")
        return None
    if not isinstance(messages, list) or non_finite(messages):
        report.lose(f"{where}.messages: not a list of messages: the sample is left out")
        return None
    clean = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            report.lose(f"{where}.messages: a message without a role: the sample is left out")
            return None
        content = message.get("content")
        if not isinstance(content, str):
            content = "" if content is None else json.dumps(content, ensure_ascii=False)
        if content.strip():
            clean.append({"role": message["role"], "content": content})
    if not any(m["role"] == "assistant" for m in clean):
        report.group("no assistant message, so no reply to judge: the sample is left out", where, lost=True)
        return None
    expected = row.get("expected")
    written = row.get("score")
    reason = next((row[k] for k in REASON_KEYS if isinstance(row.get(k), str)), "")
    if written is None and isinstance(expected, dict):
        written = expected.get("score")
        reason = reason or (expected.get("reason") if isinstance(expected.get("reason"), str) else "")
    elif written is None:
        written = expected
    score = as_number(written)
    if score is None and isinstance(written, str):
        try:
            score = as_number(float(written))
        except ValueError:
            score = None
    if written is not None and score is None:
        report.group(f"score {short(written, 30)} is not a number: the sample is left out", where, lost=True)
        return None
    tags = row.get("tags")
    tags = [str(tag) for tag in tags] if isinstance(tags, list) else []
    if score is None:
        # aibff calibrate compares a sample nobody scored with a score of 1; the tag keeps them apart.
        report.group(
            "no score: expected score 1, as aibff calibrate assumes, tagged `unlabelled`", where, mapped=True
        )
        score, tags = 1, [*tags, "unlabelled"]
    for extra in sorted(set(row) - KNOWN_KEYS):
        report.group(f"{extra} ({short(row[extra], 30)}): not a sample field evalsite keeps, left out", where)
    identifier = key if key is not None else row.get("id")
    name = str(identifier) if identifier not in (None, "") else ""
    return Sample(name, clean, float(score), reason, tags, legacy="messages" not in row)
