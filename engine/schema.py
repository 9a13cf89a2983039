"""The suite format, defined once.

Everything that reads a suite goes through these pydantic models: the YAML loader, the editor's live
validation, the API, the JSON Schema export served to editors and the docs. Unknown keys are errors.

A conversation tree (seed 000) is an eval with a `prompt` and `checks`. A check item is either a check
(`match`, `regex`, `llm_judge`, `or`, ...), a follow-up (`prompt` + `checks`), or a check that carries its
own follow-up. Follow-ups nest at most MAX_FOLLOWUP_DEPTH levels below the eval's prompt.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_FOLLOWUP_DEPTH = 5
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"

# The keys that make an item a check; an item holds exactly one of them.
CHECK_KEYS = (
    "match",
    "not_match",
    "regex",
    "contains",
    "equals",
    "min_tokens",
    "max_tokens",
    "semantic",
    "llm_judge",
    "or",
)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SemanticSpec(StrictModel):
    """Cosine similarity between the reply's embedding and the expected text's embedding."""

    expected: str = Field(description="Text the reply should mean.")
    threshold: float = Field(0.8, ge=-1.0, le=1.0, description="Minimum cosine similarity to pass.")
    model: str | None = Field(
        None, description=f"Embedding model on the judge's endpoint (default {DEFAULT_EMBEDDING_MODEL})."
    )


class JudgeSpec(StrictModel):
    """An LLM judge scores the reply against criteria and returns JSON {score, reason}."""

    criteria: str = Field(description="What a good reply does. The judge sees the whole conversation.")
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="Minimum score (0-1) to pass.")
    model: str | None = Field(None, description="Judge model; defaults to the suite's `judge`.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)


class Check(StrictModel):
    """One item of a `checks` list: a check, a follow-up, or a check carrying its own follow-up."""

    match: str | None = Field(None, description='Glob over the reply, case-insensitive; "*" spans newlines.')
    not_match: str | None = Field(None, description="Passes when the glob does not match.")
    regex: str | None = Field(None, description="Python regular expression, searched anywhere in the reply.")
    contains: str | None = Field(None, description="Case-insensitive substring.")
    equals: str | None = Field(None, description="Exact match after stripping surrounding whitespace.")
    min_tokens: int | None = Field(None, ge=0, description="Reply has at least this many completion tokens.")
    max_tokens: int | None = Field(None, ge=0, description="Reply has at most this many completion tokens.")
    semantic: SemanticSpec | None = None
    llm_judge: JudgeSpec | None = None
    or_: list[Check] | None = Field(
        None, alias="or", min_length=1, description="Passes if any member passes."
    )
    prompt: str | None = Field(None, description="Follow-up sent in the same conversation when this fails.")
    checks: list[Check] | None = Field(None, description="Checks for the follow-up's reply.")

    @model_validator(mode="before")
    @classmethod
    def _checks_object_form(cls, data: Any) -> Any:
        # vibecheck also allows `checks: {or: [...]}`; it means a one-item list.
        if isinstance(data, dict) and isinstance(data.get("checks"), dict):
            data = {**data, "checks": [data["checks"]]}
        return data

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return value

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
        return [key for key in CHECK_KEYS if getattr(self, "or_" if key == "or" else key) is not None]

    @property
    def kind(self) -> str | None:
        """The check type, or None for a pure follow-up item."""
        keys = self.check_keys()
        return keys[0] if keys else None

    @property
    def has_followup(self) -> bool:
        return self.prompt is not None


Check.model_rebuild()


class Eval(StrictModel):
    """One conversation. A conversation tree: a prompt, then follow-ups when checks fail."""

    id: str | None = Field(
        None, max_length=200, description="Stable id used to compare runs; defaults to eval-<n>."
    )
    prompt: str = Field(description="The first user message.")
    checks: list[Check] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _checks_object_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("checks"), dict):
            data = {**data, "checks": [data["checks"]]}
        return data

    @model_validator(mode="after")
    def _has_a_check(self) -> Eval:
        if not any(item.kind for item in self.checks):
            raise ValueError("checks need at least one check (follow-ups fire when a check fails)")
        return self


class MockRule(StrictModel):
    when: str = Field(description="Glob over the latest user message, case-insensitive.")
    reply: str


class MockSpec(StrictModel):
    """Rules for the built-in `mock` endpoint: the first rule whose glob matches the latest user message."""

    rules: list[MockRule] = Field(default_factory=list)
    default: str = "I'm a mock model and have no rule for that."
    latency_ms: int = Field(0, ge=0, le=10_000, description="Simulated latency per reply.")


class Metadata(StrictModel):
    """vibecheck's header; its fields fill name, model and system."""

    name: str | None = None
    model: str | None = None
    system_prompt: str | None = None


class Suite(StrictModel):
    name: str | None = Field(None, max_length=200)
    description: str | None = None
    model: str | None = Field(
        None, description='Model under test: "model" on the default endpoint, "endpoint/model", or "mock".'
    )
    judge: str | None = Field(None, description="Model for llm_judge and semantic checks (default: model).")
    system: str | None = Field(None, description="System prompt for every conversation.")
    metadata: Metadata | None = None
    mock: MockSpec | None = None
    evals: list[Eval] = Field(min_length=1)

    @model_validator(mode="after")
    def _merge_metadata(self) -> Suite:
        if self.metadata is not None:
            for field, meta_field in (("name", "name"), ("model", "model"), ("system", "system_prompt")):
                meta_value = getattr(self.metadata, meta_field)
                own = getattr(self, field)
                if meta_value is not None and own is not None and own != meta_value:
                    raise ValueError(f"`{field}` and `metadata.{meta_field}` disagree; keep one")
                if own is None:
                    setattr(self, field, meta_value)
        if not self.name:
            raise ValueError("a suite needs a `name` (or `metadata.name`)")
        seen: dict[str, int] = {}
        for index, ev in enumerate(self.evals):
            if ev.id is not None:
                if ev.id in seen:
                    raise ValueError(
                        f"evals[{index}] reuses id {ev.id!r} of evals[{seen[ev.id]}]; ids must be unique"
                    )
                seen[ev.id] = index
        return self

    def eval_id(self, index: int) -> str:
        return self.evals[index].id or f"eval-{index + 1}"


def followup_depth(items: list[Check]) -> int:
    """How many follow-up levels hang below a list of checks."""
    deepest = 0
    for item in items:
        if item.checks is not None:
            deepest = max(deepest, 1 + followup_depth(item.checks))
        if item.or_:
            deepest = max(deepest, followup_depth(item.or_))
    return deepest


def json_schema() -> dict:
    schema = Suite.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalsite suite"
    # `checks: {or: [...]}` is accepted as a one-item list (vibecheck's form); say so to editors too.
    or_object = {"type": "object", "properties": {"or": {"type": "array", "items": {"$ref": "#/$defs/Check"},
                 "minItems": 1}}, "required": ["or"], "additionalProperties": False}  # fmt: skip
    for model in ("Eval", "Check"):
        checks = schema["$defs"][model]["properties"]["checks"]
        checks_list = {
            key: value for key, value in checks.items() if key not in ("title", "description", "default")
        }
        checks.pop("anyOf", None)
        checks.pop("type", None)
        checks.pop("items", None)
        checks.pop("minItems", None)
        checks["anyOf"] = [
            branch for branch in checks_list.get("anyOf", [checks_list]) if branch != {"type": "null"}
        ]
        checks["anyOf"].append(or_object)
        if "anyOf" in checks_list and {"type": "null"} in checks_list["anyOf"]:
            checks["anyOf"].append({"type": "null"})
    return schema
