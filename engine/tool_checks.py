"""The checks on tool use: which tools the model called, with which arguments, how often, in what order, and
what they returned (`tool_called`, `tool_not_called`, `tool_sequence`, `tool_result`).

Each grades a list of calls (the reply's, or the conversation's so far: engine.checks picks) and answers
(passed, reason, the calls it matched), the reason in words a reviewer can act on: what was called instead,
and why its arguments do not match. The calls rejected as the model's mistakes never ran: `counted` leaves
them out unless the check asks for them (`mistakes: true`), and `uncounted` says what was left out.
Argument and result matchers are engine.tools.matching's; an `{llm_judge: criteria}` matcher asks the
suite's judge, so a check that holds one calls out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .judge import PASS_FAIL, ask, normalise_score
from .results import ToolCall
from .schema import Check, ToolCalled, ToolCallPattern, ToolNotCalled, ToolResult, ToolSequence
from .text import plural
from .tools.matching import Judge, is_judged, is_schema, matches, matches_all, show

if TYPE_CHECKING:
    from .checks import JudgeContext

# What a tool check answers: passed, the reason, and the positions (in the calls it was given) of the calls
# it matched: those it counted or found, those that broke it, or those whose result it read.
Graded = tuple[bool, str, list[int]]

ARGUMENT_JUDGE_JSON = '{"score": <1 if the value meets the criteria, 0 if not>, "reason": "<one sentence>"}'
ARGUMENT_JUDGE_SYSTEM = (
    "You decide whether a value an AI agent passed to a tool, or a tool gave back, meets the given criteria. "
    f"Answer with JSON only, no prose around it: {ARGUMENT_JUDGE_JSON}."
)


def argument_judge(judge: JudgeContext) -> Judge:
    """The `{llm_judge: criteria}` matcher's judge: the suite's judge model, charged to the check's context."""

    def decide(criteria: str, value: Any) -> tuple[bool, str]:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        messages = [
            {"role": "system", "content": ARGUMENT_JUDGE_SYSTEM},
            {
                "role": "user",
                "content": f"Criteria:\n{criteria}\n\nValue:\n{shown}\n\n"
                "Does the value meet the criteria? Respond with the JSON object only.",
            },
        ]
        verdict = ask(judge.client, judge.model, messages, judge.charge, temperature=judge.temperature,
                      expected=ARGUMENT_JUDGE_JSON, words=PASS_FAIL)  # fmt: skip
        ok = normalise_score(verdict.score) >= 0.5
        reason = verdict.reason or "no reason given"
        return (True, "") if ok else (False, f"{show(value)} does not meet {criteria!r}: {reason}")

    return decide


def judged(check: Check) -> bool:
    """Whether grading this tool check may call a judge: one of its matchers is an `{llm_judge}`."""
    spec = getattr(check, check.kind)
    patterns = spec.calls if isinstance(spec, ToolSequence) else [spec]
    matchers = [pattern.args for pattern in patterns]
    if isinstance(spec, ToolResult):
        matchers.append(spec.result)
    return any(is_judged(matcher) for matcher in matchers)


# --- reading ----------------------------------------------------------------------------------------------


def show_matcher(matcher: Any) -> str:
    """A matcher as a label shows it: `Paris`, `/2026-/`, `contains "21"`, `any`, `{city: Paris}`."""
    if isinstance(matcher, dict):
        keys = set(matcher)
        if keys == {"regex"}:
            return f"/{matcher['regex']}/"
        if keys == {"contains"}:
            return f"contains {json.dumps(str(matcher['contains']), ensure_ascii=False)}"
        if keys == {"any"}:
            return "any"
        if keys == {"llm_judge"}:
            return f"judged {json.dumps(str(matcher['llm_judge']), ensure_ascii=False)}"
        if is_schema(matcher):
            return "schema " + json.dumps(matcher, ensure_ascii=False)
        return "{" + ", ".join(f"{key}: {show_matcher(inner)}" for key, inner in matcher.items()) + "}"
    if isinstance(matcher, str) and matcher and not set(matcher) & set(",:{}[]\"'"):
        return matcher
    return json.dumps(matcher, ensure_ascii=False)


