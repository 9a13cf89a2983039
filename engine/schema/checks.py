"""Checks: the vocabulary that grades a reply (`match`, `regex`, `llm_judge`, `or`, ...), and the items of a
`checks` list: a check, a follow-up (`prompt` + `checks`), or a check that carries its own follow-up.
Follow-ups nest at most MAX_FOLLOWUP_DEPTH levels below the eval's prompt.

A check type is a field of CheckFields (`or` is Check's own); CHECK_KEYS is read off them. How each type
reads and grades a reply is in engine.checks.CHECK_TYPES."""

from __future__ import annotations

import re
import shlex
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .. import patterns
from ..codegrade.dialects import DEFAULT_DIALECT, DIALECTS
from .base import LocatedError, StrictModel, user_text
from .tool_checks import ToolCalled, ToolNotCalled, ToolResult, ToolSequence

MAX_FOLLOWUP_DEPTH = 5
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


class SemanticSpec(StrictModel):
    """Cosine similarity between the reply's embedding and the expected text's embedding."""

    expected: str = Field(description="Text the reply should mean.")
    threshold: float = Field(0.8, ge=-1.0, le=1.0, description="Minimum cosine similarity to pass.")
    model: str | None = Field(
        None, description=f"Embedding model on the judge's endpoint (default {DEFAULT_EMBEDDING_MODEL})."
    )


SCALES = {
    "0-1": (0.0, 1.0, 0.5),
    "0-100": (0.0, 100.0, 50.0),
    "-3..3": (-3.0, 3.0, 1.0),
}  # low, high, default threshold


class Criterion(StrictModel):
    """One of several weighted criteria: judged on its own, with its own verdict and reasoning."""

    name: str | None = Field(None, max_length=100)
    criteria: str
    weight: float = Field(1.0, gt=0)


JUDGE_PLACEHOLDERS = ("criteria", "input", "output", "conversation")
JUDGE_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


class JudgeMessage(StrictModel):
    """One message of a judge's own prompt (`llm_judge.messages`), with placeholders filled when sent."""

    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class JudgeSpec(StrictModel):
    """An LLM judge scores the reply (or the whole conversation) against criteria, answering JSON {score, reason}.

    Several weighted criteria are judged one by one; the check's score is their weighted mean.
    """

    criteria: str | list[Criterion] = Field(
        description="What a good reply does, or a list of weighted criteria."
    )
    scale: Literal["0-1", "0-100", "-3..3"] = Field("0-1", description="The scale the judge scores on.")
    threshold: float | None = Field(
        None, description="Minimum score to pass, on the scale (default 0.5 / 50 / 1)."
    )
    scope: Literal["reply", "conversation", "trajectory"] = Field(
        "reply",
        description="Grade the last reply, the whole conversation, or the agent's trajectory: its tool calls, "
        "their results and its replies (the judge reads the conversation in [Role]: form).",
    )
    model: str | None = Field(None, description="Judge model; defaults to the suite's `judge`.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    messages: list[JudgeMessage] | None = Field(
        None,
        min_length=1,
        description="The judge's prompt as written, sent instead of evalsite's; {{criteria}}, {{input}}, "
        "{{output}} and {{conversation}} are filled in.",
    )

    @model_validator(mode="after")
    def _threshold_on_scale(self) -> JudgeSpec:
        low, high, default = SCALES[self.scale]
        if self.threshold is None:
            self.threshold = default
        elif not low <= self.threshold <= high:
            raise ValueError(f"threshold {self.threshold:g} is outside the {self.scale} scale")
        if isinstance(self.criteria, list) and not self.criteria:
            raise ValueError("criteria needs at least one criterion")
        if self.messages is not None:
            self._placeholders_known()
        return self

    def _placeholders_known(self) -> None:
        # A placeholder evalsite does not fill would reach the judge as written, and a prompt that never
        # shows the reply grades nothing.
        named = set()
        for index, message in enumerate(self.messages):
            for name in JUDGE_PLACEHOLDER.findall(message.content):
                if name not in JUDGE_PLACEHOLDERS:
                    raise LocatedError(
                        ("messages", index, "content"),
                        f"unknown placeholder {{{{{name}}}}}: use {', '.join('{{' + p + '}}' for p in JUDGE_PLACEHOLDERS)}",
                    )
                named.add(name)
        if not named & {"output", "conversation"}:
            raise LocatedError(
                ("messages",), "the judge's messages never show the reply: use {{output}} or {{conversation}}"
            )

    def normalise(self, raw: float) -> float:
        """A score on this judge's scale, as 0-1."""
        low, high, _ = SCALES[self.scale]
        return (min(max(raw, low), high) - low) / (high - low)


