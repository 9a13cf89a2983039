"""The terminal report's words for how a conversation came out: the mark says passed or failed, and what
follows it says how, without saying passed again."""

from __future__ import annotations

import pytest

from engine.loader import load_suite
from engine.report import Detail, format_line, format_report, overall
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


def test_a_scripted_conversation_that_passed_every_turn_says_so_once(registry):
    report = _played(SCRIPTED.format(threshold=1, expected="Lisbon"), registry)
    (result,) = report.evals
    assert result.verdict == "passed: 2/2 passed"  # the stored verdict is as it was
    assert overall(result) == "✅ PASS (every turn passed: 2 of 2)"
    assert format_line(result).endswith("(every turn passed: 2 of 2)")
    assert format_line(result).count("passed") == 1


def test_a_scripted_conversation_that_passed_on_its_score_counts_its_turns(registry):
    report = _played(SCRIPTED.format(threshold=0.5, expected="Madrid"), registry)
    (result,) = report.evals
    assert result.status == "passed" and result.turns_passed == 1
    assert overall(result) == "✅ PASS (1 of 2 turns passed, score 0.50)"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Paris.", "✅ PASS (every turn passed: 1 of 1)"),  # a given reply: Scripted's count too
        ("Lyon.", "❌ FAIL (0/1 passed (score 0.00, needs 1))"),
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


def test_a_tree_that_failed_says_failed_once(registry):
    source = (
        "name: tree\nmodel: mock\nmock: {default: No.}\nevals:\n"
        "  - {prompt: Say sure, checks: [{contains: sure, prompt: Please say sure, checks: [{contains: sure}]}]}\n"
    )
    report = _played(source, registry)
    text = format_report(report, Detail.COMPACT)
    assert "  Overall: ❌ FAIL (after 2 turns)" in text
    assert "  Overall: ❌ FAIL (failed" not in text
