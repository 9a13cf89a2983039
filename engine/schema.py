"""The suite format, defined once.

Everything that reads a suite goes through these pydantic models: the YAML loader, the editor's live
validation, the API, the JSON Schema export served to editors and the docs. Unknown keys are errors.

A conversation tree (seed 000) is an eval with a `prompt` and `checks`. A check item is either a check
(`match`, `regex`, `llm_judge`, `or`, ...), a follow-up (`prompt` + `checks`), or a check that carries its
own follow-up. Follow-ups nest at most MAX_FOLLOWUP_DEPTH levels below the eval's prompt.
"""

from __future__ import annotations

import math
import string
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import patterns

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
    "field_equals",
    "field_is_set",
    "or",
)


class LocatedError(ValueError):
    """A rule across a suite's parts, broken at one place in it: `loc` is that place's path below the model
    that raised it, so the loader reports the place's line and column rather than the model's."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


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
    scope: Literal["reply", "conversation"] = Field(
        "reply", description="Grade the last reply, or the whole conversation (in [Role]: form)."
    )
    model: str | None = Field(None, description="Judge model; defaults to the suite's `judge`.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)

    @model_validator(mode="after")
    def _threshold_on_scale(self) -> JudgeSpec:
        low, high, default = SCALES[self.scale]
        if self.threshold is None:
            self.threshold = default
        elif not low <= self.threshold <= high:
            raise ValueError(f"threshold {self.threshold:g} is outside the {self.scale} scale")
        if isinstance(self.criteria, list) and not self.criteria:
            raise ValueError("criteria needs at least one criterion")
        return self

    def normalise(self, raw: float) -> float:
        """A score on this judge's scale, as 0-1."""
        low, high, _ = SCALES[self.scale]
        return (min(max(raw, low), high) - low) / (high - low)


class FieldEquals(StrictModel):
    path: str = Field(description="Dot path into the JSON-parsed reply, e.g. booking.status or items.0.id.")
    value: Any = Field(description="The value it must equal (compared after JSON parsing).")


class CheckFields(StrictModel):
    """The check vocabulary, shared by checks and by termination conditions."""

    match: str | None = Field(None, description='Glob over the reply, case-insensitive; "*" spans newlines.')
    not_match: str | None = Field(None, description="Passes when the glob does not match.")
    regex: str | None = Field(None, description="Python regular expression, searched anywhere in the reply.")
    contains: str | None = Field(None, description="Case-insensitive substring.")
    equals: str | None = Field(None, description="Exact match after stripping surrounding whitespace.")
    min_tokens: int | None = Field(None, ge=0, description="Reply has at least this many completion tokens.")
    max_tokens: int | None = Field(None, ge=0, description="Reply has at most this many completion tokens.")
    semantic: SemanticSpec | None = None
    llm_judge: JudgeSpec | None = None
    field_equals: FieldEquals | None = Field(
        None, description="On the JSON-parsed reply; not JSON means no match."
    )
    field_is_set: str | None = Field(
        None, description="Dot path that must hold a non-null value in the JSON reply."
    )

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

CONDITION_KEYS = ("all", "any", "not", "after_turns", "natural_language")


class NaturalLanguage(StrictModel):
    """The judge answers a yes/no question about the conversation with a confidence."""

    prompt: str = Field(description="A yes/no question, e.g. Has the booking been confirmed?")
    threshold: float = Field(0.7, ge=0.0, le=1.0, description="Confidence needed to count as met.")
    model: str | None = Field(None, description="Judge model; defaults to the suite's `judge`.")
    temperature: float | None = Field(
        None, ge=0.0, le=2.0, description="Judge temperature; defaults to the suite's `judge_temperature`."
    )


class Condition(CheckFields):
    """When a simulated conversation stops: a condition, a combinator, or any check of the vocabulary."""

    all_: list[Condition] | None = Field(None, alias="all", min_length=1, description="Every member holds.")
    any_: list[Condition] | None = Field(None, alias="any", min_length=1, description="Some member holds.")
    not_: Condition | None = Field(None, alias="not", description="The member does not hold.")
    after_turns: int | None = Field(None, ge=1, description="The agent has replied this many times.")
    natural_language: NaturalLanguage | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Condition:
        keys = self.keys()
        if len(keys) != 1:
            found = " and ".join(keys) if keys else "nothing"
            raise ValueError(
                f"a condition is exactly one of {', '.join(CONDITION_KEYS)} or a check; found {found}"
            )
        return self

    def keys(self) -> list[str]:
        names = [
            key
            for key in CONDITION_KEYS
            if getattr(self, key + "_" if key in ("all", "any", "not") else key) is not None
        ]
        return names + [key for key in CHECK_KEYS if key != "or" and getattr(self, key) is not None]

    @property
    def kind(self) -> str:
        return self.keys()[0]