def pattern_label(pattern: ToolCallPattern) -> str:
    return f"{pattern.name} {show_matcher(pattern.args)}" if pattern.args else pattern.name


def _scope(spec) -> str:
    said = [
        words
        for words, on in (("conversation", spec.scope == "conversation"), ("mistakes too", spec.mistakes))
        if on
    ]
    return f" ({', '.join(said)})" if said else ""


def called_label(check: Check) -> str:
    spec: ToolCalled = check.tool_called
    counts = "".join(
        f" {key} {value}" for key in ("times", "min", "max") if (value := getattr(spec, key)) is not None
    )
    return f"tool_called {pattern_label(spec)}{counts}{_scope(spec)}"


def not_called_label(check: Check) -> str:
    return f"tool_not_called {pattern_label(check.tool_not_called)}{_scope(check.tool_not_called)}"


def sequence_label(check: Check) -> str:
    spec: ToolSequence = check.tool_sequence
    return f"tool_sequence {spec.mode} {' → '.join(pattern_label(p) for p in spec.calls)}{_scope(spec)}"


def result_label(check: Check) -> str:
    spec: ToolResult = check.tool_result
    which = pattern_label(ToolCallPattern(name=spec.name, args=spec.args)) if spec.name else "any tool"
    return f"tool_result {which} → {show_matcher(spec.result)}{_scope(spec)}"


# --- grading ------------------------------------------------------------------------------------------------


def _called_with(call: ToolCall) -> str:
    arguments = (
        json.dumps(call.arguments, ensure_ascii=False) if call.arguments is not None else call.raw_arguments
    )
    text = arguments if len(arguments) <= 120 else arguments[:119] + "…"
    return f"called {call.name} with {text}"


def _fits(pattern: ToolCallPattern, call: ToolCall, judge: Judge | None) -> tuple[bool, str]:
    """Whether a call is one the pattern describes, and why not."""
    if call.name != pattern.name:
        return False, f"{call.name} is not {pattern.name}"
    if not pattern.args:
        return True, ""
    if call.arguments is None:
        return False, f"its arguments are not a JSON object: {show(call.raw_arguments)}"
    return matches_all(pattern.args, call.arguments, judge)


def _nothing(where: str) -> str:
    return f"no tool calls {where}"


def _sequence(calls) -> str:
    return " → ".join(call.name for call in calls) or "no calls"


def tool_called(spec: ToolCalled, calls: list[ToolCall], judge: Judge | None, where: str) -> Graded:
    matched, missed = [], []
    for at, call in enumerate(calls):
        if call.name == spec.name:
            ok, why = _fits(spec, call, judge)  # once per call: a matcher may ask the judge
            (matched if ok else missed).append((at, why))
    ok, reason = _called_verdict(spec, calls, [at for at, _ in matched], missed, where)
    return ok, reason, [at for at, _ in matched]


def _called_verdict(
    spec: ToolCalled, calls: list[ToolCall], matched: list[int], missed: list[tuple[int, str]], where: str
) -> tuple[bool, str]:
    """tool_called's verdict on the calls of its tool that fit (`matched`) and those that do not."""
    named = matched or missed
    count = len(matched)
    if spec.times is not None:
        ok, wanted = count == spec.times, f"exactly {spec.times}"
    else:
        low = spec.min if spec.min is not None else (None if spec.max is not None else 1)
        ok = (low is None or count >= low) and (spec.max is None or count <= spec.max)
        wanted = " and ".join(
            words for words in (
                f"at least {low}" if low is not None else "", f"at most {spec.max}" if spec.max is not None else ""
            ) if words
        )  # fmt: skip
    matching = " with matching arguments" if spec.args else ""
    if ok:
        if count == 0:
            return True, f"{spec.name} not called{matching}, as allowed"
        return True, f"called {spec.name}{matching} {plural(count, 'time')}"
    if not calls:
        return False, _nothing(where)
    if not named:
        return (
            False,
            f"no call to {spec.name}; called {', '.join(dict.fromkeys(call.name for call in calls))}",
        )
    if count == 0:
        at, why = missed[0]
        call = calls[at]
        more = (
            f"; {plural(len(missed) - 1, 'other call')} to {spec.name} that do not match either"
            if len(missed) > 1
            else ""
        )
        return False, f"{_called_with(call)} ({why}){more}"
    return False, f"called {spec.name}{matching} {plural(count, 'time')}, expected {wanted}"