class FieldEquals(StrictModel):
    """A field of the JSON reply equals a value: exactly, as a number within a tolerance, or as a calendar
    date written in any of the given formats."""

    path: str = Field(description="Dot path into the JSON-parsed reply, e.g. booking.status or items.0.id.")
    value: Any = Field(description="The value it must equal (compared after JSON parsing).")
    tolerance: float | None = Field(
        None,
        ge=0,
        description="Compare as numbers (numeric text counts): passes when they differ by at most this.",
    )
    relative: bool = Field(
        False, description="With `tolerance`: the tolerance is a share of the expected value (0.01 = 1%)."
    )
    optional: bool = Field(
        False, description="A JSON reply without the field passes; a reply that is not JSON still fails."
    )
    date_formats: list[str] | None = Field(
        None,
        min_length=1,
        description="Compare as calendar dates, each side read as ISO 8601 or one of these formats "
        "(YYYY, MM, DD, MMM for a month name, e.g. DD-MMM-YYYY, MM/DD/YYYY).",
    )

    @field_validator("date_formats")
    @classmethod
    def _formats_read(cls, value: list[str] | None) -> list[str] | None:
        for written in value or []:
            if not DATE_TOKEN.search(written):
                raise ValueError(f"date format {written!r} has none of YYYY, MM, DD, MMM")
        return value

    @model_validator(mode="after")
    def _one_comparison(self) -> FieldEquals:
        if self.tolerance is not None and self.date_formats is not None:
            raise ValueError("compare as a number (`tolerance`) or as a date (`date_formats`), not both")
        if self.relative and self.tolerance is None:
            raise ValueError("`relative` needs a `tolerance`")
        return self


# The parts a date format is written with, longest first so MMMM is not read as MM twice.
DATE_TOKEN = re.compile(r"YYYY|YY|MMMM|MMM|MM|M|DD|D")


MAX_CODE_TIMEOUT = 600
# A command's argument that names a file (grade.py, rules.json) names an attached file of the suite.
FILE_ARGUMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*\.[A-Za-z][A-Za-z0-9]{0,7}$")
FUNCTION_REF = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\.py)?:[A-Za-z_][A-Za-z0-9_]*$"
)


class CodeSpec(StrictModel):
    """A program (any language) or a Python callable from the suite's folder grades the reply.

    A program reads the conversation as JSON on stdin and prints its answer as JSON (the last line of its
    output); a callable gets it as its argument and returns the answer. In the `evalsite` dialect it is
    given `turns`, `messages`, `input`, `output`, `expected_output` and `config`, and answers
    `{score, pass, reason}`, a bare score or a bare true/false. Written short, `code: "module:function"` is a
    callable and `code: [program, arg]` a command.
    """

    command: list[str] | None = Field(
        None,
        description="The program and its arguments, run in the suite's folder, e.g. [python3, grade.py].",
    )
    function: str | None = Field(
        None, description="A Python callable from the suite's folder, as module:function (graders:score)."
    )
    timeout: float = Field(30.0, gt=0, le=MAX_CODE_TIMEOUT, description="Seconds before it is stopped.")
    memory_mb: int = Field(
        512, ge=32, le=16384, description="Memory it may write to (its data segment and heap), in MB."
    )
    network: bool = Field(False, description="Let it reach the network.")
    threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="Score needed to pass when the answer gives a score but no `pass`."
    )
    config: dict[str, Any] = Field(default_factory=dict, description="Handed to the grader as it is.")
    dialect: str = Field(
        DEFAULT_DIALECT,
        description="How the conversation is handed over and the answer read: " + ", ".join(DIALECTS) + ".",
    )

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"function": data}
        if isinstance(data, list):
            return {"command": data}
        if isinstance(data, dict) and isinstance(data.get("command"), str):
            return {**data, "command": shlex.split(data["command"])}
        return data

    @model_validator(mode="after")
    def _one_way(self) -> CodeSpec:
        if (self.command is None) == (self.function is None):
            raise ValueError("a code check needs a `command` or a `function` (one of them)")
        if self.command is not None and (not self.command or not self.command[0].strip()):
            raise ValueError("`command` needs at least the program to run")
        if self.function is not None and not FUNCTION_REF.match(self.function):
            raise ValueError(f"function {self.function!r} is not module:function, e.g. graders:score")
        if self.dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {self.dialect!r}; known: {', '.join(DIALECTS)}")
        return self

    @property
    def module_file(self) -> str | None:
        """The file a callable is loaded from, e.g. graders.py for graders:score."""
        if self.function is None:
            return None
        module = self.function.split(":")[0].removesuffix(".py")
        return module.replace(".", "/") + ".py"

    @property
    def files(self) -> list[str]:
        """The attached files it runs: a callable's module, and a command's arguments that name a file."""
        if self.function is not None:
            return [self.module_file]
        return [arg.removeprefix("./") for arg in self.command if FILE_ARGUMENT.match(arg.removeprefix("./"))]


