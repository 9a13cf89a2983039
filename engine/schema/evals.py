"""Evals: one conversation each, its kind chosen by its keys, with the parts only some kinds have: a given
history (`messages`), scripted `turns`, and a simulated user (`simulate`)."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .base import LocatedError, StrictModel, user_text
from .checks import Check, followup_depth
from .conditions import Condition
from .grading import Extractor, Grader, NamedGrader, PassRule, check_patterns, check_rubric
from .settings import ModelSettings
from .tools import MaxToolRounds, OfferedTools


class Style(StrEnum):
    """A conversation's style: which of its keys drive it (Eval.style), and so which driver plays it
    (engine.drivers). Each has the label the pages show."""

    label: str

    TREE = "tree", "conversation tree"  # `prompt` + `checks`: follow-ups chosen by failed checks
    SCRIPTED = "scripted", "scripted turns"  # `input`: messages sent in order, graded per turn
    TURNS = "turns", "turns"  # `turns`: scripted messages with checks on chosen turns
    HISTORY = "history", "reply to a given history"  # `messages` alone: the model replies to them
    SIMULATED = "simulated", "simulated user"  # `simulate`: a simulated user until a condition holds
    GIVEN = "given", "a given reply, graded"  # `reply`: graded as it stands, no model called

    def __new__(cls, value: str, label: str) -> Style:
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member


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

    @field_validator("input")
    @classmethod
    def _input_text(cls, value: str) -> str:
        return user_text(value, "input")

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


class ContentPart(StrictModel):
    type: Literal["text", "file"]
    value: str = Field(description="The text, or the name of a file attached to the suite.")


class CalledFunction(StrictModel):
    name: str = Field(min_length=1, description="The tool the assistant called.")
    arguments: str | dict[str, Any] = Field(
        "{}", description="Its arguments: JSON text, as OpenAI sends them, or a mapping (sent as JSON)."
    )


class MessageToolCall(StrictModel):
    """A tool call an assistant message of a given history made, in OpenAI's shape."""

    id: str = Field(min_length=1, description="Answered by the `tool` message whose `tool_call_id` it is.")
    type: Literal["function"] = "function"
    function: CalledFunction


class Message(StrictModel):
    """One message of a given history, in OpenAI's shape. Any role is accepted. An assistant message may
    carry `tool_calls` (its content then optional), each answered by a `tool` message's `tool_call_id`; a
    `tool` message without one is sent as written, as any other role is."""

    role: str = Field(min_length=1)
    content: str | list[ContentPart] | None = None
    tool_calls: list[MessageToolCall] | None = Field(
        None, description="The assistant's tool calls; each is answered by a `tool` message right after it."
    )
    tool_call_id: str | None = Field(None, description="On a `tool` message: the call it answers.")

    @model_validator(mode="after")
    def _shape(self) -> Message:
        # An empty message is sent as such and most endpoints refuse it (HTTP 400) mid-run; an assistant
        # message that only calls tools is the one message that says nothing.
        if self.tool_calls is not None:
            if self.role != "assistant":
                raise LocatedError(("tool_calls",), "only an `assistant` message makes tool calls")
            if not self.tool_calls:
                raise LocatedError(("tool_calls",), "`tool_calls` needs at least one call (or leave it out)")
        elif not _has_text(self.content):
            said = (
                "a message needs content" if "content" in self.model_fields_set else "`content` is required"
            )
            raise LocatedError(
                ("content",),
                f"{said}: text, or parts with text or a file"
                + (" (or, from the assistant, `tool_calls`)" if self.role == "assistant" else ""),
            )
        if self.tool_call_id is not None and self.role != "tool":
            raise LocatedError(("tool_call_id",), "only a `tool` message answers a tool call")
        return self


def _has_text(content: str | list[ContentPart] | None) -> bool:
    if content is None:
        return False
    return bool(content.strip() if isinstance(content, str) else any(part.value.strip() for part in content))


