"""Evaluating checks against one reply.

Every check type is one entry of CHECK_TYPES: how it reads (its label, in transcripts and reports) and how
it grades a reply, side by side. The types themselves, and what a suite writes for each, are the fields
of engine.schema.CheckFields; a test keeps the two in step.

`evaluate_level` grades the plain checks of one level of a conversation tree and returns one CheckResult
per check item, in list order (follow-up-only items have no result). Checks that need a model (semantic,
llm_judge) call the judge client; an endpoint failure there raises EndpointError like any model call, and
so does a judge whose answer cannot be read even when asked again (JudgeError).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import fieldvalues, judge_checks, patterns, tool_checks
from .clients import ChatClient, EndpointError, estimate_tokens
from .codegrade.run import CodeScope, grade_code
from .matching import MISSING, glob_match, is_json_reply, json_field
from .meter import before_grading_call
from .results import CallRef, CheckResult, ToolCall, TurnRecord, Usage
from .schema import DEFAULT_EMBEDDING_MODEL, Check
from .text import plural
from .transcript import tool_calls_in


@dataclass
class Reply:
    text: str
    completion_tokens: int | None  # None when the endpoint did not report usage
    conversation: list[dict]  # every message so far, ending with this reply (tool exchanges included)
    tool_calls: list[ToolCall] = field(default_factory=list)  # this turn's, in the order the model made them
    # Every call of the conversation so far as recorded (the model's mistakes marked); None: read from
    # `conversation`, where nothing marks them.
    conversation_calls: list[ToolCall] | None = None
    # The conversation's turns before this one, whose calls (among `conversation_calls`) a `scope:
    # conversation` tool check credits by turn.
    earlier: Sequence[TurnRecord] = ()


@dataclass
class JudgeContext:
    client: ChatClient
    model: str
    # Resolves a model reference ("endpoint/model") for checks that name their own judge model.
    resolve: Callable[[str], tuple[ChatClient, str]] | None = None
    temperature: float | None = None  # the suite's judge_temperature, for checks that set none
    spent: Usage = field(default_factory=Usage)
    cost: float = 0.0
    # Where code checks run and what they are told of the eval; None where code graders are not allowed.
    code: CodeScope | None = None
    # How rubric judges send their rubric (the suite's rubric_prompt) and the system message they send with
    # it when it goes as written (judge_system).
    rubric_prompt: str = "evalsite"
    rubric_system: str | None = None

    def for_model(self, ref: str | None) -> tuple[ChatClient, str]:
        if ref is None:
            return self.client, self.model
        if self.resolve is None:
            return self.client, ref
        return self.resolve(ref)

    def charge(self, usage: Usage, cost: float) -> None:
        self.spent = self.spent + usage
        self.cost += cost


def _quote(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return f'"{text[: limit - 1]}…"' if len(text) > limit else f'"{text}"'


def label(check: Check) -> str:
    """How a check reads, e.g. match "*105*"; a follow-up-only item reads "follow-up"."""
    return CHECK_TYPES[check.kind].label(check) if check.kind else "follow-up"


def _result(check: Check, passed: bool, reason: str, score: float | None = None, **extra) -> CheckResult:
    if score is None:
        score = 1.0 if passed else 0.0
    return CheckResult(
        type=check.kind or "", label=label(check), passed=passed, score=score, reason=reason, **extra
    )


def _tokens(reply: Reply) -> tuple[int, str]:
    if reply.completion_tokens is None:
        return estimate_tokens(reply.text), " (estimated: the endpoint reported no usage)"
    return reply.completion_tokens, ""


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def json_equal(a, b) -> bool:
    """Equality as JSON means it: true is not 1 and false is not 0 (Python's == says they are)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def evaluate(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    try:
        return _evaluate(check, reply, judge)
    except (
        patterns.RegexFailure
    ) as exc:  # a pattern that ran out of time fails its check; the conversation goes on
        return _result(check, False, str(exc))


def _evaluate(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    if not check.kind:
        raise ValueError(f"not a check: {check!r}")
    return CHECK_TYPES[check.kind].evaluate(check, reply, judge)


# --- each check type: how it grades a reply -------------------------------------------------------------


def _match(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    ok = glob_match(check.match, reply.text)
    return _result(check, ok, "reply matches" if ok else "reply does not match")


def _not_match(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    ok = not glob_match(check.not_match, reply.text)
    return _result(check, ok, "reply does not match, as required" if ok else "reply matches, and must not")


def _regex(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    found = patterns.search(check.regex, reply.text)
    if found:
        return _result(check, True, f"found {_quote(found.group(0), 40)}")
    cut = f" in the first {patterns.MAX_CHARS:,} characters" if len(reply.text) > patterns.MAX_CHARS else ""
    return _result(check, False, f"no match found{cut}")


def _contains(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    ok = check.contains.lower() in reply.text.lower()
    return _result(check, ok, "substring found" if ok else "substring not found")


def _equals(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    text = reply.text.strip()
    ok = text == check.equals.strip()
    return _result(check, ok, "reply equals the expected text" if ok else f"reply is {_quote(text, 40)}")


def _starts_with(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    text = reply.text.lstrip()
    ok = text.startswith(check.starts_with)
    return _result(
        check, ok, "reply starts with the expected text" if ok else f"reply starts {_quote(text, 40)}"
    )


def _token_bound(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    tokens, note = _tokens(reply)
    bound = getattr(check, check.kind)
    ok = tokens >= bound if check.kind == "min_tokens" else tokens <= bound
    return _result(check, ok, f"{plural(tokens, 'completion token')}{note}")


def _word_bound(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    words = len(reply.text.split())
    bound = getattr(check, check.kind)
    ok = words >= bound if check.kind == "min_words" else words <= bound
    return _result(check, ok, plural(words, "word"))


def _semantic(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    spec = check.semantic
    before_grading_call()
    vectors, usage, cost = judge.client.embed(
        spec.model or DEFAULT_EMBEDDING_MODEL, [reply.text, spec.expected]
    )
    judge.charge(usage, cost)
    if len(vectors) != 2:
        raise EndpointError(f"embedding endpoint returned {len(vectors)} vectors for 2 inputs")
    similarity = cosine(vectors[0], vectors[1])
    ok = similarity >= spec.threshold
    return _result(
        check, ok, f"cosine similarity {similarity:.3f} (threshold {spec.threshold:g})", similarity
    )


def _field_equals(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    spec = check.field_equals
    value = json_field(reply.text, spec.path)
    if value is MISSING:
        if spec.optional and is_json_reply(reply.text):
            return _result(check, True, f"no {spec.path} in the reply, and it is optional")
        return _result(check, False, f"no {spec.path} in the reply (not JSON, or not set)")
    shown = f"{spec.path} is {json.dumps(value, ensure_ascii=False)[:60]}"
    if spec.tolerance is not None:
        actual, expected = fieldvalues.as_number(value), fieldvalues.as_number(spec.value)
        if actual is None or expected is None:
            return _result(check, False, f"{shown}, not a number" if actual is None else "expected no number")
        ok = fieldvalues.within(actual, expected, spec.tolerance, spec.relative)
        return _result(check, ok, f"{shown} (off by {abs(actual - expected):g})")
    if spec.date_formats is not None:
        actual = fieldvalues.as_date(value, spec.date_formats)
        expected = fieldvalues.as_date(spec.value, spec.date_formats)
        if actual is None or expected is None:
            return _result(check, False, f"{shown}, not a date" if actual is None else "expected no date")
        return _result(check, actual == expected, f"{shown} ({actual.isoformat()})")
    ok = json_equal(value, spec.value)
    return _result(check, ok, shown)


def _field_is_set(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    value = json_field(reply.text, check.field_is_set)
    ok = value is not MISSING and value is not None
    return _result(check, ok, f"{check.field_is_set} is set" if ok else f"{check.field_is_set} is not set")


def _is_json(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    try:
        json.loads(reply.text)
        parsed = True
    except ValueError:
        parsed = False
    ok = parsed == check.is_json
    return _result(check, ok, "the reply is JSON" if parsed else "the reply is not JSON")


def _code(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    answer = grade_code(check.code, reply.text, reply.conversation, judge.code)
    spec = check.code
    score = answer.score if answer.score is not None else (1.0 if answer.passed else 0.0)
    ok = answer.passed if answer.passed is not None else score >= spec.threshold - 1e-9
    verdict = (
        f"score {score:.2f} (threshold {spec.threshold:g})"
        if answer.passed is None
        else (f"{'pass' if ok else 'fail'}, score {score:.2f}")
    )
    return _result(check, ok, f"{verdict}: {answer.reason}" if answer.reason else verdict, score)


def _tool(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    spec = getattr(check, check.kind)
    if spec.scope == "conversation":
        calls = (
            reply.conversation_calls
            if reply.conversation_calls is not None
            else tool_calls_in(reply.conversation)
        )
        where = "in the conversation"
    else:
        calls, where = reply.tool_calls, "in this reply"
    matcher_judge = tool_checks.argument_judge(judge) if tool_checks.judged(check) else None
    looked_at = tool_checks.counted(spec, calls)
    ok, reason, matched = tool_checks.GRADERS[check.kind](spec, looked_at, matcher_judge, where)
    # Which of this turn's calls it matched, by position in the turn's calls, and which of the earlier turns'
    # by turn and position; a given history's calls are no turn's, so they count but are not credited.
    position = {id(call): at for at, call in enumerate(reply.tool_calls)}
    mine = sorted(position[id(looked_at[at])] for at in matched if id(looked_at[at]) in position)
    extra = {}
    if spec.scope == "conversation":
        places = {
            id(call): CallRef(turn=turn.turn, call=at)
            for turn in reply.earlier
            for at, call in enumerate(turn.tool_calls)
        }
        found = [places[id(looked_at[at])] for at in matched if id(looked_at[at]) in places]
        extra["matched_earlier_calls"] = sorted(found, key=lambda ref: (ref.turn, ref.call))
    return _result(check, ok, reason + tool_checks.uncounted(spec, calls), matched_calls=mine, **extra)


def _any_of(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    children = [evaluate(member, reply, judge) for member in check.or_ if member.kind]
    ok = any(child.passed for child in children)
    best = max((child.score or 0.0 for child in children), default=0.0)
    return _result(check, ok, "an option passed" if ok else "every option failed", best, children=children)


def _judge(check: Check, reply: Reply, judge: JudgeContext) -> CheckResult:
    ok, reason, score, recorded = judge_checks.grade(check.llm_judge, reply, judge)
    return _result(check, ok, reason, score, **recorded)


# --- each check type: how it reads -----------------------------------------------------------------------


def _quoted(check: Check) -> str:
    return f"{check.kind} {_quote(getattr(check, check.kind))}"


def _plain(check: Check) -> str:
    return f"{check.kind} {getattr(check, check.kind)}"


def _regex_label(check: Check) -> str:
    return f"regex /{check.regex}/"


def _semantic_label(check: Check) -> str:
    return f"semantic ≥ {check.semantic.threshold:g} {_quote(check.semantic.expected, 40)}"


def _judge_label(check: Check) -> str:
    criteria = check.llm_judge.criteria
    if isinstance(criteria, list):
        return f"llm_judge ({len(criteria)} weighted criteria)"
    return f"llm_judge {_quote(criteria, 50)}"


def _field_equals_label(check: Check) -> str:
    spec = check.field_equals
    value = json.dumps(spec.value, ensure_ascii=False)[:40]
    if spec.tolerance is not None:
        return (
            f"field_equals {spec.path} = {value} ± {spec.tolerance:g}{' (relative)' if spec.relative else ''}"
        )
    if spec.date_formats is not None:
        return f"field_equals {spec.path} = {value} (as a date)"
    return f"field_equals {spec.path} = {value}"


def _code_label(check: Check) -> str:
    spec = check.code
    what = spec.function if spec.function is not None else " ".join(spec.command)
    return f"code {_quote(what, 50)}"


def _any_of_label(check: Check) -> str:
    return "or(" + ", ".join(label(member) for member in check.or_ if member.kind) + ")"


def _judge_threshold(check: Check) -> float | None:
    spec = check.llm_judge
    return (
        spec.normalise(spec.threshold) if isinstance(spec.criteria, str) else None
    )  # on 0-1, like its score


# --- the table ---------------------------------------------------------------------------------------------


def _no_threshold(check: Check) -> float | None:
    return None


@dataclass(frozen=True)
class CheckType:
    """How a check type reads (`label`) and grades a reply (`evaluate`). A `scored` type's score says more
    than pass or fail (a similarity, a judge's score); `threshold` is the score it needs, when it has one.
    Stop conditions show both. `calls_out`, which every type must declare: grading calls a model or runs a
    program, so on an event loop it goes to a thread (an `or` calls out when one of its members does). A type
    that calls out only with some options (a tool check with an `{llm_judge}` matcher) says which checks do
    in `calls_out_if`."""

    label: Callable[[Check], str]
    evaluate: Callable[[Check, Reply, JudgeContext], CheckResult]
    scored: bool = False
    threshold: Callable[[Check], float | None] = _no_threshold
    calls_out: bool = field(kw_only=True)
    calls_out_if: Callable[[Check], bool] | None = field(default=None, kw_only=True)


# One entry per key of engine.schema.CHECK_KEYS, in its order.
CHECK_TYPES: dict[str, CheckType] = {
    "match": CheckType(_quoted, _match, calls_out=False),
    "not_match": CheckType(_quoted, _not_match, calls_out=False),
    "regex": CheckType(_regex_label, _regex, calls_out=False),
    "contains": CheckType(_quoted, _contains, calls_out=False),
    "equals": CheckType(_quoted, _equals, calls_out=False),
    "starts_with": CheckType(_quoted, _starts_with, calls_out=False),
    "min_tokens": CheckType(_plain, _token_bound, calls_out=False),
    "max_tokens": CheckType(_plain, _token_bound, calls_out=False),
    "min_words": CheckType(_plain, _word_bound, calls_out=False),
    "max_words": CheckType(_plain, _word_bound, calls_out=False),
    "semantic": CheckType(
        _semantic_label, _semantic, scored=True, threshold=lambda c: c.semantic.threshold, calls_out=True
    ),
    "llm_judge": CheckType(_judge_label, _judge, scored=True, threshold=_judge_threshold, calls_out=True),
    "field_equals": CheckType(_field_equals_label, _field_equals, calls_out=False),
    "field_is_set": CheckType(_plain, _field_is_set, calls_out=False),
    "code": CheckType(_code_label, _code, scored=True, threshold=lambda c: c.code.threshold, calls_out=True),
    "is_json": CheckType(
        lambda check: f"is_json {'true' if check.is_json else 'false'}", _is_json, calls_out=False
    ),
    "tool_called": CheckType(
        tool_checks.called_label, _tool, calls_out=True, calls_out_if=tool_checks.judged
    ),
    "tool_not_called": CheckType(
        tool_checks.not_called_label, _tool, calls_out=True, calls_out_if=tool_checks.judged
    ),
    "tool_sequence": CheckType(
        tool_checks.sequence_label, _tool, calls_out=True, calls_out_if=tool_checks.judged
    ),
    "tool_result": CheckType(
        tool_checks.result_label, _tool, calls_out=True, calls_out_if=tool_checks.judged
    ),
    "or": CheckType(_any_of_label, _any_of, calls_out=False),
}

# Check types that only read the reply: grading with nothing else never waits on a model or a program.
LOCAL_CHECKS = frozenset(key for key, check_type in CHECK_TYPES.items() if not check_type.calls_out)


def calls_out(check: Check) -> bool:
    """Whether grading this check may call a model or run a program (an `or`: one of its members may)."""
    if not check.kind:
        return False
    if check.kind == "or":
        return any(calls_out(member) for member in check.or_)
    entry = CHECK_TYPES[check.kind]
    return entry.calls_out and (entry.calls_out_if is None or entry.calls_out_if(check))


def evaluate_level(items: list[Check], reply: Reply, judge: JudgeContext) -> list[CheckResult]:
    return [evaluate(item, reply, judge) for item in items if item.kind]


def choose_followup(items: list[Check], results: list[CheckResult]) -> tuple[Check, str] | None:
    """The follow-up to send after a failed level, and why; None when there is none left.

    The first failed check (list order) that carries its own follow-up wins; for a failed `or` block that is
    the block's own follow-up, else the first member carrying one. Otherwise the level's first plain
    follow-up item. Results align with the items that are checks.
    """
    checks = [item for item in items if item.kind]
    failed = [(item, result) for item, result in zip(checks, results, strict=True) if not result.passed]
    for item, result in failed:
        if item.has_followup:
            return item, f"{result.label} failed"
        if item.kind == "or":
            carrier = next((member for member in item.or_ if member.has_followup), None)
            if carrier is not None:
                return carrier, f"{result.label} failed: every option failed"
    plain = next((item for item in items if not item.kind and item.has_followup), None)
    if plain is not None and failed:
        names = ", ".join(result.label for _, result in failed)
        return plain, f"{names} failed" if len(failed) == 1 else f"checks failed: {names}"
    return None
