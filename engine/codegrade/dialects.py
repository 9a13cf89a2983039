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

import contextlib
import dataclasses
import importlib.util
import json
import math
import pathlib
import sys
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
    # Run in the subprocess before the grader's module is imported, after the shims: for stand-ins that
    # must share their classes with `invoke` (a trajectory's message types).
    prepare: Callable[[], None] = lambda: None


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


# --- agentv: AgentV's code-grader wire payload in, {score, hits, misses, reasoning} (or assertions) out ----
#
# The check's `config` is what the importer wrote: `criteria` (the case's criteria) and `config` (the
# assertion's own config, handed over as it is).


def agentv_payload(given: GradeInput) -> dict:
    expected = given.expected_output
    messages = None  # AgentV hands graders the expected output as assistant messages
    if expected is not None:
        content = expected
        if isinstance(expected, str) and expected.lstrip().startswith(("{", "[")):
            with contextlib.suppress(ValueError):  # an object reference was written as JSON text
                content = json.loads(expected)
        messages = [{"role": "assistant", "content": content}]
    return {
        "input": given.messages[:-1],
        "question": given.input,
        "criteria": str(given.config.get("criteria", "")),
        "output": given.output,
        "messages": given.messages,
        "expected_output": messages,
        "reference_answer": expected
        if isinstance(expected, str) or expected is None
        else json.dumps(expected),
        "input_files": [],
        "config": given.config.get("config", {}),
    }


def agentv_read(answer: Any) -> Answer:
    """`{score, hits, misses, reasoning}`, or `{score?, assertions: [{text, passed}]}` (the share passed when
    no score is given); the check's threshold decides the verdict, as AgentV's does."""
    if isinstance(answer, (bool, int, float)):
        return evalsite_read(answer)
    if not isinstance(answer, dict):
        raise BadAnswer(f"expected {{score, hits, misses, reasoning}}; got {json.dumps(answer)[:80]}")
    checks = [item for item in answer.get("assertions") or [] if isinstance(item, dict)]
    hits = [str(item.get("text", "")) for item in checks if item.get("passed")]
    misses = [str(item.get("text", "")) for item in checks if not item.get("passed")]
    for key, found in (("hits", hits), ("misses", misses)):
        if isinstance(answer.get(key), list):
            found += [str(item) for item in answer[key]]
    score = answer.get("score")
    if score is None:
        if not checks:
            raise BadAnswer(f"the answer has neither `score` nor `assertions`: {json.dumps(answer)[:80]}")
        score = sum(1 for item in checks if item.get("passed")) / len(checks)
    reason = answer.get("reasoning", answer.get("reason"))
    parts = [str(reason)] if reason else []
    parts += [f"hits: {'; '.join(hits)}"] if hits else []
    parts += [f"misses: {'; '.join(misses)}"] if misses else []
    return Answer(min(1.0, max(0.0, number(score, "`score`"))), None, " — ".join(parts))


# --- promptfoo: get_assert(output, context) returning a bool, a score or a GradingResult -----------------
#
# The check's `config` is what the importer wrote: `vars` (the test's variables), `prompt` (the rendered
# prompt) and `config` (the assertion's own config).


def promptfoo_payload(given: GradeInput) -> dict:
    variables = given.config.get("vars", {})
    return {
        "output": given.output,
        "context": {
            "prompt": given.config.get("prompt", given.input),
            "vars": variables,
            "test": {"vars": variables},
            "config": given.config.get("config", {}),
        },
    }


def promptfoo_read(answer: Any) -> Answer:
    """A bool (the verdict), a number (the score: the check's threshold decides), or a GradingResult dict
    `{pass, score, reason}`; a program's printed JSON is read the same way."""
    if isinstance(answer, dict) and "pass_" in answer and "pass" not in answer:
        answer = {**answer, "pass": answer["pass_"]}  # a GradingResult written with Python's `pass_`
    return evalsite_read(answer)


def promptfoo_invoke(function: Callable, payload: Any) -> Any:
    return function(payload["output"], payload["context"])


# --- letta: Letta Evals' @grader functions, called on (Sample, submission) after Letta's extractor -----------


def _letta_shim():
    """letta_shim.py beside this file, loaded by path (this module runs in the subprocess by path too)."""
    name = "evalsite_letta_shim"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).with_name("letta_shim.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules[name]


def letta_payload(given: GradeInput) -> dict:
    return {
        "turns": given.turns,
        "input": given.input,
        "expected_output": given.expected_output,
        "config": given.config,
        "eval_id": given.eval_id,
    }


def letta_read(answer: Any) -> Answer:
    """Letta's GradeResult: `{score, rationale}`; its score alone decides against the check's threshold."""
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return Answer(number(answer, "the score"), None)
    if not isinstance(answer, dict) or "score" not in answer:
        raise BadAnswer(
            f"expected a GradeResult (score, rationale); got {json.dumps(answer, default=str)[:80]}"
        )
    reason = answer.get("rationale") or ""
    return Answer(number(answer["score"], "`score`"), None, str(reason))  # Letta refuses one outside 0-1 too


# One entry per dialect; `dialect:` in a code check names one. The first is the default.
DIALECTS: dict[str, Dialect] = {
    "evalsite": Dialect(
        evalsite_payload,
        evalsite_read,
        sample=({"score": 0.75, "reason": "close"}, Answer(0.75, None, "close")),
    ),
    "agentv": Dialect(
        agentv_payload,
        agentv_read,
        sample=(
            {"score": 0.75, "hits": ["names the total"], "misses": [], "reasoning": "close"},
            Answer(0.75, None, "close — hits: names the total"),
        ),
    ),
    "promptfoo": Dialect(
        promptfoo_payload,
        promptfoo_read,
        sample=({"pass": True, "score": 0.75, "reason": "close"}, Answer(0.75, True, "close")),
        invoke=promptfoo_invoke,
    ),
    "letta": Dialect(
        letta_payload,
        letta_read,
        sample=({"score": 0.75, "rationale": "close"}, Answer(0.75, None, "close")),
        invoke=lambda function, payload: _letta_shim().grade(function, payload),
        prepare=lambda: _letta_shim().install(),
    ),
}
DEFAULT_DIALECT = "evalsite"