def check_tool_exchanges(messages: list[Message]) -> None:
    """Tool messages answer the calls of the assistant message just before them, as endpoints require
    (anything else is refused with HTTP 400 mid-run): each call is answered once, before the history goes
    on, and no call is left unanswered."""
    waiting: dict[str, int] = {}  # the calls not answered yet: id -> the index of the message that made it
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if message.tool_call_id is not None:
            call_id = message.tool_call_id
            if call_id not in waiting:
                said = (
                    "was answered already"
                    if call_id in answered
                    else "was made by no assistant message before it"
                )
                raise LocatedError(
                    (index, "tool_call_id"),
                    f"this tool message answers the call `{call_id}`, which {said}: a tool message answers a "
                    "call of the assistant message just before it",
                )
            del waiting[call_id]
            answered.add(call_id)
            continue
        _unanswered(waiting, "before the next message")
        for number, call in enumerate(message.tool_calls or []):
            if call.id in waiting or call.id in answered:
                raise LocatedError(
                    (index, "tool_calls", number, "id"),
                    f"the call id `{call.id}` is used twice in this history",
                )
            waiting[call.id] = index
    _unanswered(waiting, "before the history ends")


def _unanswered(waiting: dict[str, int], where: str) -> None:
    if waiting:
        call_id, index = next(iter(waiting.items()))
        raise LocatedError(
            (index, "tool_calls"),
            f"the call `{call_id}` has no `tool` message answering it {where}: endpoints refuse a call left "
            "unanswered; add `{role: tool, tool_call_id: "
            + call_id
            + ", content: …}` right after this message",
        )


class ScriptedTurn(StrictModel):
    input: str = Field(description="The user message sent on this turn.")
    checks: list[Check] | None = Field(None, description="Checks for this turn's reply (no follow-ups).")

    @field_validator("input")
    @classmethod
    def _input_text(cls, value: str) -> str:
        return user_text(value, "input")


def _no_followups(items: list[Check] | None, where: str) -> None:
    if items and followup_depth(items) > 0:
        raise ValueError(f"{where}: follow-ups (prompt + checks) belong to `prompt` conversations only")


# Roles that set the scene without asking anything of the model.
_SCENE_ROLES = ("system", "developer")


def _asks_something(messages: list[Message]) -> None:
    """A given history the model replies to must ask it something: a history of system messages alone, or
    one that ends on the assistant's own turn, leaves the model nothing to answer, so whatever it says
    would be graded against a question nobody asked."""
    asking = [index for index, message in enumerate(messages) if message.role not in _SCENE_ROLES]
    if not asking:
        raise LocatedError(
            ("messages",),
            "this history asks nothing: it has only system messages, so no user message is ever sent; add a "
            "user message, or send one with `prompt`, `input` or `turns`",
        )
    last = asking[-1]
    if messages[last].role == "assistant":
        raise LocatedError(
            ("messages", last, "role"),
            "this history ends on the assistant's turn, so it asks the model nothing; add the user message "
            "it answers, or give the assistant's text as `reply` to grade it as it stands",
        )


