"""A turn's tool calls as the transcript shows them: each call's arguments and result pretty-printed, its
latency, whose fault an error was, and the tool checks that graded it: its turn's, and the `scope:
conversation` checks of later turns, which name their turn. Such a check names in turn each call it credited
and the turn that made it. Read from the stored turn records, so showing them costs no query."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from engine.results import CheckResult, ToolCall, ToolRound, TurnRecord

# A call's arguments as its folded line shows them, cut to this many characters.
INLINE_ARGUMENTS = 80
TOOL_CHECK_PREFIX = "tool_"


@dataclass(frozen=True)
class CheckLink:
    """A tool check that graded the call, and where it is on the page; `turn`: the check's turn when it is a
    later one than the call's (a `scope: conversation` check), None when it is the call's own."""

    anchor: str
    label: str
    passed: bool
    turn: int | None = None


@dataclass(frozen=True)
class CallLink:
    """A call a `scope: conversation` tool check credited, as the check names it: the tool, the turn that made
    the call, and where the call is on the page."""

    anchor: str
    name: str
    turn: int


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


def call_anchor(turn: int, position: int) -> str:
    """The id of a turn's call (0-based `position` in the turn's `tool_calls`) on the transcript page."""
    return f"turn-{turn}-call-{position + 1}"


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


# The checks of later turns that credited a call: (the call's turn, its 0-based position) -> their links.
Later = dict[tuple[int, int], list[CheckLink]]


def _checks_of(turn: TurnRecord, position: int, name: str, later: Later) -> list[CheckLink]:
    own = [
        CheckLink(check_anchor(turn.turn, index), check.label, check.passed)
        for index, check in enumerate(turn.checks)
        if credits(check, position, name)
    ]
    return own + later.get((turn.turn, position), [])


def later_credits(turns: list[TurnRecord]) -> Later:
    """The `scope: conversation` tool checks that credited calls of an earlier turn, by the call they
    credited."""
    found: Later = {}
    for turn in turns:
        for index, check in enumerate(turn.checks):
            for ref in check.matched_earlier_calls or ():
                link = CheckLink(check_anchor(turn.turn, index), check.label, check.passed, turn.turn)
                found.setdefault((ref.turn, ref.call), []).append(link)
    return found


def credited_calls(turns: list[TurnRecord]) -> dict[int, dict[int, list[CallLink]]]:
    """{turn: {check's 1-based position: the calls it credited}} for the tool checks that credited calls of
    earlier turns: every call each matched, earlier turns' first, each with the turn that made it."""
    calls = {turn.turn: turn.tool_calls for turn in turns}
    found: dict[int, dict[int, list[CallLink]]] = {}
    for turn in turns:
        for index, check in enumerate(turn.checks):
            if not check.matched_earlier_calls:
                continue
            places = [(ref.turn, ref.call) for ref in check.matched_earlier_calls]
            places += [(turn.turn, position) for position in check.matched_calls or ()]
            found.setdefault(turn.turn, {})[index + 1] = [
                CallLink(call_anchor(at, position), calls[at][position].name, at)
                for at, position in places
                if position < len(calls.get(at, ()))
            ]
    return found


def _call(turn: TurnRecord, number: int, round_number: int, call: ToolCall, later: Later) -> CallView:
    arguments, arguments_json, inline = _arguments(call)
    result, result_json = pretty_json(call.result)
    return CallView(
        anchor=call_anchor(turn.turn, number - 1),
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
        checks=_checks_of(turn, number - 1, call.name, later),
    )


def _round(turn: TurnRecord, number: int, round_: ToolRound, first_call: int, later: Later) -> RoundView:
    return RoundView(
        number=number,
        text=round_.text,
        latency_ms=round_.latency_ms,
        tokens=round_.usage.total_tokens,
        calls=[_call(turn, first_call + i, number, call, later) for i, call in enumerate(round_.calls)],
        incomplete=round_.incomplete,
    )


def turn_tools(turn: TurnRecord, later: Later | None = None) -> TurnTools | None:
    """The turn's tool rounds as the transcript folds them under the model's reply; None without any.
    `later`: the later turns' checks that credited its calls (later_credits)."""
    if not turn.tool_rounds:
        return None
    rounds, first = [], 1
    for number, round_ in enumerate(turn.tool_rounds, start=1):
        rounds.append(_round(turn, number, round_, first, later or {}))
        first += len(round_.calls)
    return TurnTools(rounds, first - 1)


def tools_by_turn(turns: list[TurnRecord]) -> dict[int, TurnTools]:
    """{turn: its tool calls} for the turns that called tools, each call with the checks of any of `turns`
    that credited it."""
    later = later_credits(turns)
    return {turn.turn: view for turn in turns if (view := turn_tools(turn, later)) is not None}
