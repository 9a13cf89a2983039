"""Letta Evals' own names for a grader's subprocess, where letta_evals and letta_client are not installed.

A Letta custom grader file imports `letta_evals` (its decorators, Sample, GradeResult, the built-in
extractors) and often `letta_client` (the message types of a trajectory). `install()` puts small stand-ins
for both in sys.modules before that file is imported; `grade()` then does what Letta's ToolGrader does:
it builds the trajectory, runs the extractor (a built-in one or the file's own) and calls the grader with
the Sample and the submission. Standard library only: this file runs beside dialects.py in the subprocess.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any

# --- letta_client's message types, as far as graders and extractors read them -----------------------------


class _Message:
    message_type = "message"

    def __init__(self, **fields: Any):
        for key, value in fields.items():
            setattr(self, key, value)

    def model_dump(self, **_: Any) -> dict:
        return {"message_type": self.message_type, **vars(self)}

    def __getattr__(self, name: str) -> Any:
        return None  # a field this stand-in does not carry reads as unset, as an optional SDK field does


# letta_client's message classes by name, each a _Message with its own `message_type`.
_MESSAGES: dict[str, type[_Message]] = {
    name: type(name, (_Message,), {"message_type": message_type})
    for name, message_type in (
        ("AssistantMessage", "assistant_message"),
        ("UserMessage", "user_message"),
        ("SystemMessage", "system_message"),
        ("ReasoningMessage", "reasoning_message"),
        ("ToolCallMessage", "tool_call_message"),
        ("ToolReturnMessage", "tool_return_message"),
    )
}
AssistantMessage = _MESSAGES["AssistantMessage"]


class _Unknown(_Message):
    """Any other SDK name a grader file imports: importable, never found in a trajectory."""


LettaMessageUnion = _Message


# --- letta_evals' models -----------------------------------------------------------------------------------


@dataclass
class GradeResult:
    score: float
    rationale: str | None = None
    metadata: dict = field(default_factory=dict)
    per_turn_grades: Any = None


@dataclass
class RewardOutput:
    score: float
    metadata: dict = field(default_factory=dict)


@dataclass
class Sample:
    id: Any = 0
    input: Any = ""
    ground_truth: Any = None
    agent_args: dict | None = None
    rubric_vars: dict | None = None
    extra_vars: dict | None = None
    rubric: str | None = None
    rubric_path: Any = None

    def model_dump(self, **_: Any) -> dict:
        return dict(vars(self))


class AgentState(_Message):
    """Letta's agent state: evalsite runs a model, not an agent, so there is none (memory blocks empty)."""

    blocks: list = []


# --- letta_evals.decorators ------------------------------------------------------------------------------

GRADER_REGISTRY: dict[str, Any] = {}
EXTRACTOR_REGISTRY: dict[str, Any] = {}


def _mark(function, attribute: str, registry: dict | None = None, name: str | None = None):
    setattr(function, attribute, True)
    if registry is not None:
        registry[name or function.__name__] = function
    return function


def grader(func=None, *, name: str | None = None):
    if func is None:
        return lambda f: _mark(f, "_is_grader", GRADER_REGISTRY, name)
    return _mark(func, "_is_grader", GRADER_REGISTRY, name)


def extractor(func=None, *, name: str | None = None):
    def mark(f):
        f._extractor_param_count = len(inspect.signature(f).parameters)
        return _mark(f, "_is_extractor", EXTRACTOR_REGISTRY, name)

    return mark if func is None else mark(func)


def reward_composer(func):
    return _mark(func, "_is_reward_composer")


def agent_factory(func):
    return _mark(func, "_is_agent_factory")


def suite_setup(func):
    return _mark(func, "_is_suite_setup")


# --- letta_evals.extractors (utils and built-ins, as Letta has them) ---------------------------------------


def flatten_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(item.text if hasattr(item, "text") else str(item.get("text", "")) for item in content)
    raise ValueError(f"Unexpected content type: {type(content)}")


def get_assistant_messages(trajectory) -> list:
    return [message for turn in trajectory for message in turn if isinstance(message, AssistantMessage)]


def get_messages_by_type(trajectory, message_type) -> list:
    return [message for turn in trajectory for message in turn if isinstance(message, message_type)]


def get_last_turn_messages(trajectory, message_type=AssistantMessage) -> list:
    return [message for message in trajectory[-1] if isinstance(message, message_type)] if trajectory else []