class Eval(StrictModel):
    """One conversation. Which kind depends on its keys:

    - `prompt` + `checks`: a conversation tree, follow-ups when checks fail (vibecheck's format);
    - `input` (one message or a list) with `ground_truth` and/or `checks`: scripted live turns, graded per
      turn (Letta Evals' multi-turn rows);
    - `turns`: scripted turns with checks on chosen turns;
    - `messages`: a given history, sent first; alone, the model replies to it (calibrate's message lists,
      AgentV's input_messages);
    - `reply`: an assistant reply given as text, after `messages`, graded as it stands with no model call
      (a transcript someone already has; calibrating a judge).
    """

    id: str | None = Field(
        None, max_length=200, description="Stable id used to compare runs; defaults to eval-<n>."
    )
    tags: list[str] = Field(default_factory=list)
    messages: list[Message] | None = Field(None, description="History sent before any live turn.")
    prompt: str | None = Field(None, description="The first user message of a conversation tree.")
    input: str | list[str] | None = Field(None, description="User messages sent live, in order.")
    turns: list[ScriptedTurn] | None = None
    reply: str | None = Field(
        None, description="An assistant reply, after `messages`, graded as it stands: no model is called."
    )
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
    graders: dict[str, NamedGrader] | None = Field(
        None, description="This eval's own named graders, after the suite's (the same name replaces it)."
    )
    pass_rule: PassRule | None = Field(
        None, description="How it passes under named graders (default: the suite's)."
    )
    aggregation: Literal["mean", "min", "max"] | None = Field(
        None, description="turns: how turn (and named graders') scores combine."
    )
    on_turn_failure: Literal["continue", "stop"] | None = Field(
        None, description="turns: stop at a failed turn?"
    )
    incomplete_reply: Literal["error", "fail", "grade"] | None = Field(
        None,
        description="A reply cut off at the token limit, filtered, refused or empty: an error (the "
        "default), a failed turn, or graded as given (default: the suite's).",
    )
    tools: OfferedTools = None
    max_tool_rounds: MaxToolRounds = None
    model_settings: ModelSettings | None = Field(
        None,
        description="Generation settings for the model under test, over the suite's, key by key (a key given "
        "as null removes the suite's).",
    )

    @model_validator(mode="before")
    @classmethod
    def _checks_object_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("checks"), dict):
            data = {**data, "checks": [data["checks"]]}
        return data

    @field_validator("messages")
    @classmethod
    def _some_messages(cls, value: list[Message] | None) -> list[Message] | None:
        if value is not None and not value:  # `messages: []` would send nothing at all
            raise ValueError("`messages` needs at least one message")
        check_tool_exchanges(value or [])
        return value

    @field_validator("rubric")
    @classmethod
    def _rubric(cls, value: str | None) -> str | None:
        return None if value is None else check_rubric(value)

    @field_validator("prompt")
    @classmethod
    def _prompt_text(cls, value: str | None) -> str | None:
        return user_text(value, "prompt")

    @field_validator("input")
    @classmethod
    def _input_text(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            for index, item in enumerate(value):
                if not item.strip():
                    raise LocatedError((index,), "this `input` message is blank: a user message needs text")
            return value
        return user_text(value, "input")

    @model_validator(mode="after")
    def _one_kind(self) -> Eval:
        drivers = [key for key in ("prompt", "input", "turns", "reply") if getattr(self, key) is not None]
        if len(drivers) > 1:
            raise ValueError(f"use one of prompt, input, turns or reply, not {' and '.join(drivers)}")
        if not drivers and self.messages is None:
            raise ValueError("an eval needs `prompt`, `input`, `turns`, `reply` or `messages`")
        if self.reply is not None and self.simulate is not None:
            raise ValueError("a given `reply` is graded as it stands: it cannot go on with `simulate`")
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
            if not self.checks and not self.graders and not any(turn.checks for turn in self.turns):
                raise ValueError(
                    "no turn has checks: give at least one turn (or the eval) `checks`, or the eval named `graders`"
                )
        elif self.aggregation is not None or self.on_turn_failure is not None:
            raise ValueError("`aggregation` and `on_turn_failure` apply to `turns` conversations")
        if self.style is Style.HISTORY:
            _asks_something(self.messages or [])
        # "Nothing grades this conversation" is the suite's to say: its named graders may grade it.
        if self.grader == "regex_match":
            check_patterns(self.ground_truth)
        return self

    @property
    def graded_alone(self) -> bool:
        """Something of its own grades it: checks, a ground truth, its own named graders, the checks its kind
        requires (trees, turns), or a simulated conversation's stop condition. A simulated conversation with
        none of these always ends at max_turns with the same outcome."""
        if self.simulate is not None and self.simulate.stop_when is not None:
            return True
        return bool(
            (self.prompt is not None and self.simulate is None) or self.turns is not None or self.checks
            or self.ground_truth is not None or self.graders
        )  # fmt: skip

    @property
    def ungraded(self) -> str:
        """What the refusal says when nothing grades it (see graded_alone)."""
        if self.simulate is not None:
            return (
                "nothing grades this conversation: add `checks` or a `simulate.stop_when` condition (without "
                "either it always ends at max_turns with `on_max_turns`), or named `graders`"
            )
        return "nothing grades this conversation: add `ground_truth` or `checks`"

    @property
    def style(self) -> Style:
        if self.simulate is not None:
            return Style.SIMULATED
        if self.prompt is not None:
            return Style.TREE
        if self.input is not None:
            return Style.SCRIPTED
        if self.turns is not None:
            return Style.TURNS
        if self.reply is not None:
            return Style.GIVEN
        return Style.HISTORY

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
