"""The suite: its header, defaults, gates, mock rules and evals, and the JSON Schema served to editors."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import LocatedError, StrictModel
from .evals import Eval
from .grading import EXTRACTORS, Extractor, Grader, check_patterns, check_rubric


class Gate(StrictModel):
    """A run passes only if every gate holds: `metric` of the eval scores compared with `value`."""

    metric: Literal["avg", "min", "accuracy", "p95"] = Field(
        description="avg, min or p95 of eval scores; accuracy is the share of evals that passed."
    )
    op: Literal[">=", ">", "<=", "<", "=="] = ">="
    value: float


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
    judge_temperature: float | None = Field(
        None,
        ge=0.0,
        le=2.0,
        description="Default temperature for llm_judge checks and natural_language conditions (the endpoint's "
        "when unset).",
    )
    system: str | None = Field(None, description="System prompt for every conversation.")
    metadata: Metadata | None = None
    mock: MockSpec | None = None
    grader: Grader | None = Field(None, description="Default grader for evals with ground_truth.")
    extractor: Extractor | None = Field(None, description="Default extractor.")
    rubric: str | None = Field(None, description="Default rubric for grader llm_judge.")
    pass_threshold: float | None = Field(None, ge=0.0, le=1.0, description="Default pass threshold.")
    gates: list[Gate] = Field(default_factory=list)
    iterations: int = Field(1, ge=1, le=1000, description="Run every eval N times; statistics when N > 1.")
    pass_rate_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="An iterated eval passes at this pass rate."
    )
    dataset: str | None = Field(
        None, description="A JSONL or CSV file attached to the suite; each row is an eval."
    )
    evals: list[Eval] = Field(default_factory=list)

    @field_validator("rubric")
    @classmethod
    def _rubric(cls, value: str | None) -> str | None:
        return None if value is None else check_rubric(value)

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
        if not self.evals and not self.dataset:
            raise ValueError("a suite needs `evals` or a `dataset`")
        for index, ev in enumerate(self.evals):
            if (
                (ev.grader or self.grader) == "llm_judge"
                and ev.ground_truth is not None
                and not (ev.rubric or self.rubric)
            ):
                raise LocatedError(
                    ("evals", index), "grades with llm_judge but has no `rubric` (nor does the suite)"
                )
            if ev.grader is None and self.grader == "regex_match":
                try:
                    check_patterns(ev.ground_truth)
                except ValueError as exc:
                    raise LocatedError(("evals", index, "ground_truth"), str(exc)) from None
        seen: dict[str, int] = {}
        for index, ev in enumerate(self.evals):
            if ev.id is not None:
                if ev.id in seen:
                    raise LocatedError(
                        ("evals", index, "id"),
                        f"id {ev.id!r} is taken by evals[{seen[ev.id]}]; ids must be unique",
                    )
                seen[ev.id] = index
        return self

    def eval_id(self, index: int) -> str:
        return self.evals[index].id or f"eval-{index + 1}"

    def files_used(self) -> list[str]:
        """Names of the attached files this suite refers to, in order of first use."""
        names: dict[str, None] = {}
        if self.dataset:
            names[self.dataset] = None
        for ev in self.evals:
            for message in ev.messages or []:
                if isinstance(message.content, list):
                    names.update((part.value, None) for part in message.content if part.type == "file")
        return list(names)


def json_schema() -> dict:
    schema = Suite.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalsite suite"
    # `checks: {or: [...]}` is accepted as a one-item list (vibecheck's form); say so to editors too.
    or_object = {"type": "object", "properties": {"or": {"type": "array", "items": {"$ref": "#/$defs/Check"},
                 "minItems": 1}}, "required": ["or"], "additionalProperties": False}  # fmt: skip
    # Extractors may be written as a bare name or a one-key mapping; the model's own shape needs `kind`.
    short_forms = [{"type": "string", "enum": list(EXTRACTORS)}, {"type": "object"}]
    for model in ("Eval", "Suite"):
        holder = schema if model == "Suite" else schema["$defs"][model]
        holder["properties"]["extractor"] = {
            "anyOf": [*short_forms, {"type": "null"}],
            "description": "See Extractor.",
        }
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
