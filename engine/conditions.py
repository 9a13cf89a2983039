"""Termination conditions for simulated conversations (@agtlantis/eval's terminateWhen).

A condition is checked after every agent reply: `after_turns`, `field_equals` / `field_is_set` on the
JSON-parsed reply (a reply that is not JSON simply does not match), `natural_language` (the judge answers a
yes/no question with a confidence; an answer it cannot give readably is a JudgeError, as for llm_judge), any check of the check vocabulary, and `all` / `any` / `not`, nested.

Each evaluation gives a ConditionResult tree (what every member said, and the judge's answers with their
tokens) and a label naming what decided it, for the termination reason.
"""

from __future__ import annotations

from .checks import CHECK_TYPES, JudgeContext, Reply, evaluate, label
from .judge import YES_NO, ask, normalise_score
from .results import ConditionResult, Usage
from .schema import Check, Condition
from .transcript import format_transcript

NATURAL_LANGUAGE_JSON = (
    '{"score": <your confidence from 0 to 1 that the answer is yes>, "reason": "<one sentence>"}'
)
NATURAL_LANGUAGE_SYSTEM = (
    "You watch a conversation between a user and an AI agent and answer a yes/no question about it. Answer "
    f"with JSON only: {NATURAL_LANGUAGE_JSON}."
)
COMBINATORS = ("all", "any", "not")


def holds(condition: Condition, turn: int, reply: Reply, judge: JudgeContext) -> tuple[bool, str]:
    """Whether the condition holds after the agent's `turn`-th reply, and a label saying what decided it."""
    result, decided = evaluate_condition(condition, turn, reply, judge)
    return bool(result.met), decided


def evaluate_condition(
    condition: Condition, turn: int, reply: Reply, judge: JudgeContext
) -> tuple[ConditionResult, str]:
    """The condition evaluated after the agent's `turn`-th reply, as a tree of results, and a label saying
    what decided it. `all` and `any` stop at the first member that decides them: the judge is not asked
    about the others, which are recorded as not evaluated."""
    kind = condition.kind
    if kind in ("all", "any"):
        members = condition.all_ if kind == "all" else condition.any_
        deciding = kind == "any"  # the member outcome that decides the combinator
        children, labels = [], []
        for number, member in enumerate(members):
            child, decided = evaluate_condition(member, turn, reply, judge)
            children.append(child)
            labels.append(decided)
            if child.met is deciding:
                skipped = "an earlier member held" if deciding else "an earlier member did not hold"
                children += [_not_evaluated(rest, skipped) for rest in members[number + 1 :]]
                met = deciding
                break
        else:
            met = not deciding
        if kind == "all":
            decided = " and ".join(labels) if met else f"not {labels[-1]}"
        else:
            decided = labels[-1] if met else "none of: " + "; ".join(labels)
        return ConditionResult(kind=kind, label=kind, met=met, children=children), decided
    if kind == "not":
        child, decided = evaluate_condition(condition.not_, turn, reply, judge)
        return ConditionResult(kind=kind, label=kind, met=not child.met, children=[child]), f"not ({decided})"
    if kind == "after_turns":
        bound = condition.after_turns
        met = turn >= bound
        reason = f"turn {turn} {'≥' if met else '<'} {bound}"
        return ConditionResult(kind=kind, label=condition_label(condition), met=met, reason=reason), (
            f"after_turns {bound}"
        )
    outer_spent, outer_cost = judge.spent, judge.cost
    judge.spent, judge.cost = Usage(), 0.0  # metered on its own, then added back to the turn's judge usage
    try:
        if kind == "natural_language":
            result, decided = _natural_language(condition, reply, judge)
        else:
            result, decided = _check(condition, reply, judge)
        if judge.spent != Usage() or judge.cost:
            result.usage, result.cost = judge.spent, judge.cost
    finally:
        judge.spent, judge.cost = outer_spent + judge.spent, outer_cost + judge.cost
    return result, decided


def condition_label(condition: Condition) -> str:
    """How a condition reads, before it is evaluated."""
    kind = condition.kind
    if kind in COMBINATORS:
        return kind
    if kind == "after_turns":
        return f"after_turns {condition.after_turns}"
    if kind == "natural_language":
        return f'natural_language "{condition.natural_language.prompt}"'
    return label(_as_check(condition))


def _not_evaluated(condition: Condition, why: str) -> ConditionResult:
    members = {"all": condition.all_, "any": condition.any_, "not": [condition.not_]}.get(condition.kind, [])
    return ConditionResult(
        kind=condition.kind,
        label=condition_label(condition),
        met=None,
        reason=f"not evaluated: {why}",
        children=[_not_evaluated(member, why) for member in members],
    )


def _as_check(condition: Condition) -> Check:
    kind = condition.kind
    value = getattr(condition, kind)
    return Check.model_validate({kind: value.model_dump() if hasattr(value, "model_dump") else value})


def _check(condition: Condition, reply: Reply, judge: JudgeContext) -> tuple[ConditionResult, str]:
    check = _as_check(condition)
    result = evaluate(check, reply, judge)
    check_type = CHECK_TYPES[check.kind]
    condition_result = ConditionResult(
        kind=check.kind,
        label=result.label,
        met=result.passed,
        reason=result.reason,
        score=result.score if check_type.scored else None,
        threshold=check_type.threshold(check),
        raw=result.raw,
        parsed_from=result.parsed_from,
        read_from=result.read_from,
        first_answer=result.first_answer,
    )
    return condition_result, result.label


def _natural_language(condition: Condition, reply: Reply, judge: JudgeContext) -> tuple[ConditionResult, str]:
    spec = condition.natural_language
    client, model = judge.for_model(spec.model)
    question = (
        f"Conversation:\n{format_transcript(reply.conversation)}\n\nQuestion: {spec.prompt}\n"
        "Respond with the JSON object only."
    )
    temperature = spec.temperature if spec.temperature is not None else judge.temperature
    messages = [{"role": "system", "content": NATURAL_LANGUAGE_SYSTEM}, {"role": "user", "content": question}]
    verdict = ask(
        client, model, messages, judge.charge, temperature=temperature, expected=NATURAL_LANGUAGE_JSON,
        words=YES_NO,
    )  # fmt: skip
    label = condition_label(condition)
    confidence = normalise_score(verdict.score)  # 0-1, like llm_judge: "85" is 0.85, not certainty
    result = ConditionResult(
        kind="natural_language",
        label=label,
        met=confidence >= spec.threshold,
        reason=verdict.reason or "no reason given",
        confidence=confidence,
        threshold=spec.threshold,
        **verdict.recorded(),
    )
    return result, f"{label} (confidence {confidence:.2f}, threshold {spec.threshold:g})"
