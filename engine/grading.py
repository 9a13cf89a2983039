"""Graders and extractors for scripted turns (Letta Evals' graders and extractors).

An extractor picks the text to grade from the assistant's replies; a grader compares it with the ground
truth and gives a 0-1 score and a rationale.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from . import patterns
from .checks import JudgeContext, Reply, evaluate
from .judge import JUDGE_SYSTEM, PASS_FAIL, Verdict, ask, normalise_score
from .matching import MISSING, json_field
from .results import ToolCall, TurnGrade
from .schema import Extractor
from .transcript import format_transcript, role_lines

LAST_ASSISTANT = Extractor(kind="last_assistant")


def extract(
    extractor: Extractor | None,
    replies: list[str],
    calls: Sequence[ToolCall] = (),
    conversation: Sequence[dict] = (),
) -> str:
    """The text to grade. `replies` are the assistant replies in view: one turn's, or the conversation's;
    `calls` the tool calls in view, the same way; `conversation` every message so far, given ones too, which
    the transcript extractor reads."""
    extractor = extractor or LAST_ASSISTANT
    kind = extractor.kind
    if kind in ("tool_arguments", "tool_output"):
        return _tool_extract(kind, extractor.tool_name, calls)
    if kind == "transcript":
        return role_lines(list(conversation))
    if not replies:
        return ""
    last = replies[-1]
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


def _tool_extract(kind: str, name: str, calls: Sequence[ToolCall]) -> str:
    """Letta's tool extractors: the first call of the named tool in view, its arguments as the model wrote them
    ("{}" when the tool was not called) or the result sent back ("" when it was not called)."""
    call = next((call for call in calls if call.name == name), None)
    if kind == "tool_arguments":
        return call.raw_arguments or "{}" if call is not None else "{}"
    return call.result if call is not None else ""


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
    read: dict = {}  # how an llm_judge's answer was read
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
        verdict = _rubric_judge(
            rubric or "", submission, ground_truth, input_text, conversation, judge, judge.temperature
        )
        score, rationale, read = normalise_score(verdict.score), verdict.reason, verdict.recorded()
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
        **read,
    )


RUBRIC_JSON = '{"score": <0 to 1>, "reason": "..."}'


def _rubric_judge(
    rubric: str,
    submission: str,
    ground_truth: str,
    input_text: str,
    conversation: list[dict] | None,
    judge: JudgeContext,
    temperature: float | None = None,
) -> Verdict:
    """The judge's verdict on the filled rubric, its reason given ("no reason given" when it gave none).
    Raises JudgeError when its answer cannot be read, even asked again."""
    filled = rubric.format(input=input_text, ground_truth=ground_truth, submission=submission)
    if judge.rubric_prompt == "as_written":
        # The filled rubric is the judge's whole message (Letta Evals sends it so): no transcript, no
        # instructions of ours; the JSON format is asked for only if the first answer cannot be read.
        system = [{"role": "system", "content": judge.rubric_system}] if judge.rubric_system else []
        messages = [*system, {"role": "user", "content": filled}]
    else:
        transcript = format_transcript(conversation or [])
        user = (
            f"Conversation:\n{transcript}\n\n" if transcript else ""
        ) + f"{filled}\n\nRespond with the JSON object only: {RUBRIC_JSON}"
        messages = [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
    verdict = ask(
        judge.client, judge.model, messages, judge.charge, temperature=temperature, expected=RUBRIC_JSON,
        words=PASS_FAIL,
    )  # fmt: skip
    verdict.reason = verdict.reason or "no reason given"
    return verdict


# --- named graders ---------------------------------------------------------------------------------------


def grade_named(
    name: str,
    grader,
    *,
    turn: int,
    replies: list[str],
    ground_truth: str | None,
    input_text: str,
    conversation: list[dict],
    judge: JudgeContext,
    default_extractor: Extractor | None,
    default_threshold: float | None,
    calls: Sequence[ToolCall] = (),
    conversation_calls: Sequence[ToolCall] | None = None,
) -> TurnGrade:
    """One named grader's grade of a turn (`replies` holds its reply, `calls` its tool calls) or of a
    conversation (every live reply and tool call; the extractor picks). A check grader grades the last reply
    with its check, or what its own extractor takes (never the suite's default one), its tool checks reading
    the calls in view (`conversation_calls`: the conversation's, as recorded); a judge uses its own model and
    temperature, and is charged to `judge`."""
    threshold = grader.threshold if grader.threshold is not None else default_threshold
    threshold = 1.0 if threshold is None else threshold
    truth = ground_truth or ""
    try:
        if grader.kind == "check":
            submission = replies[-1] if replies else ""
            if grader.extractor is not None:
                submission = extract(grader.extractor, replies, calls, conversation)
        else:
            submission = extract(grader.extractor or default_extractor, replies, calls, conversation)
    except patterns.RegexFailure as exc:
        return TurnGrade(turn=turn, score=0.0, passed=False, rationale=f"extractor: {exc}", submission="",
                         ground_truth=truth, grader=grader.kind, name=name, threshold=threshold)  # fmt: skip
    if grader.kind == "check":
        known = None if conversation_calls is None else list(conversation_calls)
        result = evaluate(grader.check, Reply(submission, None, conversation, list(calls), known), judge)
        score = min(1.0, max(0.0, result.score if result.score is not None else float(result.passed)))
        passed = result.passed and score >= threshold if grader.threshold is not None else result.passed
        return TurnGrade(
            turn=turn, score=score, passed=passed, rationale=f"{result.label}: {result.reason}",
            submission=submission, ground_truth=truth, grader="check", raw=result.raw,
            parsed_from=result.parsed_from, read_from=result.read_from, first_answer=result.first_answer,
            name=name, threshold=threshold,
        )  # fmt: skip
    if grader.kind == "llm_judge":
        client, model = judge.for_model(grader.model)
        temperature = grader.temperature if grader.temperature is not None else judge.temperature
        scoped = JudgeContext(client, model, judge.resolve, temperature, rubric_prompt=judge.rubric_prompt,
                              rubric_system=judge.rubric_system)  # fmt: skip
        verdict = _rubric_judge(grader.rubric or "", submission, truth, input_text, conversation, scoped,
                                temperature)  # fmt: skip
        judge.charge(scoped.spent, scoped.cost)
        score = normalise_score(verdict.score)
        return TurnGrade(turn=turn, score=score, passed=score >= threshold, rationale=verdict.reason,
                         submission=submission, ground_truth=truth, grader="llm_judge", name=name,
                         threshold=threshold, **verdict.recorded())  # fmt: skip
    graded = grade(grader.kind, turn=turn, submission=submission, ground_truth=truth, threshold=threshold,
                   judge=judge)  # fmt: skip
    return graded.model_copy(update={"name": name, "threshold": threshold})