def tool_not_called(spec: ToolNotCalled, calls: list[ToolCall], judge: Judge | None, where: str) -> Graded:
    named = [call for call in calls if call.name == spec.name]
    matched = [at for at, call in enumerate(calls) if call.name == spec.name and _fits(spec, call, judge)[0]]
    if matched:
        more = f" (and {plural(len(matched) - 1, 'more call')})" if len(matched) > 1 else ""
        return False, f"{_called_with(calls[matched[0]])}{more}", matched
    if named:
        return True, f"{spec.name} called, but never with matching arguments", []
    return True, f"{spec.name} not called", []


def _matching(expected: list[ToolCallPattern], calls: list[ToolCall], fits) -> dict[int, int]:
    """A largest pairing of expected calls with actual ones that fit them (Kuhn's augmenting paths): expected
    index -> call index. Matchers may overlap, so first come first served could miss a full pairing."""
    paired: dict[int, int] = {}  # call index -> expected index

    def place(e: int, seen: set[int]) -> bool:
        for c in range(len(calls)):
            if c not in seen and fits(e, c):
                seen.add(c)
                if c not in paired or place(paired[c], seen):
                    paired[c] = e
                    return True
        return False

    for e in range(len(expected)):
        place(e, set())
    return {e: c for c, e in paired.items()}


def _why_missing(pattern: ToolCallPattern, calls: list[ToolCall], judge: Judge | None) -> str:
    """Why no call fits an expected one: the first call of that tool and what is wrong with its arguments."""
    for call in calls:
        if call.name == pattern.name:
            return f"{pattern.name}: {_called_with(call)} ({_fits(pattern, call, judge)[1]})"
    return f"{pattern.name} not called"


def tool_sequence(spec: ToolSequence, calls: list[ToolCall], judge: Judge | None, where: str) -> Graded:
    paired: list[int] = []  # the calls paired with an expected one, as the mode pairs them
    ok, reason = _sequence_of(spec, calls, judge, paired)
    return ok, reason, sorted(set(paired))


