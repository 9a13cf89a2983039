"""Named graders through the engine, against the real fake endpoint: a score per grader per turn,
the judge grader's own model and temperature on the wire, pass rules, and every gate kind, by hand."""

from __future__ import annotations

import json
import os

import pytest

from engine.clients import EndpointConfig, EndpointRegistry
from engine.loader import load_suite
from engine.runner import run_suite
from engine.source import SuiteError
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

SUITE = """\
name: letta-style
model: agent
judge: judge
graders:
  quality:
    kind: llm_judge
    rubric: "Is {submission} right for {input}? Expected {ground_truth}."
    model: grader-model
    temperature: 0.3
    threshold: 0.7
  ascii_only: {regex: "^[ -~]*$"}
pass_rule: {weighted_average: {quality: 0.7, ascii_only: 0.3}, threshold: 0.75}
gates:
  - {weighted_average: {quality: 0.7, ascii_only: 0.3}, op: ">=", value: 0.75}
  - {metric: avg, grader: quality, value: 0.7}
  - logical_and:
      - {metric: accuracy, grader: ascii_only, value: 1}
      - logical_or: [{metric: min, grader: quality, value: 0.9}, {metric: avg, value: 0.5}]
evals:
  - id: capitals
    input: [Capital of France?, Capital of Peru?]
    ground_truth: [Paris, Lima]
  - id: greeting
    input: Say hello.
    ground_truth: Hello
"""


def registry(fake) -> EndpointRegistry:
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    return EndpointRegistry(config)


def verdict(score: float) -> str:
    return json.dumps({"score": score, "reason": f"says {score}"})


@pytest.fixture
def report(fake_openai):
    fake_openai.rule("Capital of France?", "Paris", model="agent")
    fake_openai.rule("Capital of Peru?", "Lima é", model="agent")  # not ASCII
    fake_openai.rule("Say hello.", "Hello!", model="agent")
    fake_openai.rule("Is Paris right", verdict(1.0), where="any", model="grader-model")
    fake_openai.rule("Is Lima é right", verdict(0.6), where="any", model="grader-model")
    fake_openai.rule("Is Hello! right", verdict(0.8), where="any", model="grader-model")
    return run_suite(load_suite(SUITE), registry(fake_openai), concurrency=1)


def test_a_score_per_grader_per_turn(report, fake_openai):
    capitals, greeting = report.evals
    first, second = capitals.turns
    assert [(g.name, g.score, g.passed) for g in first.grades] == [
        ("quality", 1.0, True),
        ("ascii_only", 1.0, True),
    ]
    assert [(g.name, g.score, g.passed) for g in second.grades] == [
        ("quality", 0.6, False),
        ("ascii_only", 0.0, False),
    ]
    assert second.grades[0].rationale == "says 0.6" and second.grades[0].threshold == 0.7
    # The turns are counted as their marks say: the second failed its graders.
    assert (capitals.turns_passed, capitals.turns_total) == (1, 2)
    assert [turn.passed for turn in capitals.turns] == [True, False]
    # Per eval: each grader's turns by mean (quality 0.8, ascii 0.5); the weighted rule 0.7*0.8 + 0.3*0.5 = 0.71.
    assert [(g.name, g.score, g.passed, g.turns_graded) for g in capitals.graders] == [
        ("quality", pytest.approx(0.8), True, 2), ("ascii_only", 0.5, False, 2),
    ]  # fmt: skip
    assert capitals.score == pytest.approx(0.71) and capitals.status == "failed"
    assert capitals.verdict == (
        "weighted score 0.71 < 0.75: quality 0.80 ≥ 0.70, ascii_only 0.50 < 1.00; 1 of 2 turns passed"
    )
    # A single ground truth: the conversation graded once, its grade kept with the eval's results.
    assert [(g.name, g.score) for g in greeting.graders] == [("quality", 0.8), ("ascii_only", 1.0)]
    assert greeting.graders[0].grades[0].raw == verdict(0.8) and greeting.turns[0].grades == []
    assert greeting.score == pytest.approx(0.86) and greeting.status == "passed"
    # The judge grader's own model and temperature went on the wire.
    judged = [r for r in fake_openai.chat_requests() if r["model"] == "grader-model"]
    assert len(judged) == 3 and {r["temperature"] for r in judged} == {0.3}
    assert greeting.totals.judge_tokens > 0


def test_every_gate_kind_by_hand(report):
    weighted, quality, logical = report.gates
    # weighted: capitals 0.71, greeting 0.86 -> avg 0.785
    assert (weighted.kind, weighted.actual, weighted.passed) == (
        "weighted_average",
        pytest.approx(0.785),
        True,
    )
    assert weighted.label == "avg of (0.7×quality + 0.3×ascii_only) >= 0.75"
    assert (quality.actual, quality.passed, quality.label) == (pytest.approx(0.8), True, "quality avg >= 0.7")
    accuracy, either = logical.children
    assert (accuracy.actual, accuracy.passed) == (0.5, False)  # ascii_only passed greeting only
    low, eval_avg = either.children
    assert (low.actual, low.passed, eval_avg.actual, eval_avg.passed) == (
        0.8,
        False,
        pytest.approx(0.785),
        True,
    )
    assert either.passed and not logical.passed and logical.kind == "logical_and"
    assert report.status == "failed"


