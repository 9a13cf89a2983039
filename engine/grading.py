"""Graders and extractors for scripted turns (Letta Evals' graders and extractors).

An extractor picks the text to grade from the assistant's replies; a grader compares it with the ground
truth and gives a 0-1 score and a rationale.
"""

from __future__ import annotations

import json

from . import patterns
from .checks import JudgeContext
from .judge import JUDGE_SYSTEM, normalise_score, parse_verdict
from .matching import MISSING, json_field
from .results import TurnGrade
from .schema import Extractor
from .transcript import format_transcript

LAST_ASSISTANT = Extractor(kind="last_assistant")


def extract(extractor: Extractor | None, replies: list[str]) -> str:
    """The text to grade. `replies` are the assistant replies in view: one turn's, or the conversation's."""
    extractor = extractor or LAST_ASSISTANT
    if not replies:
        return ""
    last = replies[-1]
    kind = extractor.kind
    if kind in ("last_assistant", "last_turn"):
        return last
    if kind == "first_assistant":
        return replies[0]
    if kind == "all_assistant":
        return extractor.separator.join(replies)
    if kind == "pattern":
        found = patterns.search(extractor.pattern, last)  # RegexFailure: the caller fails the grade
        return (found.group(extractor.group) or "") if found else ""
    if kind == "after_marker":
        at = last.rfind(extractor.marker)
        return last[at + len(extractor.marker) :].strip() if at >= 0 else ""
    if kind == "json":
        value = json_field(last, extractor.path)
        if value is MISSING:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    raise ValueError(f"unknown extractor {kind}")


def _quote(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:59] + "…")


def grade(
    grader: str,
    *,
    turn: int,
    submission: str,
    ground_truth: str,
    threshold: float,
    judge: JudgeContext,
    rubric: str | None = None,
    input_text: str = "",
    conversation: list[dict] | None = None,
) -> TurnGrade:
    raw = None
    if grader == "exact_match":
        score = 1.0 if submission.strip() == ground_truth.strip() else 0.0
        rationale = (
            "exact match" if score else f"{_quote(submission.strip())} is not {_quote(ground_truth.strip())}"
        )
    elif grader == "contains":
        score = 1.0 if ground_truth.lower() in submission.lower() else 0.0
        rationale = (
            f"contains {_quote(ground_truth)}" if score else f"does not contain {_quote(ground_truth)}"
        )
    elif grader == "regex_match":
        try:
            found = patterns.search(ground_truth, submission)
        except patterns.InvalidPattern as exc:
            found, rationale = None, f"ground truth is not a valid regular expression: {exc.reason}"
        except patterns.RegexTimeout as exc:
            found, rationale = None, str(exc)
        else:
            rationale = f"matches /{ground_truth}/" if found else f"does not match /{ground_truth}/"
        score = 1.0 if found else 0.0
    elif grader == "llm_judge":
        score, rationale, raw = _rubric_judge(
            rubric or "", submission, ground_truth, input_text, conversation, judge
        )
    else:
        raise ValueError(f"unknown grader {grader}")
    return TurnGrade(
        turn=turn,
        score=score,
        passed=score >= threshold,
        rationale=rationale,
        submission=submission,
        ground_truth=ground_truth,
        grader=grader,
        raw=raw,
    )


def _rubric_judge(
    rubric: str,
    submission: str,
    ground_truth: str,
    input_text: str,
    conversation: list[dict] | None,
    judge: JudgeContext,
) -> tuple[float, str, str]:
    filled = rubric.format(input=input_text, ground_truth=ground_truth, submission=submission)
    transcript = format_transcript(conversation or [])
    user = (
        f"Conversation:\n{transcript}\n\n" if transcript else ""
    ) + f'{filled}\n\nRespond with the JSON object only: {{"score": <0 to 1>, "reason": "..."}}'
    completion = judge.client.complete(
        judge.model, [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
    )
    judge.charge(completion.usage, completion.cost)
    verdict = parse_verdict(completion.text)
    if verdict.score is None:
        return 0.0, "judge answer unparseable: expected JSON {score, reason}", completion.text
    return normalise_score(verdict.score), verdict.reason or "no reason given", completion.text