def _sequence_of(
    spec: ToolSequence, calls: list[ToolCall], judge: Judge | None, paired: list[int]
) -> tuple[bool, str]:
    expected = spec.calls
    cache: dict[tuple[int, int], tuple[bool, str]] = {}

    def fit(e: int, c: int) -> tuple[bool, str]:
        if (e, c) not in cache:
            cache[(e, c)] = _fits(expected[e], calls[c], judge)
        return cache[(e, c)]

    got = f"expected {_sequence(expected)}, got {_sequence(calls)}"
    if spec.mode == "strict":
        if [p.name for p in expected] != [call.name for call in calls]:
            return False, got
        paired.extend(number for number in range(len(expected)) if fit(number, number)[0])
        for number in range(len(expected)):
            ok, why = fit(number, number)
            if not ok:
                return False, f"call {number + 1} ({calls[number].name}): {why}"
        return True, f"called {_sequence(calls)}, as expected" if calls else "no tool calls, as expected"
    if spec.mode == "in_order":
        at = 0
        for number, pattern in enumerate(expected):
            while at < len(calls) and not fit(number, at)[0]:
                at += 1
            if at == len(calls):
                if not any(fit(number, c)[0] for c in range(len(calls))):
                    return False, f"{got}: {_why_missing(pattern, calls, judge)}"
                after = f" after {expected[number - 1].name}" if number else ""
                return False, f"{got}: no {pattern_label(pattern)}{after}"
            paired.append(at)
            at += 1
        return True, f"called {_sequence(expected)} in order, in {_sequence(calls)}"
    pairing = _matching(expected, calls, lambda e, c: fit(e, c)[0])
    paired.extend(pairing.values())
    missing = [expected[e] for e in range(len(expected)) if e not in pairing]
    used = set(pairing.values())
    extra = [call for c, call in enumerate(calls) if c not in used]
    problems = []
    if missing and spec.mode in ("unordered", "superset"):
        problems.append("missing " + "; ".join(_why_missing(pattern, calls, judge) for pattern in missing))
    if extra and spec.mode in ("unordered", "subset"):
        problems.append(f"unexpected {', '.join(call.name for call in extra)}")
    if problems:
        return False, f"{got}: {'; '.join(problems)}"
    how = {
        "unordered": "the expected calls, in any order",
        "superset": "every expected call, among others",
        "subset": "none but the expected calls",
    }[spec.mode]
    return True, f"called {_sequence(calls)}: {how}"


def _result_value(text: str) -> Any:
    """A result as its matcher reads it: the JSON value when it parses, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def tool_result(spec: ToolResult, calls: list[ToolCall], judge: Judge | None, where: str) -> Graded:
    def chosen_call(call: ToolCall) -> bool:
        if spec.name is not None and call.name != spec.name:
            return False
        return not spec.args or matches_all(spec.args, call.arguments or {}, judge)[0]

    chosen = [at for at, call in enumerate(calls) if chosen_call(call)]
    if not chosen:
        if not calls:
            return False, _nothing(where), []
        if spec.name is not None and spec.args and any(call.name == spec.name for call in calls):
            return False, _why_missing(ToolCallPattern(name=spec.name, args=spec.args), calls, judge), []
        which = f"no call to {spec.name}" if spec.name else "no call"
        matching = " with matching arguments" if spec.args else ""
        return False, f"{which}{matching}; called {', '.join(dict.fromkeys(c.name for c in calls))}", []
    misses = []
    for at in chosen:
        call = calls[at]
        ok, why = matches(spec.result, _result_value(call.result), judge)
        if ok:  # the result that satisfied the check is the one it credits
            return True, f"{call.name} returned {show(call.result)}", [at]
        misses.append(f"{call.name} returned {show(call.result)} ({why})")
    more = f"; {plural(len(misses) - 1, 'other result')} do not match either" if len(misses) > 1 else ""
    return False, misses[0] + more, chosen


def counted(spec, calls: list[ToolCall]) -> list[ToolCall]:
    """The calls a tool check counts: those carried out, and the model's mistakes too when it asks."""
    return list(calls) if spec.mistakes else [call for call in calls if not call.mistake]


def uncounted(spec, calls: list[ToolCall]) -> str:
    """What a check left out that it might have counted, in words to add to its reason; "" when nothing."""
    if spec.mistakes:
        return ""
    if isinstance(spec, ToolSequence):
        names = {pattern.name for pattern in spec.calls}
    else:
        names = {spec.name} if spec.name is not None else None
    left = [call for call in calls if call.mistake and (names is None or call.name in names)]
    if not left:
        return ""
    called = ", ".join(dict.fromkeys(call.name or "a function without a name" for call in left))
    return (
        f"; not counted: {plural(len(left), 'call')} to {called} rejected as the model's mistake "
        "(`mistakes: true` counts them)"
    )


GRADERS: dict[str, Callable[[Any, list[ToolCall], Judge | None, str], Graded]] = {
    "tool_called": tool_called,
    "tool_not_called": tool_not_called,
    "tool_sequence": tool_sequence,
    "tool_result": tool_result,
}
