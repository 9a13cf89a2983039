"""LLM judges: the prompt we send and the robust reading of what comes back.

The judge is asked for JSON {"score": 0..1, "reason": "..."}. We accept, in order: the whole answer as JSON,
the first JSON object embedded in prose or a code fence, then a bare number. Anything else is an
"unparseable" failure that keeps the raw text, never a silent zero.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .bounds import loads_json
from .transcript import format_transcript

# A judge's JSON sits near the start of its answer. Searching a pathological answer (megabytes of "{")
# from every brace would take minutes, so the search looks at a bounded number of starts and characters.
MAX_EMBEDDED_STARTS = 20
MAX_EMBEDDED_CHARS = 100_000

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


def judge_messages(
    criteria: str, conversation: list[dict], scale: str = "0-1", scope: str = "reply"
) -> list[dict]:
    transcript = format_transcript(conversation)
    target = "the whole conversation" if scope == "conversation" else "the assistant's final reply"
    user = (
        f"Criteria:\n{criteria}\n\n"
        f"Conversation:\n{transcript}\n\n"
        f"Grade {target} against the criteria. Respond with the JSON object only."
    )
    system = JUDGE_SYSTEM
    if scope == "conversation":
        system = system.replace("the assistant's final reply in a conversation", "a whole conversation")
    if scale != "0-1":
        system = system.replace("<number from 0 to 1>", "<score>").replace(
            "1 means the criteria are fully met, 0 means not at all.", f"The score is {SCALE_WORDS[scale]}."
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass
class Verdict:
    score: float | None  # None when nothing could be parsed
    reason: str
    parsed_from: str  # json | embedded-json | number | unparseable
    fraction: bool = False  # the score was given as a share of full marks ("7/10", "85%"), read as 0-1


# Each run of spaces has one place to go: adjacent `\s*`s made "5", 2,000 spaces and "x" take 30 s (cubic).
_NUMBER = re.compile(
    r"^\s*(?:score\s*[:=]\s*)?(-?\d+(?:\.\d+)?)\s*(/\s*(\d+(?:\.\d+)?)\s*)?(?:\.\s*)?$", re.I
)


def _score_from(value) -> tuple[float | None, bool]:
    """The score in a JSON value, and whether it is a share of full marks (a percentage)."""
    fraction = False
    if isinstance(value, bool):
        return (1.0 if value else 0.0), True
    if isinstance(value, (int, float)):
        score = float(value)
    elif isinstance(value, str):
        text = value.strip()
        fraction = text.endswith("%")
        try:
            score = float(text[:-1]) / 100 if fraction else float(text)
        except ValueError:
            return None, False
    else:
        return None, False
    return (score, fraction) if math.isfinite(score) else (None, False)  # NaN or Infinity is no verdict


def _from_object(obj) -> Verdict | None:
    if not isinstance(obj, dict):
        return None
    for key in ("score", "rating", "grade", "value"):
        if key in obj:
            score, fraction = _score_from(obj[key])
            if score is not None:
                reason = (
                    obj.get("reason")
                    or obj.get("reasoning")
                    or obj.get("explanation")
                    or obj.get("rationale")
                )
                return Verdict(score, str(reason or ""), "json", fraction)
    return None


def _embedded_objects(text: str):
    """Yields each balanced {...} substring, outermost first, ignoring braces inside strings."""
    text = text[:MAX_EMBEDDED_CHARS]
    starts = (i for i, char in enumerate(text) if char == "{")
    for _, start in zip(range(MAX_EMBEDDED_STARTS), starts, strict=False):
        depth, in_string, escaped = 0, False, False
        for end in range(start, len(text)):
            char = text[end]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : end + 1]
                    break


def parse_verdict(text: str) -> Verdict:
    stripped = text.strip()
    try:
        verdict = _from_object(loads_json(stripped))  # bounded nesting: no RecursionError on a hostile answer
        if verdict:
            return verdict
    except (ValueError, TypeError):
        pass
    for candidate in _embedded_objects(stripped):
        try:
            verdict = _from_object(loads_json(candidate))
        except (ValueError, TypeError):
            continue
        if verdict:
            verdict.parsed_from = "embedded-json"
            return verdict
    number = _NUMBER.match(stripped)
    if number:
        score = float(number.group(1))
        if number.group(3):
            score = score / float(number.group(3))
        return Verdict(score, "", "number", bool(number.group(3)))
    return Verdict(None, "", "unparseable")


def normalise_score(score: float) -> float:
    """Judges sometimes answer on 0-10 or 0-100 although asked for 0-1; map those back."""
    if score > 1.0:
        if score <= 10.0:
            return score / 10.0
        if score <= 100.0:
            return score / 100.0
        return 1.0
    return max(0.0, score)