def test_pass_rules_all_and_any(fake_openai):
    fake_openai.rule("Say hello.", "Hello é", model="agent")
    fake_openai.rule("Is Hello é right", verdict(0.9), where="any")
    base = SUITE.replace(
        "pass_rule: {weighted_average: {quality: 0.7, ascii_only: 0.3}, threshold: 0.75}\n", ""
    )
    source = base.split("gates:")[0] + "evals:\n  - {id: greeting, input: Say hello., ground_truth: Hello}\n"
    (all_of,) = run_suite(load_suite(source), registry(fake_openai), concurrency=1).evals
    assert all_of.status == "failed"
    assert all_of.verdict == "1 of 2 graders passed: quality 0.90 ≥ 0.70, ascii_only 0.00 < 1.00"
    assert all_of.score == pytest.approx(0.45)  # the graders' mean: (0.9 + 0) / 2
    (any_of,) = run_suite(load_suite(source.replace("graders:\n", "pass_rule: any\ngraders:\n")),
                          registry(fake_openai), concurrency=1).evals  # fmt: skip
    assert any_of.status == "passed"
    assert (
        any_of.verdict == "1 of 2 graders passed, one is enough: quality 0.90 ≥ 0.70, ascii_only 0.00 < 1.00"
    )


@pytest.mark.parametrize(
    ("change", "where", "needle"),
    [
        (("{metric: avg, grader: quality, value: 0.7}", "{metric: avg, grader: qualty, value: 0.7}"),
         "gates[1].grader", "no grader named 'qualty'"),
        (("weighted_average: {quality: 0.7, ascii_only: 0.3}, threshold", "weighted_average: {quality: 0.7, asci: 0.3}, threshold"),
         "pass_rule.weighted_average.asci", "no grader named 'asci'"),
        (("  ascii_only: {regex:", "  ascii only: {regex:"), "graders.ascii only", "grader name 'ascii only'"),
        (("    rubric: \"Is", "    rubric_file: missing.md\n    rubric: \"Is"), "graders.quality", "one of them"),
        (("    ground_truth: Hello\n", "    checks: [{contains: Hello}]\n    graders: {exact: {kind: exact_match}}\n"),
         "evals[1]", "graded by `exact` (exact_match), which needs a `ground_truth`"),
        (("logical_and:\n", "logical_and:\n      - {metric: avg, value: 1, logical_or: [{metric: avg, value: 1}]}\n"),
         "gates[2].logical_and[0]", "stands alone"),
    ],
)  # fmt: skip
def test_grader_mistakes_are_located(change, where, needle):
    with pytest.raises(SuiteError) as caught:
        load_suite(SUITE.replace(*change))
    problem = caught.value.problems[0]
    assert problem.path == where and needle in problem.message and problem.line > 0, problem


def test_a_rubric_file_is_attached_and_read():
    source = SUITE.replace(
        '    rubric: "Is {submission} right for {input}? Expected {ground_truth}."',
        "    rubric_file: quality.md",
    )
    suite = load_suite(source, files={"quality.md": "Grade {submission} against {ground_truth}."})
    assert suite.graders["quality"].rubric == "Grade {submission} against {ground_truth}."
    assert "quality.md" in suite.files_used()
    with pytest.raises(SuiteError, match="file `quality.md` is not attached"):
        load_suite(source)
    with pytest.raises(SuiteError, match=r"quality.md: unknown placeholder \{answer\}"):
        load_suite(source, files={"quality.md": "Grade {answer}."})


def test_a_turn_threshold_marks_each_turn_at_its_line_while_the_grader_passes_the_eval_at_its_threshold(
    fake_openai,
):
    """`turn_threshold` is the line a turn's grade needs to be marked passed (Letta's 1), apart from the
    `threshold` the grader's eval score needs: a turn the judge scores 0.9 fails, the eval at 0.95 passes."""
    fake_openai.rule("Capital of France?", "Paris", model="agent")
    fake_openai.rule("Capital of Peru?", "Lima", model="agent")
    fake_openai.rule("Is Paris right", verdict(1.0), where="any", model="grader-model")
    fake_openai.rule("Is Lima right", verdict(0.9), where="any", model="grader-model")
    source = (
        "name: marks\nmodel: agent\ngraders:\n  quality:\n    kind: llm_judge\n"
        '    rubric: "Is {submission} right for {input}? Expected {ground_truth}."\n'
        "    model: grader-model\n    threshold: 0.8\n    turn_threshold: 1\n"
        "evals:\n  - {input: [Capital of France?, Capital of Peru?], ground_truth: [Paris, Lima]}\n"
    )
    (result,) = run_suite(load_suite(source), registry(fake_openai), concurrency=1).evals
    assert [[(g.score, g.passed, g.threshold) for g in turn.grades] for turn in result.turns] == [
        [(1.0, True, 1.0)],
        [(0.9, False, 1.0)],
    ]
    assert (result.turns_passed, result.turns_total) == (1, 2)
    (quality,) = result.graders
    assert (quality.score, quality.threshold, quality.passed) == (pytest.approx(0.95), 0.8, True)
    assert result.status == "passed"
    assert result.verdict == "quality 0.95 ≥ 0.80; 1 of 2 turns passed"
