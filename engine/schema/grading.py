"""Grading against a ground truth: graders, extractors (which text a grader reads) and rubrics."""

from __future__ import annotations

import string
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from .. import patterns
from .base import StrictModel

GRADERS = ("exact_match", "contains", "regex_match", "llm_judge")
EXTRACTORS = (
    "last_assistant",
    "first_assistant",
    "all_assistant",
    "last_turn",
    "pattern",
    "after_marker",
    "json",
)
RUBRIC_PLACEHOLDERS = ("input", "ground_truth", "submission")
Grader = Literal["exact_match", "contains", "regex_match", "llm_judge"]


class Extractor(StrictModel):
    """Which text a grader reads: a reply, all replies, or a piece of one.

    Written as a name (`last_assistant`) or a one-key mapping: `{pattern: "Answer: (\\d+)", group: 1}`,
    `{after_marker: "FINAL:"}`, `{json: result.answer}`, `{all_assistant: {separator: " | "}}`.
    """

    # How an extractor is written, for error messages: its fields are not what a suite writes.
    shape_in_words: ClassVar[str] = (
        "a name (last_assistant, first_assistant, all_assistant, last_turn) or a one-key mapping "
        "({pattern, group}, {after_marker}, {json}, {all_assistant: {separator}})"
    )

    kind: Literal[
        "last_assistant", "first_assistant", "all_assistant", "last_turn", "pattern", "after_marker", "json"
    ]
    separator: str = Field("\n", description="all_assistant: text between replies.")
    pattern: str | None = Field(None, description="pattern: Python regex searched in the reply.")
    group: int | str = Field(0, description="pattern: group to take (number or name).")
    marker: str | None = Field(None, description="after_marker: take the text after its last occurrence.")
    path: str | None = Field(
        None, description="json: dot path into the JSON-parsed reply, e.g. result.items.0."
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
        return self


def check_rubric(rubric: str) -> str:
    """A rubric may use {input}, {ground_truth} and {submission}; anything else is an error now, not at run time."""
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
    """With grader regex_match the ground truth is a regex: one that does not compile is an error now."""
    for pattern in [ground_truth] if isinstance(ground_truth, str) else ground_truth or []:
        try:
            patterns.validate(pattern)
        except patterns.InvalidPattern as exc:
            raise ValueError(
                f"ground_truth {pattern!r} is not a valid regular expression for regex_match: {exc.reason}"
            ) from None
