"""The tool checks' keys: which tools the model called, with which arguments, how often, in what order, and
what they returned (`tool_called`, `tool_not_called`, `tool_sequence`, `tool_result`), with the argument and
result matchers they hold. How each grades a reply is engine.tool_checks'."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .. import patterns
from .base import StrictModel

TOOL_NAME = r"^[A-Za-z0-9_\-]{1,64}$"


def check_matcher(matcher: Any, where: str = "matcher") -> Any:
    """An argument (or result) matcher as engine.tools.matching reads it, with the parts that can be wrong
    checked on loading: a `{regex}` that compiles, an `{llm_judge}` that says what to judge."""
    if isinstance(matcher, dict) and set(matcher) == {"regex"}:
        try:
            patterns.validate(str(matcher["regex"]))
        except patterns.InvalidPattern as exc:
            raise ValueError(f"{where}: invalid regular expression: {exc.reason}") from None
    elif isinstance(matcher, dict) and set(matcher) == {"llm_judge"}:
        if not isinstance(matcher["llm_judge"], str) or not matcher["llm_judge"].strip():
            raise ValueError(f"{where}: llm_judge needs criteria, e.g. {{llm_judge: a real city}}")
    elif isinstance(matcher, dict):
        for key, inner in matcher.items():
            check_matcher(inner, f"{where}.{key}")
    return matcher


class ToolScoped(StrictModel):
    """What every tool check shares: which calls it looks at."""

    scope: Literal["reply", "conversation"] = Field(
        "reply",
        description="The calls of the reply it grades (this turn's), or every call of the conversation so far.",
    )
    mistakes: bool = Field(
        False,
        description="Also count the calls rejected as the model's mistakes (no function name, an unknown "
        "tool, arguments that are no JSON object or break the schema), which were never carried out.",
    )


class ToolCallPattern(StrictModel):
    """A call by name, with matchers on the arguments it names (arguments not named are ignored). Written
    short, a name alone."""

    name: str = Field(pattern=TOOL_NAME, description="The tool's name.")
    args: dict[str, Any] | None = Field(
        None,
        description="Argument -> matcher: a value, {regex}, {contains}, {any: true}, a JSON Schema, or "
        "{llm_judge: criteria}.",
    )

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else _arguments_as_args(data)

    @field_validator("args")
    @classmethod
    def _matchers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key, matcher in (value or {}).items():
            check_matcher(matcher, key)
        return value


class ToolCalled(ToolCallPattern, ToolScoped):
    """The tool was called (with arguments that match): at least once, or as often as `times`, `min` and
    `max` say."""

    times: int | None = Field(None, ge=0, description="Called exactly this many times.")
    min: int | None = Field(None, ge=0, description="Called at least this many times.")
    max: int | None = Field(None, ge=0, description="Called at most this many times.")

    @model_validator(mode="after")
    def _counts(self) -> ToolCalled:
        if self.times is not None and (self.min is not None or self.max is not None):
            raise ValueError("give `times`, or `min` and/or `max`, not both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class ToolNotCalled(ToolCallPattern, ToolScoped):
    """No call of the tool (with arguments that match, when `args` are given)."""


SEQUENCE_MODES = ("strict", "in_order", "unordered", "subset", "superset")


class ToolSequence(ToolScoped):
    """The calls made, against the calls expected, compared as `mode` says (AgentV's tool-trajectory and
    LangChain agentevals' trajectory match modes)."""

    calls: list[ToolCallPattern] = Field(description="The calls expected: names, or {name, args}.")
    mode: Literal["strict", "in_order", "unordered", "subset", "superset"] = Field(
        "strict",
        description="strict: these calls, in this order, nothing else; in_order: these calls in this order, "
        "others between allowed; unordered: these calls in any order, nothing else; superset: at least these "
        "calls, in any order; subset: no call but these (each expected call at most once).",
    )


def _arguments_as_args(data: Any) -> Any:
    """`arguments`, as a call's JSON names them, is read as `args`."""
    if isinstance(data, dict) and "arguments" in data and "args" not in data:
        data = {("args" if key == "arguments" else key): value for key, value in data.items()}
    return data


class ToolResult(ToolScoped):
    """Some call's result (the `tool` message sent back) satisfies the matcher."""

    @model_validator(mode="before")
    @classmethod
    def _arguments(cls, data: Any) -> Any:
        return _arguments_as_args(data)

    name: str | None = Field(None, pattern=TOOL_NAME, description="Only the calls of this tool.")
    args: dict[str, Any] | None = Field(None, description="Only the calls whose arguments match.")
    result: Any = Field(
        description="A matcher on the result: read as JSON when it parses, else as text ({contains}, {regex}, a "
        "value, a JSON Schema, {llm_judge})."
    )

    @model_validator(mode="after")
    def _matchers(self) -> ToolResult:
        for key, matcher in (self.args or {}).items():
            check_matcher(matcher, key)
        check_matcher(self.result, "result")
        return self