def get_tool_calls(trajectory) -> list:
    return []  # evalsite's conversations hold no tool calls yet


@extractor
def last_assistant(trajectory, config):
    messages = get_assistant_messages(trajectory)
    return flatten_content(messages[-1].content) if messages else ""


@extractor
def first_assistant(trajectory, config):
    messages = get_assistant_messages(trajectory)
    return flatten_content(messages[0].content) if messages else ""


@extractor
def all_assistant(trajectory, config):
    separator = config.get("separator", "\n")
    return separator.join(flatten_content(m.content) for m in get_assistant_messages(trajectory))


@extractor
def last_turn(trajectory, config):
    separator = config.get("separator", "\n")
    return separator.join(flatten_content(m.content) for m in get_last_turn_messages(trajectory))


@extractor
def pattern(trajectory, config):
    group = config.get("group", 0)
    for message in reversed(get_assistant_messages(trajectory)):
        content = flatten_content(message.content)
        if config.get("search_all", False):
            matches = re.findall(config["pattern"], content)
            if matches:
                if isinstance(matches[0], tuple):
                    return " ".join(m[group] for m in matches)
                return " ".join(matches)
        else:
            match = re.search(config["pattern"], content)
            if match:
                return match.group(group)
    return ""


@extractor
def after_marker(trajectory, config):
    marker = config["marker"]
    for message in reversed(get_assistant_messages(trajectory)):
        content = flatten_content(message.content)
        at = content.find(marker)
        if at >= 0:
            return (
                content[at:].strip()
                if config.get("include_marker", False)
                else content[at + len(marker) :].strip()
            )
    return ""


@extractor
def tool_arguments(trajectory, config):
    return "{}"


@extractor
def tool_output(trajectory, config):
    return ""


@extractor
def memory_block(trajectory, config, agent_state):
    return ""  # the model evalsite tests keeps no memory blocks


# --- letta_evals.graders.builtin -------------------------------------------------------------------------


@grader
def exact_match(sample, submission):
    if not sample.ground_truth:
        return GradeResult(score=0.0, rationale="No ground_truth answer provided")
    matches = submission.strip() == sample.ground_truth.strip()
    return GradeResult(score=1.0 if matches else 0.0, rationale=f"Exact match: {matches}")


@grader
def contains(sample, submission):
    if not sample.ground_truth:
        return GradeResult(score=0.0, rationale="No ground_truth answer provided")
    found = sample.ground_truth.lower() in submission.lower()
    return GradeResult(score=1.0 if found else 0.0, rationale=f"Contains ground_truth: {found}")


@grader
def regex_match(sample, submission):
    if not sample.ground_truth:
        return GradeResult(score=0.0, rationale="No ground_truth regex pattern provided")
    try:
        matches = bool(re.compile(sample.ground_truth).search(submission))
    except re.error as exc:
        return GradeResult(score=0.0, rationale=f"Invalid regex pattern: {exc}")
    return GradeResult(score=1.0 if matches else 0.0, rationale=f"Regex match: {matches}")


@grader
def ascii_printable_only(sample, submission):
    allowed = {chr(i) for i in range(32, 127)}
    invalid = sorted({ch for ch in submission.replace("\n", "").replace("\r", "") if ch not in allowed})
    if invalid:
        return GradeResult(
            score=0.0, rationale=f"Found non-printable ASCII characters: {', '.join(map(repr, invalid[:5]))}"
        )
    return GradeResult(score=1.0, rationale="All characters printable ASCII (ignoring newlines)")


# --- the modules a grader file imports --------------------------------------------------------------------

