"""The suite: its header, defaults, gates, mock rules and evals, and the JSON Schema served to editors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..suitevars import VAR_NAME
from .base import LocatedError, StrictModel
from .checks import FUNCTION_REF, CodeSpec
from .evals import Eval
from .grading import (
    EXTRACTORS,
    GRADER_NAME,
    GROUND_TRUTH_KINDS,
    Extractor,
    Grader,
    NamedGrader,
    PassRule,
    WeightedPassRule,
    check_patterns,
    check_rubric,
    check_weights,
)
from .settings import CacheRoles, CacheSetting, MaxCost, ModelSettings
from .tools import MaxToolRounds, OfferedTools

MAX_GATE_DEPTH = 5
# A request timeout's bounds, in seconds: under a tenth of a second no endpoint answers; past an hour a
# hung endpoint would hold its conversation for longer than anyone watches a run.
TIMEOUT_MIN, TIMEOUT_MAX = 0.1, 3600.0
DEFAULT_ENDPOINT, MOCK_ENDPOINT = "default", "mock"
ENDPOINT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,49}")


def check_timeout(value: Any, path: tuple) -> None:
    """A request timeout is a number of seconds within the bounds; a LocatedError at `path` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise LocatedError(path, f"expected a number of seconds; found {value!r}")
    if not TIMEOUT_MIN <= value <= TIMEOUT_MAX:
        raise LocatedError(
            path, f"a request timeout is {TIMEOUT_MIN:g} to {TIMEOUT_MAX:g} seconds; found {value:g}"
        )


class Gate(StrictModel):
    """A run passes only if every gate holds. A gate is one of:

    - `metric` of the eval scores compared with `value` (with `grader`: of that named grader's scores);
    - `weighted_average: {grader: weight, ...}`: `metric` (default avg) of each eval's weighted mean of those
      graders' scores, compared with `value`;
    - `logical_and: [gates]` / `logical_or: [gates]`: every / any member gate holds.
    """

    metric: Literal["avg", "min", "accuracy", "p95"] = Field(
        description="avg, min or p95 of eval scores; accuracy is the share of evals that passed."
    )
    op: Literal[">=", ">", "<=", "<", "=="] = ">="
    value: float
    grader: str | None = Field(None, description="Measure this named grader's scores instead of the evals'.")
    weighted_average: dict[str, float] | None = Field(None, description="Named graders and their weights.")
    logical_and: list[Gate] | None = Field(None, description="Holds when every member gate holds.")
    logical_or: list[Gate] | None = Field(None, description="Holds when any member gate holds.")

    @model_validator(mode="before")
    @classmethod
    def _forms(cls, data: Any) -> Any:
        # `metric` and `value` are required of a plain gate (their own errors say so, beside any other); a
        # weighted average measures avg unless told, and a logical gate measures nothing itself.
        if not isinstance(data, dict):
            return data
        logical = [key for key in ("logical_and", "logical_or") if key in data]
        if logical:
            extra = [key for key in ("metric", "op", "value", "grader", "weighted_average") if key in data]
            if len(logical) > 1 or extra:
                raise ValueError(f"{logical[0]} stands alone: its member gates say what is measured")
            return {**data, "metric": "avg", "value": 0.0}
        if "weighted_average" in data and "metric" not in data:
            return {**data, "metric": "avg"}
        return data

    @model_validator(mode="after")
    def _one_form(self) -> Gate:
        for key in ("logical_and", "logical_or"):
            members = getattr(self, key)
            if members is not None and not members:
                raise ValueError(f"{key} needs at least one gate")
        if self.depth > MAX_GATE_DEPTH:
            raise ValueError(f"gates nest at most {MAX_GATE_DEPTH} levels deep")
        if self.grader is not None and self.weighted_average is not None:
            raise ValueError("use `grader` or `weighted_average`, not both")
        if self.weighted_average is not None:
            check_weights(self.weighted_average)
        return self

    @property
    def kind(self) -> str:
        if self.logical_and is not None:
            return "logical_and"
        if self.logical_or is not None:
            return "logical_or"
        return "weighted_average" if self.weighted_average is not None else "simple"

    @property
    def members(self) -> list[Gate]:
        return self.logical_and or self.logical_or or []

    @property
    def depth(self) -> int:
        return 1 + max((member.depth for member in self.members), default=0)

    def graders_named(self) -> list[tuple[tuple, str]]:
        """(path below this gate, grader name) of every grader the gate or its members name."""
        found: list[tuple[tuple, str]] = []
        if self.grader is not None:
            found.append((("grader",), self.grader))
        for name in self.weighted_average or {}:
            found.append((("weighted_average", name), name))
        key = "logical_and" if self.logical_and is not None else "logical_or"
        for index, member in enumerate(self.members):
            found += [((key, index, *path), name) for path, name in member.graders_named()]
        return found


