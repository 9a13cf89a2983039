"""A turn's tool calls as the transcript shows them: each call's arguments and result pretty-printed, its
latency, whose fault an error was, and the tool checks of the turn that graded it. Read from the stored turn
record, so showing them costs no query."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from engine.results import CheckResult, ToolCall, ToolRound, TurnRecord

# A call's arguments as its folded line shows them, cut to this many characters.
INLINE_ARGUMENTS = 80
TOOL_CHECK_PREFIX = "tool_"


@dataclass(frozen=True)
class CheckLink:
    """A tool check of the turn that graded the call, and where it is on the page."""

    anchor: str
    label: str
    passed: bool


@dataclass(frozen=True)
class CallView:
    anchor: str
    round: int  # 1-based, within the turn
    name: str
    arguments: str  # pretty JSON, or the raw text when it was no JSON object
    arguments_are_json: bool
    inline: str  # the arguments on one line, cut
    result: str  # pretty JSON when the result parses as JSON, else as sent back
    result_is_json: bool
    error: str | None
    fault: str  # "model's mistake", "tool error" or ""
    source: str
    latency_ms: int
    call_id: str
    checks: list[CheckLink] = field(default_factory=list)


@dataclass(frozen=True)
class RoundView:
    number: int
    text: str
    latency_ms: int
    tokens: int
    calls: list[CallView]
    incomplete: str | None = None  # why the round did not finish: its calls were not carried out


@dataclass(frozen=True)
class TurnTools:
    rounds: list[RoundView]
    count: int  # calls, every round's

    @property
    def several_rounds(self) -> bool:
        return len(self.rounds) > 1


def check_anchor(turn: int, index: int) -> str:
    """The id of a turn's top-level check (0-based `index`) on the transcript page, as
    templates/runs/conversation/_check.html writes it (1-based)."""
    return f"turn-{turn}-check-{index + 1}"


def pretty_json(text: str) -> tuple[str, bool]:
    """`text` indented when it is a JSON object or array, else as given; and whether it was."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return text, False
    if not isinstance(value, dict | list):
        return text, False
    return json.dumps(value, indent=2, ensure_ascii=False), True


def _arguments(call: ToolCall) -> tuple[str, bool, str]:
    if call.arguments is None:
        return call.raw_arguments, False, _cut(call.raw_arguments)
    inline = json.dumps(call.arguments, ensure_ascii=False, separators=(", ", ": "))
    return json.dumps(call.arguments, indent=2, ensure_ascii=False), True, _cut(inline)


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= INLINE_ARGUMENTS else text[: INLINE_ARGUMENTS - 1] + "…"


def _fault(call: ToolCall) -> str:
    if call.error is None:
        return ""
    return "model's mistake" if call.mistake else "tool error"


def names_tool(check: CheckResult, name: str) -> bool:
    """Whether a check is a tool check that looked at calls of `name`: its type is a tool check's and its
    label names the tool (as a word, so `search` does not claim `search_web`). Only for records that do not
    say which calls their tool checks matched (`matched_calls`)."""
    if not check.type.startswith(TOOL_CHECK_PREFIX):
        return False
    words = "".join(ch if ch.isalnum() or ch in "_-." else " " for ch in check.label).split()
    return name in words


def credits(check: CheckResult, position: int, name: str) -> bool:
    """Whether a check of the turn graded its call at `position` (0-based, in the turn's calls): one the
    check matched, as it recorded; a record without them credits every call its label names."""
    if check.matched_calls is not None:
        return position in check.matched_calls
    return names_tool(check, name)


def _checks_of(turn: TurnRecord, position: int, name: str) -> list[CheckLink]:
    return [
        CheckLink(check_anchor(turn.turn, index), check.label, check.passed)
        for index, check in enumerate(turn.checks)
        if credits(check, position, name)
    ]


def _call(turn: TurnRecord, number: int, round_number: int, call: ToolCall) -> CallView:
    arguments, arguments_json, inline = _arguments(call)
    result, result_json = pretty_json(call.result)
    return CallView(
        anchor=f"turn-{turn.turn}-call-{number}",
        round=round_number,
        name=call.name,
        arguments=arguments,
        arguments_are_json=arguments_json,
        inline=inline,
        result=result,
        result_is_json=result_json,
        error=call.error,
        fault=_fault(call),
        source=call.source,
        latency_ms=call.latency_ms,
        call_id=call.id,
        checks=_checks_of(turn, number - 1, call.name),
    )


def _round(turn: TurnRecord, number: int, round_: ToolRound, first_call: int) -> RoundView:
    return RoundView(
        number=number,
        text=round_.text,
        latency_ms=round_.latency_ms,
        tokens=round_.usage.total_tokens,
        calls=[_call(turn, first_call + i, number, call) for i, call in enumerate(round_.calls)],
        incomplete=round_.incomplete,
    )


def turn_tools(turn: TurnRecord) -> TurnTools | None:
    """The turn's tool rounds as the transcript folds them under the model's reply; None without any."""
    if not turn.tool_rounds:
        return None
    rounds, first = [], 1
    for number, round_ in enumerate(turn.tool_rounds, start=1):
        rounds.append(_round(turn, number, round_, first))
        first += len(round_.calls)
    return TurnTools(rounds, first - 1)


def tools_by_turn(turns: list[TurnRecord]) -> dict[int, TurnTools]:
    """{turn: its tool calls} for the turns that called tools."""
    return {turn.turn: view for turn in turns if (view := turn_tools(turn)) is not None}
