"""The words for how a conversation came out, wherever they are read. In the terminal the mark says passed or
failed, and what follows it says how, without saying passed again; the stored verdict (results.json, the run
page, the transcript, JUnit, Markdown) is that same how, beside a status that says the outcome. A score is
said beside the line it had to reach, and nothing stands in parentheses inside the terminal's."""

from __future__ import annotations

import json
import re

import pytest

from engine.exports import junit_xml
from engine.loader import load_suite
from engine.report import Detail, format_eval, format_line, format_report, overall
from engine.runner import run_suite

SCRIPTED = """\
name: scripted
model: mock
pass_threshold: {threshold}
mock:
  rules:
    - {{when: "*France*", reply: "Paris."}}
    - {{when: "*Spain*", reply: "Lisbon."}}
evals:
  - turns:
      - {{input: What is the capital of France?, checks: [{{contains: Paris}}]}}
      - {{input: And of Spain?, checks: [{{contains: "{expected}"}}]}}
"""


def _played(source: str, registry):
    suite = load_suite(source)
    if suite.mock is not None:
        suite.mock.latency_ms = 0
    return run_suite(suite, registry)


def _stored(report) -> str:
    """The eval's verdict as results.json holds it."""
    (stored,) = json.loads(report.model_dump_json())["evals"]
    return stored["verdict"]


def _nested(text: str) -> bool:
    """Whether parentheses stand inside parentheses anywhere in the text."""
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth > 1:
            return True
    return False


def _doubled(text: str) -> bool:
    """Whether the outcome is said twice: "passed … passed", "PASS (… passed …", "failed … failed"."""
    for word in ("pass", "fail"):
        if len(re.findall(rf"\b{word}(?:ed)?\b", text, flags=re.IGNORECASE)) > 1:
            return True
    return False


def test_a_scripted_conversation_that_passed_every_turn_says_so_once(registry):
    report = _played(SCRIPTED.format(threshold=1, expected="Lisbon"), registry)
    (result,) = report.evals
    assert result.verdict == _stored(report) == "every turn passed: 2 of 2"
    assert overall(result) == "✅ PASS (every turn passed: 2 of 2)"
    assert format_line(result).endswith("(every turn passed: 2 of 2)")
    assert format_line(result).count("passed") == 1
    assert not _doubled(result.verdict)


def test_a_failed_score_says_the_line_it_needed_as_a_score_without_parentheses_inside_the_marks(registry):
    report = _played(SCRIPTED.format(threshold=1, expected="Madrid"), registry)
    (result,) = report.evals
    assert result.status == "failed"
    assert result.verdict == _stored(report) == "1 of 2 turns passed, score 0.50 < 1.00"
    assert overall(result) == "❌ FAIL (1 of 2 turns passed, score 0.50 < 1.00)"
    assert 'message="1 of 2 turns passed, score 0.50 &lt; 1.00"' in junit_xml(report)
    shown = format_report(report)
    assert not _nested(shown) and "needs" not in shown
    assert not _doubled(result.verdict)


def test_a_pass_threshold_under_1_says_the_score_reached_it_and_passed_once(registry):
    report = _played(SCRIPTED.format(threshold=0.5, expected="Madrid"), registry)
    (result,) = report.evals
    assert result.status == "passed" and result.turns_passed == 1
    assert result.verdict == _stored(report) == "1 of 2 turns passed, score 0.50 ≥ 0.50"
    assert overall(result) == "✅ PASS (1 of 2 turns passed, score 0.50 ≥ 0.50)"
    assert format_line(result).count("passed") == 1
    assert not _doubled(result.verdict) and not _nested(format_eval(result))


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Paris.", "✅ PASS (every turn passed: 1 of 1)"),  # a given reply: Scripted's count too
        ("Lyon.", "❌ FAIL (0 of 1 turn passed, score 0.00 < 1.00)"),
    ],
)
def test_a_given_reply_reads_as_its_count(registry, reply, expected):
    source = (
        "name: given\nmodel: mock\nevals:\n"
        "  - messages: [{role: user, content: Capital of France?}]\n"
        f"    reply: {reply}\n    checks: [{{contains: Paris}}]\n"
    )
    (result,) = _played(source, registry).evals
    assert overall(result) == expected


JUDGED = """\
name: judged
model: mock
judge: mock
pass_threshold: 0.7
grader: llm_judge
rubric: "Grade this answer: {submission}"
mock:
  rules:
    - {when: "*Grade this answer*", reply: '{"score": 0.7, "reason": "close enough"}'}
    - {when: "*", reply: "An answer."}
evals:
  - input: [One?, Two?, Three?]
    ground_truth: [one, two, three]
"""


def test_turns_that_each_reached_the_line_pass_though_their_mean_falls_under_it_by_a_rounding_error(registry):
    """Three grades of 0.7 have a mean of 0.6999…98 in floating point: the eval reached its 0.7 and passes,
    as a named grader's mean does, and its verdict says the score reached the line."""
    (result,) = _played(JUDGED, registry).evals
    assert [turn.grade.score for turn in result.turns] == [0.7, 0.7, 0.7]
    assert result.score < 0.7 and result.status == "passed"
    assert result.verdict == "every turn passed: 3 of 3, score 0.70 ≥ 0.70"


def test_a_score_that_rounds_to_its_line_is_given_the_digits_that_tell_them_apart():
    from engine.text import against

    assert against(0.5999, 0.6) == "score 0.5999 < 0.60"
    assert against(0.62, 0.625) == "score 0.62 < 0.625"
    assert against((1 + 1 + 0) / 3, 0.67) == "score 0.667 < 0.67"
    assert against(0.7 * 3 / 3, 0.7, "quality") == "quality 0.70 ≥ 0.70"


def test_a_tree_that_failed_says_failed_once(registry):
    source = (
        "name: tree\nmodel: mock\nmock: {default: No.}\nevals:\n"
        "  - {prompt: Say sure, checks: [{contains: sure, prompt: Please say sure, checks: [{contains: sure}]}]}\n"
    )
    report = _played(source, registry)
    text = format_report(report, Detail.COMPACT)
    assert "  Overall: ❌ FAIL (after 2 turns)" in text
    assert "  Overall: ❌ FAIL (failed" not in text
