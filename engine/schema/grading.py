"""Grading against a ground truth: graders, extractors (which text a grader reads) and rubrics."""

from __future__ import annotations

import string
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from .. import patterns
from .base import StrictModel
from .checks import CHECK_KEYS, Check, followup_depth

GRADERS = ("exact_match", "contains", "regex_match", "llm_judge")
EXTRACTORS = (
    "last_assistant",
    "first_assistant",
    "all_assistant",
    "last_turn",
    "pattern",
    "after_marker",
    "json",
    "tool_output",
    "tool_arguments",
    "transcript",
)
RUBRIC_PLACEHOLDERS = ("input", "ground_truth", "submission")
Grader = Literal["exact_match", "contains", "regex_match", "llm_judge"]


class Extractor(StrictModel):
    """Which text a grader reads: a reply, all replies, a piece of one, or the whole conversation.

    Written as a name (`last_assistant`) or a one-key mapping: `{pattern: "Answer: (\\d+)", group: 1}`,
    `{after_marker: "FINAL:"}`, `{json: result.answer}`, `{all_assistant: {separator: " | "}}`,
    `{tool_output: get_weather}`, `{tool_arguments: get_weather}` (Letta's tool extractors: the first call
    of that tool among the calls in view).
    """

    # How an extractor is written, for error messages: its fields are not what a suite writes.
    shape_in_words: ClassVar[str] = (
        "a name (last_assistant, first_assistant, all_assistant, last_turn, transcript) or a one-key mapping "
        "({pattern, group}, {after_marker}, {json}, {all_assistant: {separator}}, {tool_output}, {tool_arguments})"
    )

    kind: Literal[
        "last_assistant", "first_assistant", "all_assistant", "last_turn", "pattern", "after_marker", "json",
        "tool_output", "tool_arguments", "transcript",
    ]  # fmt: skip
    separator: str = Field("\n", description="all_assistant: text between replies.")
    pattern: str | None = Field(None, description="pattern: Python regex searched in the reply.")
    group: int | str = Field(0, description="pattern: group to take (number or name).")
    marker: str | None = Field(None, description="after_marker: take the text after its last occurrence.")
    path: str | None = Field(
        None, description="json: dot path into the JSON-parsed reply, e.g. result.items.0."
    )
    tool_name: str | None = Field(
        None, description="tool_output, tool_arguments: the tool whose first call is read."
    )

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"kind": data}
        if isinstance(data, dict) and "kind" not in data:
            data = dict(data)
            if "pattern" in data:
                return {"kind": "pattern", **data}
            if "after_marker" in data:
                return {"kind": "after_marker", "marker": data.pop("after_marker"), **data}
            if "json" in data:
                return {"kind": "json", "path": data.pop("json"), **data}
            for kind in ("tool_output", "tool_arguments"):
                if kind in data:
                    return {"kind": kind, "tool_name": data.pop(kind), **data}
            if "all_assistant" in data:
                options = data.pop("all_assistant")
                return {"kind": "all_assistant", **(options if isinstance(options, dict) else {}), **data}
        return data

    @model_validator(mode="after")
    def _complete(self) -> Extractor:
        if self.kind == "pattern":
            if not self.pattern:
                raise ValueError("the pattern extractor needs `pattern`")
            try:
                compiled = patterns.validate(self.pattern)
            except patterns.InvalidPattern as exc:
                raise ValueError(f"invalid regular expression: {exc.reason}") from None
            if isinstance(self.group, int) and not 0 <= self.group <= compiled.groups:
                raise ValueError(
                    f"group {self.group} does not exist: the pattern has {compiled.groups} group{'' if compiled.groups == 1 else 's'}"
                )
            if isinstance(self.group, str) and self.group not in compiled.groupindex:
                raise ValueError(f"the pattern has no group named {self.group!r}")
        if self.kind == "after_marker" and not self.marker:
            raise ValueError("the after_marker extractor needs a marker")
        if self.kind == "json" and not self.path:
            raise ValueError("the json extractor needs a dot path")
        if self.kind in ("tool_output", "tool_arguments") and not self.tool_name:
            raise ValueError(
                f"the {self.kind} extractor needs a tool name, e.g. {{{self.kind}: get_weather}}"
            )
        return self


def check_rubric(rubric: str) -> str:
    """A rubric may use {input}, {ground_truth} and {submission}; anything else is an error on loading, not at
    run time."""
    try:
        fields = [
            (name, spec, conversion)
            for _, name, spec, conversion in string.Formatter().parse(rubric)
            if name is not None
        ]
    except ValueError as exc:
        raise ValueError(f"{exc} (write literal braces as {{{{ and }}}})") from None
    unknown = sorted({name for name, _, _ in fields if name not in RUBRIC_PLACEHOLDERS})
    if unknown:
        names = ", ".join("{" + name + "}" for name in unknown)
        raise ValueError(f"unknown placeholder {names}; use {{input}}, {{ground_truth}}, {{submission}}")
    # `{submission:d}` would raise only when the rubric is filled, at run time: placeholders stay plain.
    decorated = sorted({name for name, spec, conversion in fields if spec or conversion})
    if decorated:
        names = ", ".join("{" + name + "}" for name in decorated)
        raise ValueError(f"write {names} plain, without a format spec or conversion")
    return rubric


