"""The llm_judge check: the judge asked once per criterion, its scores read on the check's scale, weighted
criteria combined into one score on 0-1 (engine.checks wraps the outcome into the check's CheckResult).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .judge import (
    PASS_FAIL,
    Verdict,
    ask,
    expected_json,
    judge_messages,
    normalise_score,
    unit_score_note,
    written_messages,
)
from .results import CRITERION, CheckResult
from .schema import SCALES

if TYPE_CHECKING:
    from .checks import JudgeContext, Reply
    from .schema import JudgeSpec


def _judge_one(
    spec: JudgeSpec, criteria: str, reply: Reply, judge: JudgeContext
) -> tuple[float, str, Verdict, str | None]:
    """One judge call (two when its first answer cannot be read): the score on the spec's scale, the
    reason, the verdict as read, and a note when the score looks like one on another scale. Raises
    JudgeError when no answer can be read."""
    client, model = judge.for_model(spec.model)
    if spec.messages:
        written = [message.model_dump() for message in spec.messages]
        messages = written_messages(written, criteria, reply.conversation)
    else:
        messages = judge_messages(criteria, reply.conversation, spec.scale, spec.scope)
    temperature = spec.temperature if spec.temperature is not None else judge.temperature
    verdict = ask(
        client, model, messages, judge.charge, temperature=temperature, expected=expected_json(spec.scale),
        words=PASS_FAIL if spec.scale == "0-1" else None,  # PASS and FAIL are the ends of 0-1 only
    )  # fmt: skip
    raw = verdict.score
    if verdict.fraction and spec.scale != "0-1":  # "85/100" or "85%" is a share of full marks
        raw = verdict.score * SCALES[spec.scale][1]
    if spec.scale == "0-1":
        score = normalise_score(raw)  # judges asked for 0-1 sometimes answer out of 10 or 100
        note = "" if score == raw else f" (judge said {raw:g}, read as {score:.2f})"
    else:
        low, high, _ = SCALES[spec.scale]
        score = min(max(raw, low), high)
        note = "" if score == raw else f" (judge said {raw:g}, outside {spec.scale})"
    # Scored as given, but said: a judge that answers 0.8 on 0-100 most likely meant 80.
    scale_note = None if verdict.fraction else unit_score_note(raw, spec.scale)
    return score, (verdict.reason or "no reason given") + note, verdict, scale_note


def grade(spec: JudgeSpec, reply: Reply, judge: JudgeContext) -> tuple[bool, str, float, dict]:
    """The check graded: whether it passed, the reason, its score on 0-1, and what the CheckResult records
    beside them (the judged score and reason, the verdict as read, the criteria as children)."""
    scale = "" if spec.scale == "0-1" else f" on {spec.scale}"
    if isinstance(spec.criteria, str):
        score, reason, verdict, scale_note = _judge_one(spec, spec.criteria, reply, judge)
        ok = score >= spec.threshold
        recorded = {"judged": score, "judge_reason": reason, "scale_note": scale_note, **verdict.recorded()}
        return (
            ok,
            f"score {score:.2f}{scale} (threshold {spec.threshold:g}): {reason}",
            spec.normalise(score),
            recorded,
        )
    # Weighted criteria: each judged on its own, with its own verdict; the check scores their weighted mean.
    children, weighted, total, reasons = [], 0.0, 0.0, []
    for number, criterion in enumerate(spec.criteria, start=1):
        score, reason, verdict, scale_note = _judge_one(spec, criterion.criteria, reply, judge)
        name = criterion.name or f"criterion {number}"
        reasons.append(f"{name}: {reason}")
        normalised = spec.normalise(score)
        children.append(
            CheckResult(
                type=CRITERION,
                label=f"{name} (weight {criterion.weight:g})",
                passed=score >= spec.threshold,
                score=normalised,
                reason=f"score {score:.2f}{scale}: {reason}",
                judged=score,
                judge_reason=reason,
                scale_note=scale_note,
                **verdict.recorded(),
            )  # fmt: skip
        )
        weighted += criterion.weight * normalised
        total += criterion.weight
    # Rounded so that criteria all exactly at the threshold pass (0.1 * 0.7 + 0.2 * 0.7 is 0.69999...).
    overall = round(weighted / total, 9)
    threshold = round(spec.normalise(spec.threshold), 9)
    ok = overall >= threshold
    reason = f"weighted score {overall:.2f} (threshold {threshold:.2f} of 1) over {len(children)} criteria"
    low, high, _ = SCALES[spec.scale]
    judged = round(low + overall * (high - low), 9)
    return ok, reason, overall, {"children": children, "judged": judged, "judge_reason": "; ".join(reasons)}