class CheckFields(StrictModel):
    """The check vocabulary, shared by checks and by termination conditions."""

    match: str | None = Field(None, description='Glob over the reply, case-insensitive; "*" spans newlines.')
    not_match: str | None = Field(None, description="Passes when the glob does not match.")
    regex: str | None = Field(None, description="Python regular expression, searched anywhere in the reply.")
    contains: str | None = Field(None, description="Case-insensitive substring.")
    equals: str | None = Field(None, description="Exact match after stripping surrounding whitespace.")
    starts_with: str | None = Field(
        None, description="The reply begins with this text, case-sensitive, leading whitespace ignored."
    )
    min_tokens: int | None = Field(None, ge=0, description="Reply has at least this many completion tokens.")
    max_tokens: int | None = Field(None, ge=0, description="Reply has at most this many completion tokens.")
    min_words: int | None = Field(
        None, ge=0, description="Reply has at least this many words (runs of non-whitespace)."
    )
    max_words: int | None = Field(
        None, ge=0, description="Reply has at most this many words (runs of non-whitespace)."
    )
    semantic: SemanticSpec | None = None
    llm_judge: JudgeSpec | None = None
    field_equals: FieldEquals | None = Field(
        None, description="On the JSON-parsed reply; not JSON means no match."
    )
    field_is_set: str | None = Field(
        None, description="Dot path that must hold a non-null value in the JSON reply."
    )
    code: CodeSpec | None = Field(
        None, description="A program or Python callable from the suite's folder grades the reply."
    )
    is_json: bool | None = Field(
        None, description="true: the whole reply parses as JSON; false: it does not."
    )
    tool_called: ToolCalled | None = Field(
        None, description="The model called this tool (with matching arguments), as often as asked."
    )
    tool_not_called: ToolNotCalled | None = Field(
        None, description="The model made no call of this tool (with matching arguments)."
    )
    tool_sequence: ToolSequence | None = Field(
        None, description="The model's calls against an expected list, compared by `mode`."
    )
    tool_result: ToolResult | None = Field(None, description="Some tool call's result satisfies a matcher.")

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                patterns.validate(value)
            except patterns.InvalidPattern as exc:
                raise ValueError(f"invalid regular expression: {exc.reason}") from None
        return value


class Check(CheckFields):
    """One item of a `checks` list: a check, a follow-up, or a check carrying its own follow-up."""

    or_: list[Check] | None = Field(
        None, alias="or", min_length=1, description="Passes if any member passes."
    )
    prompt: str | None = Field(None, description="Follow-up sent in the same conversation when this fails.")
    checks: list[Check] | None = Field(None, description="Checks for the follow-up's reply.")

    @field_validator("prompt")
    @classmethod
    def _prompt_text(cls, value: str | None) -> str | None:
        return user_text(value, "prompt")

    @model_validator(mode="before")
    @classmethod
    def _checks_object_form(cls, data: Any) -> Any:
        # vibecheck also allows `checks: {or: [...]}`; it means a one-item list.
        if isinstance(data, dict) and isinstance(data.get("checks"), dict):
            data = {**data, "checks": [data["checks"]]}
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> Check:
        kinds = self.check_keys()
        if len(kinds) > 1:
            raise ValueError(
                f"one check per item, found {' and '.join(kinds)}: put each in its own list item"
            )
        if (self.prompt is None) != (self.checks is None):
            raise ValueError("a follow-up needs both `prompt` and `checks`")
        if not kinds and self.prompt is None:
            raise ValueError(f"empty check: expected one of {', '.join(CHECK_KEYS)}, or prompt + checks")
        if self.checks is not None and not any(item.kind for item in self.checks):
            raise ValueError(
                "a follow-up's checks need at least one check (follow-ups fire when a check fails)"
            )
        return self

    def check_keys(self) -> list[str]:
        # Only fields given when validated can hold a check (each defaults to None): looking at those, not at
        # every field of CHECK_FIELDS, keeps loading a large suite quick.
        found = [
            _CHECK_ORDER[name]
            for name in self.model_fields_set
            if name in _CHECK_ORDER and getattr(self, name) is not None
        ]
        return [key for _, key in sorted(found)]

    @cached_property  # read for every check of every turn; a validated item does not change
    def kind(self) -> str | None:
        """The check type, or None for a pure follow-up item."""
        keys = self.check_keys()
        return keys[0] if keys else None

    @property
    def has_followup(self) -> bool:
        return self.prompt is not None


Check.model_rebuild()

# The keys that make an item a check (an item holds exactly one), as written -> the field holding it:
# every field of Check but those of a follow-up.
FOLLOWUP_KEYS = ("prompt", "checks")
CHECK_FIELDS = {
    field.alias or name: name for name, field in Check.model_fields.items() if name not in FOLLOWUP_KEYS
}
CHECK_KEYS = tuple(CHECK_FIELDS)
_CHECK_ORDER = {name: (order, key) for order, (key, name) in enumerate(CHECK_FIELDS.items())}


def followup_depth(items: list[Check]) -> int:
    """How many follow-up levels hang below a list of checks."""
    deepest = 0
    for item in items:
        if item.checks is not None:
            deepest = max(deepest, 1 + followup_depth(item.checks))
        if item.or_:
            deepest = max(deepest, followup_depth(item.or_))
    return deepest