Condition.model_rebuild()


class PersonaStage(StrictModel):
    until_turn: int | None = Field(
        None, ge=1, description="Use this persona up to this turn; omit on the last stage."
    )
    text: str


class FollowUpInput(StrictModel):
    input: str
    turns: int | Literal["inf"] = Field(
        1, description='How many times to send it; "inf" (last one only) forever.'
    )

    @field_validator("turns", mode="before")
    @classmethod
    def _infinity(cls, value: Any) -> Any:
        if isinstance(value, float) and math.isinf(value) and value > 0:
            return "inf"  # YAML's .inf
        return value

    @field_validator("turns")
    @classmethod
    def _positive(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("turns is at least 1")
        return value


class Simulate(StrictModel):
    """A conversation driven past its first prompt by scripted follow-ups, then by a simulated user, until
    a condition is met or max_turns is reached (@agtlantis/eval's multi-turn test cases)."""

    persona: str | list[PersonaStage] | None = Field(
        None,
        description="The simulated user's persona, or a schedule by turn. Without one, only follow_ups are sent.",
    )
    model: str | None = Field(None, description="Model playing the user; defaults to the suite's `judge`.")
    follow_ups: list[FollowUpInput] = Field(default_factory=list, description="Scripted inputs, used first.")
    max_turns: int = Field(10, ge=1, le=200)
    stop_when: Condition | None = None
    on_condition_met: Literal["pass", "fail"] = "pass"
    on_max_turns: Literal["pass", "fail"] = "fail"

    @model_validator(mode="after")
    def _coherent(self) -> Simulate:
        for number, follow_up in enumerate(self.follow_ups[:-1]):
            if follow_up.turns == "inf":
                raise ValueError(f"follow_ups[{number}]: turns: inf is allowed only on the last follow-up")
        if isinstance(self.persona, list):
            if not self.persona:
                raise ValueError("a persona schedule needs at least one stage")
            bounds = [stage.until_turn for stage in self.persona]
            if any(bound is None for bound in bounds[:-1]):
                raise ValueError("only the last persona stage may leave out until_turn")
            given = [bound for bound in bounds if bound is not None]
            if given != sorted(set(given)):
                raise ValueError("persona stages' until_turn must increase")
        return self


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


class ContentPart(StrictModel):
    type: Literal["text", "file"]
    value: str = Field(description="The text, or the name of a file attached to the suite.")


class Message(StrictModel):
    """One message of a given history, in OpenAI's shape. Any role is accepted."""

    role: str = Field(min_length=1)
    content: str | list[ContentPart]


class ScriptedTurn(StrictModel):
    input: str = Field(description="The user message sent on this turn.")
    checks: list[Check] | None = Field(None, description="Checks for this turn's reply (no follow-ups).")


def _no_followups(items: list[Check] | None, where: str) -> None:
    if items and followup_depth(items) > 0:
        raise ValueError(f"{where}: follow-ups (prompt + checks) belong to `prompt` conversations only")


class Eval(StrictModel):
    """One conversation. Which kind depends on its keys:

    - `prompt` + `checks`: a conversation tree, follow-ups when checks fail (seed 000);
    - `input` (one message or a list) with `ground_truth` and/or `checks`: scripted live turns (seed 001);
    - `turns`: scripted turns with checks on chosen turns;
    - `messages`: a given history, sent first; alone, the model replies to it (seeds 002, 004).
    """

    id: str | None = Field(
        None, max_length=200, description="Stable id used to compare runs; defaults to eval-<n>."
    )
    tags: list[str] = Field(default_factory=list)
    messages: list[Message] | None = Field(None, description="History sent before any live turn.")
    prompt: str | None = Field(None, description="The first user message of a conversation tree.")
    input: str | list[str] | None = Field(None, description="User messages sent live, in order.")
    turns: list[ScriptedTurn] | None = None
    checks: list[Check] | None = Field(
        None, description="Checks; for input/turns/messages they grade the last reply."
    )
    ground_truth: str | list[str] | None = Field(
        None,
        description="A list as long as `input` grades every turn; a string grades the last (or the extractor's view).",
    )
    grader: Grader | None = Field(
        None, description="How ground_truth is compared (default: the suite's, else exact_match)."
    )
    extractor: Extractor | None = Field(None, description="What the grader reads (default: last_assistant).")
    rubric: str | None = Field(
        None, description="For grader llm_judge: {input}, {ground_truth}, {submission}."
    )
    pass_threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="Minimum score to pass (default 1.0)."
    )
    simulate: Simulate | None = Field(
        None, description="After `prompt`: follow-ups, a simulated user, stop conditions."
    )
    iterations: int | None = Field(
        None, ge=1, le=1000, description="Run this eval N times (default: the suite's)."
    )
    pass_rate_threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="Iterated: share of passes needed."
    )
    aggregation: Literal["mean", "min", "max"] | None = Field(
        None, description="turns: how turn scores combine."
    )
    on_turn_failure: Literal["continue", "stop"] | None = Field(
        None, description="turns: stop at a failed turn?"
    )

    @model_validator(mode="before")
    @classmethod
    def _checks_object_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("checks"), dict):
            data = {**data, "checks": [data["checks"]]}
        return data

    @field_validator("rubric")
    @classmethod
    def _rubric(cls, value: str | None) -> str | None:
        return None if value is None else check_rubric(value)

    @model_validator(mode="after")
    def _one_kind(self) -> Eval:
        drivers = [key for key in ("prompt", "input", "turns") if getattr(self, key) is not None]
        if len(drivers) > 1:
            raise ValueError(f"use one of prompt, input or turns, not {' and '.join(drivers)}")
        if not drivers and self.messages is None:
            raise ValueError("an eval needs `prompt`, `input`, `turns` or `messages`")
        if self.checks is not None and not any(item.kind for item in self.checks):
            raise ValueError("checks need at least one check (follow-ups fire when a check fails)")
        if self.simulate is not None:
            if self.prompt is None:
                raise ValueError("`simulate` starts from `prompt`: give the first user message")
            _no_followups(self.checks, "checks")
            if self.ground_truth is not None:
                raise ValueError(
                    "`ground_truth` goes with `input`; grade a simulated conversation with checks"
                )
        elif self.prompt is not None:
            if not self.checks:
                raise ValueError("a `prompt` conversation needs `checks`")
            if self.ground_truth is not None:
                raise ValueError("`ground_truth` goes with `input` or `messages`, not `prompt` (use checks)")
        else:
            _no_followups(self.checks, "checks")
        if isinstance(self.ground_truth, list):
            if not isinstance(self.input, list):
                raise ValueError("a `ground_truth` list needs an `input` list of the same length")
            if len(self.ground_truth) != len(self.input):
                raise ValueError(
                    f"`ground_truth` has {len(self.ground_truth)} item{'' if len(self.ground_truth) == 1 else 's'} but `input` "
                    f"has {len(self.input)}; "
                    "give one per turn, or a single string to grade the last turn"
                )
        if isinstance(self.input, list) and not self.input:
            raise ValueError("`input` needs at least one message")
        if self.turns is not None:
            if not self.turns:
                raise ValueError("`turns` needs at least one turn")
            for number, turn in enumerate(self.turns):
                _no_followups(turn.checks, f"turns[{number}].checks")
            if self.ground_truth is not None:
                raise ValueError("`ground_truth` goes with `input`; give `turns` their own checks")
            if not self.checks and not any(turn.checks for turn in self.turns):
                raise ValueError("no turn has checks: give at least one turn (or the eval) `checks`")
        elif self.aggregation is not None or self.on_turn_failure is not None:
            raise ValueError("`aggregation` and `on_turn_failure` apply to `turns` conversations")
        if self.prompt is None and self.turns is None and not self.checks and self.ground_truth is None:
            raise ValueError("nothing grades this conversation: add `ground_truth` or `checks`")
        if self.grader == "regex_match":
            check_patterns(self.ground_truth)
        return self

    @property
    def style(self) -> str:
        if self.simulate is not None:
            return "simulated"
        if self.prompt is not None:
            return "tree"
        if self.input is not None:
            return "scripted"
        if self.turns is not None:
            return "turns"
        return "history"

    @property
    def first_text(self) -> str:
        """What lists show for this eval: its first user message."""
        if self.prompt is not None:
            return self.prompt
        if self.input is not None:
            return self.input if isinstance(self.input, str) else self.input[0]
        if self.turns:
            return self.turns[0].input
        for message in reversed(self.messages or []):
            if message.role == "user":
                content = message.content
                return (
                    content
                    if isinstance(content, str)
                    else " ".join(p.value for p in content if p.type == "text")
                )
        return "(history)"


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