_SDK = {
    **_MESSAGES,
    "LettaMessageUnion": LettaMessageUnion,
    "AgentState": AgentState,
}
_DECORATORS = {
    "grader": grader,
    "extractor": extractor,
    "reward_composer": reward_composer,
    "agent_factory": agent_factory,
    "suite_setup": suite_setup,
    "GRADER_REGISTRY": GRADER_REGISTRY,
    "EXTRACTOR_REGISTRY": EXTRACTOR_REGISTRY,
}
_MODELS = {"GradeResult": GradeResult, "RewardOutput": RewardOutput, "Sample": Sample, **_SDK}
_EXTRACTORS = {
    name: globals()[name]
    for name in (
        "memory_block",
        "last_assistant",
        "first_assistant",
        "all_assistant",
        "last_turn",
        "pattern",
        "after_marker",
        "tool_arguments",
        "tool_output",
    )  # fmt: skip
}
_UTILS = {
    name: globals()[name]
    for name in (
        "flatten_content",
        "get_assistant_messages",
        "get_messages_by_type",
        "get_last_turn_messages",
        "get_tool_calls",
    )  # fmt: skip
}
_GRADERS = {
    name: globals()[name] for name in ("exact_match", "contains", "regex_match", "ascii_printable_only")
}
MODULES = {
    "letta_evals": {**_DECORATORS, **_MODELS},
    "letta_evals.decorators": _DECORATORS,
    "letta_evals.models": _MODELS,
    "letta_evals.types": {},
    "letta_evals.extractors": _EXTRACTORS,
    "letta_evals.extractors.builtin": _EXTRACTORS,
    "letta_evals.extractors.utils": _UTILS,
    "letta_evals.graders": _GRADERS,
    "letta_evals.graders.builtin": _GRADERS,
    "letta_client": _SDK,
    "letta_client.types": _SDK,
    "letta_client.types.agents": _SDK,
}


def _module(name: str, names: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(names)
    module.__path__ = []  # a package: its submodules are found in sys.modules

    def missing(attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return type(attribute, (_Unknown,), {})

    module.__getattr__ = missing
    return module


def install() -> None:
    for name, names in MODULES.items():
        sys.modules[name] = _module(name, names)


# --- grading as Letta's ToolGrader does ----------------------------------------------------------------


def _load(reference: str):
    """`file.py:function` or `module:function` from the suite's folder (the working directory)."""
    module, _, function = reference.partition(":")
    return getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), function)


def _trajectory(payload: dict) -> list[list]:
    """One list of the agent's messages per live turn, as Letta's trajectory has them."""
    turns = _turns(payload)
    return [
        [AssistantMessage(content=str(turn.get("response") or ""))]
        for turn in turns
        if isinstance(turn, dict)
    ]


def _per_turn(payload: dict) -> bool:
    """A row with a ground truth per turn: Letta grades each turn alone, on that turn's input and reply."""
    return bool(((payload.get("config") or {}).get("sample") or {}).get("per_turn"))


def _turns(payload: dict) -> list[dict]:
    turns = [turn for turn in payload.get("turns") or [] if isinstance(turn, dict)]
    return turns[-1:] if _per_turn(payload) else turns


def _sample(payload: dict) -> Sample:
    config = payload.get("config") or {}
    given = dict(config.get("sample") or {})
    turns = _turns(payload)
    prompts = [str(turn.get("prompt") or "") for turn in turns]
    given.setdefault("id", payload.get("eval_id") or 0)
    given.setdefault("input", prompts[0] if len(prompts) == 1 else prompts or payload.get("input", ""))
    given.setdefault("ground_truth", payload.get("expected_output"))
    known = set(Sample.__dataclass_fields__)
    return Sample(**{key: value for key, value in given.items() if key in known})


def _extract(reference: str, trajectory: list, config: dict) -> str:
    function = _EXTRACTORS.get(reference) or EXTRACTOR_REGISTRY.get(reference) or _load(reference)
    count = getattr(function, "_extractor_param_count", len(inspect.signature(function).parameters))
    return function(trajectory, config, None) if count == 3 else function(trajectory, config)


async def grade(function, payload: dict):
    """Letta's ToolGrader: the extractor's submission, then the grader on (sample, submission). `function` is
    the grader; with `config.grader` naming a built-in grader, `function` is the file's extractor."""
    config = payload.get("config") or {}
    trajectory = _trajectory(payload)
    extractor_config = config.get("extractor_config") or {}
    builtin = config.get("grader")
    if builtin:
        count = getattr(function, "_extractor_param_count", len(inspect.signature(function).parameters))
        submission = (
            function(trajectory, extractor_config, None)
            if count == 3
            else function(trajectory, extractor_config)
        )
        function = _GRADERS[builtin]
    else:
        submission = _extract(config.get("extractor") or "last_assistant", trajectory, extractor_config)
    result = function(_sample(payload), submission)
    if inspect.isawaitable(result):
        result = await result
    if not hasattr(result, "score"):
        return result  # a bare score or a mapping: the dialect reads it as it is
    return {"score": result.score, "rationale": result.rationale or "", "submission": submission}