class MockCall(StrictModel):
    """A tool call the mock makes (a rule's `calls`)."""

    name: str = Field(description="The tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments, sent as JSON.")


class MockRule(StrictModel):
    when: str = Field(description="Glob over the latest user message, case-insensitive.")
    reply: str
    calls: list[MockCall] | None = Field(
        None,
        min_length=1,
        description="When tools are offered: call these first (one round), then answer `reply`, in which "
        "{{tool_results}} stands for the calls' results.",
    )


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
    request_timeout: float | dict[str, float] | None = Field(
        None,
        description="Seconds one model request may take before it is abandoned and retried: a number for "
        "every endpoint the suite calls, or {endpoint name: seconds} (`default` for the default endpoint). "
        "Overrides the endpoint's own timeout; `evalsite run --timeout` overrides this.",
    )
    system: str | None = Field(None, description="System prompt for every conversation.")
    vars: dict[str, str | None] | None = Field(
        None,
        description="Suite variables, written {{var:NAME}} in any text: each name's default, or null when a "
        "value must be given at launch.",
    )
    metadata: Metadata | None = None
    mock: MockSpec | None = None
    grader: Grader | None = Field(None, description="Default grader for evals with ground_truth.")
    extractor: Extractor | None = Field(None, description="Default extractor.")
    rubric: str | None = Field(None, description="Default rubric for grader llm_judge.")
    rubric_prompt: Literal["evalsite", "as_written"] = Field(
        "evalsite",
        description="How rubric judges (grader llm_judge, llm_judge graders) send their rubric: evalsite (the "
        "conversation, the filled rubric and a request for JSON, under evalsite's judge system prompt) or "
        "as_written (the filled rubric alone is the judge's message, as Letta Evals sends it).",
    )
    judge_system: str | None = Field(
        None, description="With rubric_prompt as_written: the judge's system message (default: none)."
    )
    pass_threshold: float | None = Field(None, ge=0.0, le=1.0, description="Default pass threshold.")
    graders: dict[str, NamedGrader] = Field(
        default_factory=dict,
        description="Named graders: every eval gets a score from each (see NamedGrader).",
    )
    pass_rule: PassRule = Field(
        "all",
        description="How an eval passes under named graders: all (every one passes), any, or "
        "{weighted_average: {name: weight}, threshold}.",
    )
    incomplete_reply: Literal["error", "fail", "grade"] | None = Field(
        None,
        description="A reply cut off at the token limit, filtered, refused or empty: error (the default: the "
        "conversation is an error, not a FAIL), fail (a failed turn) or grade (graded as given).",
    )
    gates: list[Gate] = Field(default_factory=list)
    tools: OfferedTools = None
    max_tool_rounds: MaxToolRounds = None
    model_settings: ModelSettings | None = Field(
        None, description="Generation settings for the model under test (temperature, max_tokens, seed, ...)."
    )
    judge_settings: ModelSettings | None = Field(None, description="Generation settings for judges.")
    user_settings: ModelSettings | None = Field(
        None, description="Generation settings for the simulated user."
    )
    cache: CacheSetting = None
    max_cost: MaxCost = None
    # Whether its iterations are a calibration's repeats, which `cache.repeats` is about.
    plays_repeats: ClassVar[bool] = False

    iterations: int = Field(1, ge=1, le=1000, description="Run every eval N times; statistics when N > 1.")
    pass_rate_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="An iterated eval passes at this pass rate."
    )
    dataset: str | None = Field(
        None, description="A JSONL or CSV file attached to the suite; each row is an eval."
    )
    evals: list[Eval] = Field(default_factory=list)

    @field_validator("vars")
    @classmethod
    def _vars(cls, value: dict[str, str | None] | None) -> dict[str, str | None] | None:
        for name in value or {}:
            if not VAR_NAME.fullmatch(name):
                raise LocatedError(
                    (name,),
                    f"`{name}` is not a variable name: letters, digits, _ . - (not starting with a digit)",
                )
        return value

    @field_validator("cache")
    @classmethod
    def _repeats_are_a_calibrations(cls, value: CacheRoles | None) -> CacheRoles | None:
        # An ordinary suite's iterations are cached apart, by iteration: `repeats` would quietly do nothing.
        if value is not None and value.repeats and not cls.plays_repeats:
            raise LocatedError(
                ("repeats",),
                "`repeats` is for a calibration set's repeats; a suite's iterations are cached apart, each "
                "under its own iteration, so leave it out",
            )
        return value

    @field_validator("rubric")
    @classmethod
    def _rubric(cls, value: str | None) -> str | None:
        return None if value is None else check_rubric(value)

    @field_validator("request_timeout", mode="before")
    @classmethod
    def _request_timeout(cls, value: Any) -> Any:
        # Checked here, not by the union's own errors, so that one clear sentence names what is wrong.
        if value is None:
            return value
        if isinstance(value, dict):
            for name, seconds in value.items():
                if not isinstance(name, str) or not (
                    name == DEFAULT_ENDPOINT or ENDPOINT_NAME.fullmatch(name)
                ):
                    raise LocatedError((name,), f"`{name}` is not an endpoint name: write `default` or an "
                                       "endpoint's name, as in `name/model`")  # fmt: skip
                if name == MOCK_ENDPOINT:
                    raise LocatedError((name,), "the mock endpoint answers at once: it has no timeout")
                check_timeout(seconds, (name,))
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise LocatedError(
                (), f"expected a number of seconds, or {{endpoint name: seconds}}; found {value!r}"
            )
        check_timeout(value, ())
        return value

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
            if not ev.graded_alone and not self.graders:
                raise LocatedError(("evals", index), ev.ungraded)
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
        self._check_graders()
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

    def _check_graders(self) -> None:
        """Named graders across the suite: names, the old single `grader` beside them, ground truths, the
        pass rules' and gates' grader names, each error at its place."""
        for name in self.graders:
            _check_grader_name(name, ("graders", name))
        if self.graders and self.grader is not None:
            raise LocatedError(("grader",), "use named `graders` or the single `grader`, not both")
        known = set(self.graders)
        for index, ev in enumerate(self.evals):
            for name in ev.graders or {}:
                _check_grader_name(name, ("evals", index, "graders", name))
            if ev.graders and (ev.grader is not None or (self.grader is not None)):
                raise LocatedError(
                    ("evals", index, "graders"), "use named `graders` or the single `grader`, not both"
                )
            known |= set(ev.graders or {})
            graders = self.graders_of(index)
            for name, grader in graders.items():
                if grader.kind in GROUND_TRUTH_KINDS:
                    if ev.ground_truth is None:
                        raise LocatedError(
                            ("evals", index),
                            f"graded by `{name}` ({grader.kind}), which needs a `ground_truth`",
                        )
                    if grader.kind == "regex_match":
                        try:
                            check_patterns(ev.ground_truth)
                        except ValueError as exc:
                            raise LocatedError(("evals", index, "ground_truth"), f"{name}: {exc}") from None
            rule = ev.pass_rule if ev.pass_rule is not None else self.pass_rule
            if isinstance(rule, WeightedPassRule):
                where = ("evals", index, "pass_rule") if ev.pass_rule is not None else ("pass_rule",)
                named = [(("weighted_average", name), name) for name in rule.weighted_average]
                named += [(("required", position), name) for position, name in enumerate(rule.required)]
                for path, name in named:
                    if name not in graders:
                        raise LocatedError((*where, *path), f"no grader named {name!r} grades this eval")
                if rule.with_turns and ev.turns is None:
                    raise LocatedError(
                        (*where, "with_turns"),
                        f"with_turns counts the turns of a `turns` conversation; evals[{index}] has none",
                    )
            elif ev.pass_rule is not None and not graders:
                raise LocatedError(("evals", index, "pass_rule"), "a pass_rule needs named `graders`")
        for index, gate in enumerate(self.gates):
            for path, name in gate.graders_named():
                if name not in known:
                    raise LocatedError(("gates", index, *path), f"no grader named {name!r}{_known(known)}")

    def graders_of(self, index: int) -> dict[str, NamedGrader]:
        """The named graders of an eval: the suite's, then its own (an own grader of the same name replaces
        the suite's, in the suite's place)."""
        own = self.evals[index].graders or {}
        return {**self.graders, **own}

    def eval_id(self, index: int) -> str:
        return self.evals[index].id or f"eval-{index + 1}"

    def named_graders(self) -> Iterator[tuple[tuple, str, NamedGrader]]:
        """Every named grader where it is declared: (its path in the suite, its name, the grader), the suite's
        first, then each eval's own."""
        yield from ((("graders", name), name, grader) for name, grader in self.graders.items())
        for index, ev in enumerate(self.evals):
            for name, grader in (ev.graders or {}).items():
                yield ("evals", index, "graders", name), name, grader

    def code_checks(self) -> list[tuple[tuple, CodeSpec]]:
        """Every code check where it is written, (its path in the suite, its spec): in checks, follow-ups,
        turns, stop conditions and named graders alike."""
        found: list[tuple[tuple, CodeSpec]] = []
        _find_code(self, (), found)
        return found

    def files_used(self) -> list[str]:
        """Names of the attached files this suite refers to, in order of first use."""
        names: dict[str, None] = {}
        if self.dataset:
            names[self.dataset] = None
        for _, _, grader in self.named_graders():
            if grader.rubric_file:
                names[grader.rubric_file] = None
        for _, spec in self.code_checks():
            names.update((name, None) for name in spec.files)
        for tools in [self.tools, *(ev.tools for ev in self.evals)]:
            names.update((tool.replay, None) for tool in tools or () if getattr(tool, "replay", None))
        for ev in self.evals:
            for message in ev.messages or []:
                if isinstance(message.content, list):
                    names.update((part.value, None) for part in message.content if part.type == "file")
        return list(names)


