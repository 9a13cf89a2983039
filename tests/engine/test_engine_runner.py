"""engine/runner.py and engine/report.py: run_suite on the demo suite, the terminal report, and the results
JSON (engine/results.py) it writes."""

from __future__ import annotations

import json

import pytest

from engine.clients import (
    MOCK,
)
from engine.loader import load_suite
from engine.report import format_eval, format_report
from engine.results import RunReport
from engine.runner import build_context, run_suite
from tests.conftest import ROOT

DEMO = ROOT / "examples" / "demo-mock.yaml"


@pytest.fixture
def demo_suite():
    suite = load_suite(DEMO.read_bytes(), filename=DEMO.name)
    suite.mock.latency_ms = 0
    return suite


@pytest.fixture
def demo_report(demo_suite, registry) -> RunReport:
    return run_suite(demo_suite, registry)


def test_run_suite_demo_outcomes(demo_report):
    """The demo gives: add passes on turn 1, multiply passes on turn 2, capital fails after 3 turns."""
    outcome = {r.id: (r.status, r.passed_on_turn, r.verdict) for r in demo_report.evals}
    assert outcome == {
        "add": ("passed", 1, "passed on turn 1"),
        "multiply": ("passed", 2, "passed on turn 2"),
        "capital": ("failed", None, "failed after 3 turns"),
    }
    assert [r.index for r in demo_report.evals] == [0, 1, 2]
    assert demo_report.status == "failed"
    assert demo_report.mock is True
    assert demo_report.endpoint == MOCK
    assert demo_report.model == "mock"
    totals = demo_report.totals
    assert (totals.evals, totals.passed, totals.failed, totals.error, totals.turns) == (3, 2, 1, 0, 6)
    assert totals.total_tokens == sum(r.totals.total_tokens for r in demo_report.evals) > 0


def test_run_suite_demo_turn_contents(demo_report):
    """The capital eval keeps every prompt and mock reply in order."""
    capital = demo_report.evals[2]
    assert [t.response for t in capital.turns] == [
        "The capital of Australia is Sydney.",
        "I'm fairly sure it is Sydney, the largest city.",
        "Then it must be Melbourne.",
    ]
    assert capital.turns[2].prompt.startswith("Hint:")


def test_run_suite_on_result_callback(demo_suite, registry):
    """run_suite calls on_result once per eval."""
    seen = []
    run_suite(demo_suite, registry, on_result=seen.append, concurrency=1)
    assert sorted(r.id for r in seen) == ["add", "capital", "multiply"]


def test_build_context_uses_suite_system_and_judge(demo_suite, registry):
    """build_context resolves model and judge (default: the model) and passes the system prompt."""
    ctx, endpoint = build_context(demo_suite, registry)
    assert endpoint == MOCK
    assert (ctx.model, ctx.judge_model) == (MOCK, MOCK)
    assert ctx.system == demo_suite.system
    demo_suite.judge = "fast/judge-x"
    ctx, _ = build_context(demo_suite, registry)
    assert ctx.judge_model == "judge-x" and ctx.judge.label == "fast"
    demo_suite.model = None
    with pytest.raises(ValueError, match="no model"):
        build_context(demo_suite, registry)


def test_format_report_shape(demo_report):
    """The terminal report follows vibecheck's per-turn shape: Turn n:, ❌ FAIL match "*105*", Overall with the passing turn."""
    text = format_report(demo_report)
    assert "Turn 1:" in text
    assert '❌ FAIL match "*105*"' in text
    assert "Overall: ✅ PASS (succeeded on turn 2)" in text
    assert "Overall: ✅ PASS (succeeded on turn 1)" in text
    assert "Overall: ❌ FAIL (after 3 turns)" in text
    assert "[mock endpoint]" in text
    assert text.rstrip().endswith("\nOverall: ❌ FAIL")  # the mark says it: no "(failed)" after it


def test_format_eval_multiply_block(demo_report):
    """One eval's block: prompt, response and check lines for each turn, in order."""
    block = format_eval(demo_report.evals[1])
    lines = block.splitlines()
    assert lines[0] == "Eval 2: What is 15 * 7?"
    assert lines[1] == "  Turn 1:"
    assert lines[2] == "    Prompt: What is 15 * 7?"
    assert lines[3] == "    Response: 15 * 7 = 100."
    assert lines[4].startswith('    ❌ FAIL match "*105*"')
    assert "  Turn 2:" in lines
    assert any(line.startswith("    Follow-up because ") for line in lines)
    assert any(line.startswith('    ✅ PASS match "*105*"') for line in lines)
    assert lines[-1] == "  Overall: ✅ PASS (succeeded on turn 2)"


def test_run_report_json_shape(demo_report):
    """model_dump(mode="json"): each eval has status, score, passed_on_turn, turns and totals."""
    data = json.loads(json.dumps(demo_report.model_dump(mode="json")))
    assert data["format"] == "evalsite.results/1"
    assert data["suite"]["name"] == "demo-follow-ups"
    assert data["status"] == "failed"
    for key in ("evals", "passed", "failed", "turns", "total_tokens", "cost"):
        assert key in data["totals"]
    by_id = {e["id"]: e for e in data["evals"]}
    assert (by_id["multiply"]["status"], by_id["multiply"]["score"], by_id["multiply"]["passed_on_turn"]) == (
        "passed",
        1.0,
        2,
    )
    assert (by_id["capital"]["score"], by_id["capital"]["passed_on_turn"]) == (0.0, None)
    for ev in data["evals"]:
        for key in ("status", "score", "passed_on_turn", "turns", "totals", "verdict", "kind"):
            assert key in ev
        assert ev["totals"]["turns"] == len(ev["turns"])
        for turn in ev["turns"]:
            assert isinstance(turn["prompt"], str) and isinstance(turn["response"], str)
            assert set(turn["usage"]) >= {"prompt_tokens", "completion_tokens", "estimated"}
            for check in turn["checks"]:
                assert set(check) >= {"type", "label", "passed", "score", "reason"}
    first_check = by_id["multiply"]["turns"][0]["checks"][0]
    assert (first_check["type"], first_check["label"], first_check["passed"]) == (
        "match",
        'match "*105*"',
        False,
    )
    assert RunReport.model_validate(data) == demo_report


def test_every_run_of_a_repeated_eval_is_labelled_alike(registry):
    suite = load_suite(
        "name: repeated\nmodel: mock\nevals:\n"
        "  - {prompt: once, checks: [{contains: OK}]}\n"
        "  - {prompt: thrice, iterations: 3, checks: [{contains: OK}]}\n"
    )
    headings = [
        line for line in format_report(run_suite(suite, registry)).splitlines() if line.startswith("Eval ")
    ]
    assert headings == [
        "Eval 1: once",
        "Eval 2 (iteration 1 of 3): thrice",
        "Eval 2 (iteration 2 of 3): thrice",
        "Eval 2 (iteration 3 of 3): thrice",
    ]
