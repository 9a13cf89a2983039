"""AgentV's rubric criteria marked `required`, played on the fake OpenAI endpoint (a real HTTP server) as
AgentV scores them. A criterion's `required` (the default for a criterion) or a scored criterion's `min_score`
fails only the rubric grader's own verdict (llm-grader.ts calculateRubricScore / calculateScoreRangeResult);
AgentV passes the case on its score, the weighted mean of its graders' scores (orchestrator.ts
classifyQualityStatus). A rubric list that is itself `required` gates the case on the list's score, at its
`min_score` or else the threshold (orchestrator.ts `hasRequiredFailure`)."""

from __future__ import annotations

import pytest
import yaml

from engine.imports import convert
from tests.engine.promptfoo_play import judged, play, project, verdict

GUIDE = {
    "structure": "Has clear headings and organization",  # weight 1, required
    "success-codes": "Covers 2xx success codes with examples",  # weight 2, required
    "client-errors": "Explains 4xx client error codes",  # weight 2, required
    "server-errors": "Explains 5xx server error codes",  # weight 1.5
    "practical-examples": "Includes practical use case examples",  # weight 1
}


def imported():
    result = convert(project("agentv-rubric-required"))
    assert result.lost == []
    return result


def script(fake, *, missed=(), accuracy=1.0, gate=1.0, lenient=1.0) -> None:
    """The model's replies; the guide's criteria met but those `missed`; the summary's factual accuracy at
    `accuracy` (its brevity at 1); the two checklists scored `gate` and `lenient` by their judges."""
    fake.script("Write a guide explaining HTTP status codes", ["# Status codes\n200 OK, 404 Not Found."])
    fake.script("Summarize the climate report in under 50 words", ["Warming is accelerating."])
    fake.script("My order has not arrived.", ["Hello Ana, order 42 arrives Friday."])
    fake.script("Where is my parcel?", ["Hello Bo, parcel 7 is on its way."])
    fake.rule("Hello Ana, order 42", verdict(gate))
    fake.rule("Hello Bo, parcel 7", verdict(lenient))
    for name, criterion in GUIDE.items():
        fake.rule(criterion, verdict(0.0 if name in missed else 1.0, "judged"))
    fake.rule("factual_accuracy: score the reply", verdict(accuracy))
    fake.rule("brevity: score the reply", verdict(1.0))


def outcomes(report) -> dict[str, tuple[str, float]]:
    return {result.id: (result.status, result.score) for result in report.evals}


def test_a_required_criterion_missed_fails_only_the_rubric_not_the_case(fake_openai):
    script(fake_openai, missed={"structure"}, accuracy=0.7, gate=0.8, lenient=0.6)

    got = outcomes(play(fake_openai, imported()))

    # AgentV: the required `structure` (weight 1 of 7.5) missed makes the rubric's verdict fail, but the case
    # passes on its score, 6.5 / 7.5 = 0.87
    assert got["guide"] == ("passed", pytest.approx(6.5 / 7.5))
    # factual_accuracy at 0.7 is under its min_score 0.8, yet the score (0.7 + 1) / 2 = 0.85 passes
    assert got["summary"] == ("passed", pytest.approx(0.85))
    # the required checklist at 0.8 reaches the threshold; at 0.6 it reaches its min_score 0.6
    assert got["checklist-gate"] == ("passed", pytest.approx(0.9))
    assert got["lenient-gate"] == ("passed", pytest.approx(0.8))


def test_the_score_still_decides_and_a_required_list_gates_on_its_own_score(fake_openai):
    script(fake_openai, missed={"structure", "practical-examples"}, accuracy=0.5, gate=0.6, lenient=0.4)

    got = outcomes(play(fake_openai, imported()))

    assert got["guide"] == ("failed", pytest.approx(5.5 / 7.5))  # 0.73 < 0.8
    assert got["summary"] == ("failed", pytest.approx(0.75))
    # AgentV: the required checklist at 0.6 is under 0.8, so the case fails though (1 + 0.6) / 2 = 0.8;
    # the lenient one at 0.4 is under its min_score 0.6
    assert got["checklist-gate"][0] == "failed"
    assert got["lenient-gate"][0] == "failed"


def test_a_required_list_is_one_judge_of_the_whole_list_and_criteria_are_no_gates(fake_openai):
    result = imported()
    evals = {ev["id"]: ev for ev in yaml.safe_load(result.source)["evals"]}
    assert evals["guide"]["pass_rule"].get("required", []) == []
    assert evals["summary"]["pass_rule"].get("required", []) == []
    gate, lenient = evals["checklist-gate"], evals["lenient-gate"]
    assert gate["pass_rule"]["required"] == ["checklist"] and gate["graders"]["checklist"]["threshold"] == 0.8
    assert lenient["graders"]["checklist"]["threshold"] == 0.6  # its min_score
    assert any("not a gate on the eval" in line for line in result.mapped)

    script(fake_openai, gate=0.8)
    play(fake_openai, result)
    (prompt,) = judged(fake_openai, "Hello Ana, order 42")  # one judge call for the five criteria
    assert "Greets the customer by name" in prompt and "Ends with a question" in prompt
    assert "the score is their mean" in prompt


def test_a_v2_rubric_checklist_is_scored_on_the_weighted_share_met():
    v2 = """\
evalcases:
  - id: review
    outcome: Reviews the patch.
    input_messages:
      - {role: user, content: Review this patch.}
    rubrics:
      - {id: bugs, description: Finds the off-by-one bug, weight: 3, required: true}
      - {id: tone, description: Stays polite, weight: 1}
"""
    result = convert({"review.yaml": v2})
    outcome, checklist = yaml.safe_load(result.source)["evals"][0]["checks"]
    assert outcome["llm_judge"]["criteria"] == "The reply should achieve: Reviews the patch."
    criteria = checklist["llm_judge"]["criteria"]
    assert "the score is their weighted mean" in criteria
    assert "- Finds the off-by-one bug (weight 3)" in criteria and "(required)" not in criteria
