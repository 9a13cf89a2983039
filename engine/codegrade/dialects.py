"""How a code grader is handed the conversation and how its answer is read, one dialect per convention.

A dialect is one entry of DIALECTS: `payload` builds what the grader is given from a GradeInput (JSON on a
program's stdin; the callable's arguments), `invoke` calls a Python callable with it (inside the grader's
own subprocess, so the payload it gets is the JSON decoded), and `read` turns what the grader answered
(JSON decoded) into an Answer or raises BadAnswer. Adding a dialect is an entry here and its functions.
What an importer knows of a test that the conversation does not carry (its vars, its id, a file's options)
goes in the check's `config`, which every payload is built with.

This module is loaded by file path in the grader's subprocess as well as imported by the engine, so it
uses the standard library only and no relative imports.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class BadAnswer(ValueError):
    """The grader's answer cannot be read as a score or a verdict."""


@dataclass(frozen=True)
class GradeInput:
    """What every dialect builds its payload from: the conversation so far and the check's own config."""

    turns: list[dict]  # results-format turn records, the reply being graded last
    messages: list[dict]  # the whole conversation, OpenAI form, ending with the reply being graded
    input: str  # the last user message's text
    output: str  # the reply being graded
    expected_output: Any = None  # the eval's ground truth for this turn, or None
    config: dict = field(default_factory=dict)
    eval_id: str = ""
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    score: float | None  # 0..1, None when the grader gave only a verdict
    passed: bool | None  # None when the grader gave only a score: the check's threshold decides
    reason: str = ""


def call_with_payload(function: Callable, payload: Any) -> Any:
    return function(payload)


@dataclass(frozen=True)
class Dialect:
    """`sample`: an answer as a grader in this dialect gives it, and the Answer it reads as; the registry's
    test plays each dialect end to end with it."""

    payload: Callable[[GradeInput], Any]
    read: Callable[[Any], Answer]
    sample: tuple[Any, Answer]
    invoke: Callable[[Callable, Any], Any] = call_with_payload
    # Modules a tool's graders import (`letta_evals.models`, say), as source, installed in the grader's
    # subprocess when the real package is not there: dotted name -> source.
    shims: dict[str, str] = field(default_factory=dict)


def jsonable(value: Any) -> Any:
    """A callable's return value as JSON-ready data: pydantic models, dataclasses and plain objects too."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (dict, list, str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "__dict__"):
        return {key: item for key, item in vars(value).items() if not key.startswith("_")}
    return str(value)


def number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadAnswer(f"{what} is {json.dumps(value)[:60]}, not a number")
    if not math.isfinite(value):
        raise BadAnswer(f"{what} is {value}, not a finite number")
    return float(value)


# --- evalsite: {turns, messages, input, output, expected_output, config} in, {score, pass, reason} out ----


def evalsite_payload(given: GradeInput) -> dict:
    return {
        "turns": given.turns,
        "messages": given.messages,
        "input": given.input,
        "output": given.output,
        "expected_output": given.expected_output,
        "config": given.config,
    }


def evalsite_read(answer: Any) -> Answer:
    """`{score, pass, reason}` (or `reasoning`), a bare number (the score) or a bare bool (the verdict)."""
    if isinstance(answer, bool):
        return Answer(None, answer)
    if isinstance(answer, (int, float)):
        return Answer(number(answer, "the score"), None)
    if not isinstance(answer, dict):
        raise BadAnswer(
            f"expected {{score, pass, reason}}, a number or true/false; got {json.dumps(answer)[:80]}"
        )
    score = answer.get("score")
    passed = answer.get("pass", answer.get("passed"))
    if score is None and passed is None:
        raise BadAnswer(f"the answer has neither `score` nor `pass`: {json.dumps(answer)[:80]}")
    if passed is not None and not isinstance(passed, bool):
        raise BadAnswer(f"`pass` is {json.dumps(passed)[:40]}, not true or false")
    reason = answer.get("reason", answer.get("reasoning"))
    return Answer(
        None if score is None else number(score, "`score`"),
        passed,
        "" if reason is None else str(reason),
    )


# One entry per dialect; `dialect:` in a code check names one. The first is the default.
DIALECTS: dict[str, Dialect] = {
    "evalsite": Dialect(
        evalsite_payload,
        evalsite_read,
        sample=({"score": 0.75, "reason": "close"}, Answer(0.75, None, "close")),
    ),
}
DEFAULT_DIALECT = "evalsite"