def check_patterns(ground_truth: str | list[str] | None) -> None:
    """With grader regex_match the ground truth is a regex: one that does not compile is an error on loading."""
    for pattern in [ground_truth] if isinstance(ground_truth, str) else ground_truth or []:
        try:
            patterns.validate(pattern)
        except patterns.InvalidPattern as exc:
            raise ValueError(
                f"ground_truth {pattern!r} is not a valid regular expression for regex_match: {exc.reason}"
            ) from None


# --- named graders (several per eval, each with its own score) ---------------------------------------------

GRADER_KINDS = ("llm_judge", "exact_match", "contains", "regex_match", "check")
GROUND_TRUTH_KINDS = ("exact_match", "contains", "regex_match")
GRADER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,59}$"


class NamedGrader(StrictModel):
    """One of several graders of an eval, by name (Letta's `graders`, AgentV's `assertions`): each gives the
    eval a score of its own.

    - `exact_match` / `contains` / `regex_match` compare the extractor's view of the reply with the eval's
      `ground_truth`;
    - `llm_judge` grades it with a rubric ({input}, {ground_truth}, {submission}), written here or in an
      attached file (`rubric_file`), on its own judge model and temperature;
    - `check` is any one check (`contains`, `regex`, `llm_judge` criteria, `semantic`…) as a grader: its score
      and its own pass. Written short, a grader that is only a check mapping (`ascii_only: {regex: "…"}`)
      is a `check` grader.
    """

    kind: Literal["llm_judge", "exact_match", "contains", "regex_match", "check"]
    rubric: str | None = Field(None, description="llm_judge: the rubric text.")
    rubric_file: str | None = Field(None, description="llm_judge: an attached file holding the rubric.")
    model: str | None = Field(None, description="llm_judge: judge model (default: the suite's `judge`).")
    temperature: float | None = Field(
        None,
        ge=0.0,
        le=2.0,
        description="llm_judge: judge temperature (default: the suite's judge_temperature).",
    )
    extractor: Extractor | None = Field(
        None,
        description="What it reads (default: the suite's, else last_assistant; a check grader reads the "
        "last reply unless it has one of its own).",
    )
    threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Score needed to pass (default: the suite's pass_threshold, else 1.0).",
    )
    turn_threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Graded turn by turn: the score a turn's grade needs to be marked passed (default: threshold).",
    )
    check: Any = Field(None, description="check: the one check it applies (no follow-ups).")

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kind" not in data and any(key in CHECK_KEYS for key in data):
            return {"kind": "check", "check": data}
        return data

    @field_validator("rubric")
    @classmethod
    def _rubric(cls, value: str | None) -> str | None:
        return None if value is None else check_rubric(value)

    @model_validator(mode="after")
    def _complete(self) -> NamedGrader:
        judge_only = [
            key for key in ("rubric", "rubric_file", "model", "temperature") if getattr(self, key) is not None
        ]
        if self.kind == "llm_judge":
            if (self.rubric is None) == (self.rubric_file is None):
                raise ValueError("an llm_judge grader needs a `rubric` or a `rubric_file` (one of them)")
        elif judge_only:
            raise ValueError(
                f"{', '.join(judge_only)} belong{'s' if len(judge_only) == 1 else ''} to llm_judge graders"
            )
        if self.kind == "check":
            if not isinstance(self.check, dict):
                raise ValueError("a check grader needs `check`: one check, e.g. {contains: Paris}")
            check = Check.model_validate(self.check)
            if not check.kind or followup_depth([check]) > 0:
                raise ValueError("a check grader's `check` is one check, without follow-ups")
            self.check = check
        elif self.check is not None:
            raise ValueError("`check` belongs to check graders (kind: check)")
        return self


def check_weights(value: dict[str, float]) -> dict[str, float]:
    """A `weighted_average` (pass rule or gate): at least one grader, every weight above 0."""
    if not value:
        raise ValueError("weighted_average needs at least one grader and its weight")
    for name, weight in value.items():
        if weight <= 0:
            raise ValueError(f"the weight of {name} is {weight:g}; weights are above 0")
    return value


class WeightedPassRule(StrictModel):
    weighted_average: dict[str, float] = Field(description="Each grader's weight.")
    threshold: float = Field(ge=0.0, le=1.0, description="The weighted mean needed to pass.")
    required: list[str] = Field(
        default_factory=list,
        description="Graders that must pass their own threshold, whatever the weighted mean.",
    )
    with_turns: bool = Field(
        False,
        description="turns: the weighted mean is one more score beside the graded turns', combined with "
        "theirs by `aggregation` (AgentV's conversation-level assertions).",
    )

    @field_validator("weighted_average")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        return check_weights(value)


PassRule = Literal["all", "any"] | WeightedPassRule
