"""LLM judges: the prompt we send, asking again when the answer cannot be read, and the judge error.

The judge is asked for JSON {"score": 0..1, "reason": "..."}; its answer is read as judges write it
(engine.verdicts). An answer that still cannot be read is put back to the judge once, in the same
conversation, with what was wrong and the format expected. When that answer cannot be read either, the
judge has failed, not the model under test: `ask` raises JudgeError, an EndpointError, so the conversation
ends as an error like any failed call, never as a FAIL or a score of 0.
"""

from __future__ import annotations

from collections.abc import Callable

from .clients import ChatClient, EndpointError
from .meter import before_grading_call
from .results import Usage
from .schema.checks import JUDGE_PLACEHOLDER
from .transcript import format_transcript, message_text
from .verdicts import PASS_FAIL, YES_NO, Verdict, parse_verdict

__all__ = [
    "JUDGE_SYSTEM",
    "PASS_FAIL",
    "REASK",
    "SCALE_WORDS",
    "YES_NO",
    "JudgeError",
    "Verdict",
    "ask",
    "expected_json",
    "judge_messages",
    "normalise_score",
    "written_messages",
    "parse_verdict",
]

JUDGE_SYSTEM = (
    "You are a strict evaluation judge. You grade the assistant's final reply in a conversation against "
    "the given criteria. Answer with JSON only, no prose around it: "
    '{"score": <number from 0 to 1>, "reason": "<one or two sentences>"}. '
    "1 means the criteria are fully met, 0 means not at all."
)


SCALE_WORDS = {
    "0-1": "a number from 0 (not met at all) to 1 (fully met)",
    "0-100": "a number from 0 (not met at all) to 100 (fully met)",
    "-3..3": "an integer from -3 (the opposite of the criteria) through 0 (neutral) to 3 (fully met)",
}


# What a judge of each scope is asked to grade, in its user message and in its system message.
SCOPE_TARGETS = {
    "conversation": "the whole conversation",
    "trajectory": "the agent's trajectory (the tools it called, with which arguments and in what order, and "
    "what it made of their results)",
}
SCOPE_SYSTEM = {
    "conversation": "a whole conversation",
    "trajectory": "an AI agent's trajectory in a conversation: its tool calls, their results and its replies,",
}


def judge_messages(
    criteria: str, conversation: list[dict], scale: str = "0-1", scope: str = "reply"
) -> list[dict]:
    transcript = format_transcript(conversation)
    target = SCOPE_TARGETS.get(scope, "the assistant's final reply")
    user = (
        f"Criteria:\n{criteria}\n\n"
        f"Conversation:\n{transcript}\n\n"
        f"Grade {target} against the criteria. Respond with the JSON object only."
    )
    system = JUDGE_SYSTEM
    if scope in SCOPE_SYSTEM:
        system = system.replace("the assistant's final reply in a conversation", SCOPE_SYSTEM[scope])
    if scale != "0-1":
        system = system.replace("<number from 0 to 1>", "<score>").replace(
            "1 means the criteria are fully met, 0 means not at all.", f"The score is {SCALE_WORDS[scale]}."
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def written_messages(written: list[dict], criteria: str, conversation: list[dict]) -> list[dict]:
    """A judge's own prompt (`llm_judge.messages`) with its placeholders filled: {{criteria}}, {{input}}
    (the last user message before the reply), {{output}} (the reply) and {{conversation}} (the transcript
    up to the reply, as evalsite's own prompt shows it). Filled in one pass, so text put in is never read
    for placeholders."""
    last = max((i for i, m in enumerate(conversation) if m.get("role") == "assistant"), default=None)
    before = conversation if last is None else conversation[:last]
    values = {
        "criteria": criteria,
        "input": next((message_text(m) for m in reversed(before) if m.get("role") == "user"), ""),
        "output": "" if last is None else message_text(conversation[last]),
        "conversation": format_transcript(conversation if last is None else conversation[: last + 1]),
    }
    fill = lambda found: values.get(found.group(1), found.group(0))  # noqa: E731
    return [{"role": m["role"], "content": JUDGE_PLACEHOLDER.sub(fill, m["content"])} for m in written]


def normalise_score(score: float) -> float:
    """Judges sometimes answer on 0-10 or 0-100 although asked for 0-1; map those back."""
    if score > 1.0:
        if score <= 10.0:
            return score / 10.0
        if score <= 100.0:
            return score / 100.0
        return 1.0
    return max(0.0, score)


def unit_score_note(score: float, scale: str) -> str | None:
    """A note when a judge asked for a score on `scale` answers what looks like a 0-1 score instead: a
    fraction strictly between 0 and 1 on a scale whose scores are whole numbers ("0.8 on a 0–100 scale")."""
    if scale == "0-1" or not 0.0 < score < 1.0:
        return None
    shown = scale.replace("-", "–", 1) if scale[0] != "-" else scale
    return f"{score:g} on a {shown} scale: looks like a 0–1 score"


# Said to a judge whose answer could not be read, in the same conversation, before it answers once more.
REASK = "Your answer could not be read: {error}. Answer again with the JSON object only, no other text: {expected}"
ANSWER_SHOWN = 300  # characters of an unreadable answer quoted in the conversation's error


def expected_json(scale: str = "0-1") -> str:
    """The JSON object a judge on `scale` is asked for, as its system prompt words it."""
    score = "<number from 0 to 1>" if scale == "0-1" else "<score>"
    return f'{{"score": {score}, "reason": "<one or two sentences>"}}'


class JudgeError(EndpointError):
    """A judge answered twice with nothing that could be read as a verdict. Like any failed endpoint call it
    ends the conversation as an error, with the judge's answers in the message (redacted like every
    EndpointError): the judge's failure is not the model's."""


def _shown(answer: str) -> str:
    text = " ".join(answer.split())
    return repr(text if len(text) <= ANSWER_SHOWN else text[: ANSWER_SHOWN - 1] + "…")


def ask(
    client: ChatClient,
    model: str,
    messages: list[dict],
    charge: Callable[[Usage, float], None],
    *,
    temperature: float | None = None,
    expected: str | None = None,
    words: dict[str, float] | None = None,
) -> Verdict:
    """The judge's verdict on `messages`; asked once more when its answer cannot be read. Every call is
    charged. Raises JudgeError when the second answer cannot be read either, EndpointError when a call
    fails. The temperature is sent only when set: a ChatClient without the keyword keeps working."""
    options = {} if temperature is None else {"temperature": temperature}
    before_grading_call()
    completion = client.complete(model, messages, **options)
    charge(completion.usage, completion.cost)
    first = parse_verdict(completion.text, words=words)
    if first.score is not None:
        return first
    again = [
        *messages,
        {"role": "assistant", "content": completion.text},
        {"role": "user", "content": REASK.format(error=first.error, expected=expected or expected_json())},
    ]
    before_grading_call()
    completion = client.complete(model, again, **options)
    charge(completion.usage, completion.cost)
    second = parse_verdict(completion.text, words=words)
    if second.score is None:
        raise JudgeError(
            f"judge {model} gave no verdict that could be read, asked twice: its answer {_shown(first.raw)} "
            f"({first.error}), then {_shown(second.raw)} ({second.error})"
        )
    second.first_answer = first.raw
    return second