def _find_code(value: Any, path: tuple, found: list) -> None:
    if isinstance(value, CodeSpec):
        found.append((path, value))
    elif isinstance(value, BaseModel):
        for name, field in type(value).model_fields.items():
            item = getattr(value, name)
            if item is not None and not isinstance(item, (str, int, float)):
                _find_code(item, (*path, field.alias or name), found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _find_code(item, (*path, index), found)
    elif isinstance(value, dict):
        for key, item in value.items():
            _find_code(item, (*path, key), found)


def _check_grader_name(name: str, loc: tuple) -> None:
    if not re.match(GRADER_NAME, name):
        raise LocatedError(
            loc,
            f"grader name {name!r}: letters, digits, '_' and '-', up to 60, starting with a letter or digit",
        )


def _known(names: set[str]) -> str:
    return f" (graders: {', '.join(sorted(names))})" if names else " (the suite has no named graders)"


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
    # `code: "module:function"` and `code: [program, arg]` are short forms of a CodeSpec.
    code_short = [
        {"type": "string", "pattern": FUNCTION_REF.pattern},
        {"type": "array", "items": {"type": "string"}},
    ]
    for definition in schema["$defs"].values():
        code = definition.get("properties", {}).get("code")
        if code is not None:
            code["anyOf"] = [*code_short, *code.get("anyOf", [])]
    for name in ("CodeSpec", "ToolCode"):  # a code check's, a tool's code handler's
        command = schema["$defs"][name]["properties"]["command"]  # a string is split as a shell would
        command["anyOf"] = [{"type": "string"}, *command.get("anyOf", [])]
    return schema
