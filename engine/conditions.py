"""Termination conditions for simulated conversations (@agtlantis/eval's terminateWhen).

A condition is checked after every agent reply: `after_turns`, `field_equals` / `field_is_set` on the
JSON-parsed reply (a reply that is not JSON simply does not match), `natural_language` (the judge answers a
yes/no question with a confidence), any check of the check vocabulary, and `all` / `any` / `not`, nested.
"""

from __future__ import annotations

from .checks import JudgeContext, Reply, evaluate
from .judge import normalise_score, parse_verdict
from .schema import Check, Condition
from .transcript import format_transcript

NATURAL_LANGUAGE_SYSTEM = (
    "You watch a conversation between a user and an AI agent and answer a yes/no question about it. Answer "
    'with JSON only: {"score": <your confidence from 0 to 1 that the answer is yes>, "reason": "<one sentence>"}.'
)


def holds(condition: Condition, turn: int, reply: Reply, judge: JudgeContext) -> tuple[bool, str]:
    """Whether the condition holds after the agent's `turn`-th reply, and a label saying what decided it."""
    kind = condition.kind
    if kind == "all":
        labels = []
        for member in condition.all_:
            ok, label = holds(member, turn, reply, judge)
            if not ok:
                return False, f"not {label}"
            labels.append(label)
        return True, " and ".join(labels)
    if kind == "any":
        labels = []
        for member in condition.any_:
            ok, label = holds(member, turn, reply, judge)
            if ok:
                return True, label
            labels.append(label)
        return False, "none of: " + "; ".join(labels)
    if kind == "not":
        ok, label = holds(condition.not_, turn, reply, judge)
        return not ok, f"not ({label})"
    if kind == "after_turns":
        return turn >= condition.after_turns, f"after_turns {condition.after_turns}"
    if kind == "natural_language":
        return _natural_language(condition, reply, judge)
    value = getattr(condition, kind)
    check = Check.model_validate({kind: value.model_dump() if hasattr(value, "model_dump") else value})
    result = evaluate(check, reply, judge)
    return result.passed, result.label


def _natural_language(condition: Condition, reply: Reply, judge: JudgeContext) -> tuple[bool, str]:
    spec = condition.natural_language
    client, model = judge.for_model(spec.model)
    question = (
        f"Conversation:\n{format_transcript(reply.conversation)}\n\nQuestion: {spec.prompt}\n"
        "Respond with the JSON object only."
    )
    temperature = spec.temperature if spec.temperature is not None else judge.temperature
    completion = client.complete(model, [{"role": "system", "content": NATURAL_LANGUAGE_SYSTEM},
                                         {"role": "user", "content": question}], temperature=temperature)  # fmt: skip
    judge.charge(completion.usage, completion.cost)
    verdict = parse_verdict(completion.text)
    label = f'natural_language "{spec.prompt}"'
    if verdict.score is None:
        return False, f"{label} (judge answer unparseable)"
    confidence = normalise_score(verdict.score)  # 0-1, like llm_judge: "85" is 0.85, not certainty
    return (
        confidence >= spec.threshold,
        f"{label} (confidence {confidence:.2f}, threshold {spec.threshold:g})",
    )
