"""The report's tokens and costs say what they count: the summary's cost is the model's, the judges' and the
simulated user's together, and so its tokens name all three."""

from __future__ import annotations

from engine.clients import EndpointConfig, EndpointRegistry
from engine.exports import markdown_summary
from engine.loader import load_suite
from engine.report import format_eval, format_summary
from engine.runner import run_suite
from tests.conftest import ROOT
from tests.fakeopenai import FakeOpenAI

JUDGED = """\
name: judged
model: m
evals:
  - prompt: Capital of France?
    checks:
      - llm_judge: {criteria: Names Paris}
"""


def test_the_summary_names_the_judges_tokens_its_cost_counts():
    with FakeOpenAI() as fake:
        fake.default_reply = '{"score": 1, "reason": "ok"}'
        # One price for a prompt and a completion token: the cost is then the tokens it counts, per million.
        config = EndpointConfig(
            name="default", base_url=fake.base_url, max_retries=0, price_input=1.0, price_output=1.0
        )
        report = run_suite(load_suite(JUDGED), EndpointRegistry(default=config))
    totals = report.totals
    assert totals.judge_tokens > 0 and totals.user_tokens == 0
    assert totals.cost == round((totals.total_tokens + totals.judge_tokens) / 1e6, 8)
    summary = format_summary(report)
    assert f"{totals.total_tokens:,} tokens (+ {totals.judge_tokens:,} judge), ${totals.cost:.6f}" in summary
    (turn,) = report.evals[0].turns
    line = next(line for line in format_eval(report.evals[0]).splitlines() if "Tokens:" in line)
    assert line.strip() == (
        f"Tokens: {turn.usage.prompt_tokens} in / {turn.usage.completion_tokens} out + "
        f"{turn.judge_usage.total_tokens} judge, cost ${turn.cost + turn.judge_cost:.6f}"
    )
    assert f"{totals.total_tokens:,} tokens (+ {totals.judge_tokens:,} judge) · ${totals.cost:.4f}" in (
        markdown_summary(report)
    )


def test_the_summary_names_the_simulated_users_tokens(registry):
    path = ROOT / "examples" / "booking-simulated.yaml"
    suite = load_suite(path.read_bytes(), filename=path.name)
    suite.mock.latency_ms = 0
    report = run_suite(suite, registry)
    totals = report.totals
    assert totals.user_tokens > 0 and totals.judge_tokens == 0
    assert f"{totals.total_tokens:,} tokens (+ {totals.user_tokens:,} simulated user), $" in format_summary(
        report
    )
    for result in report.evals:
        lines = [line for line in format_eval(result).splitlines() if "Tokens:" in line]
        named = [
            f" + {turn.user_usage.total_tokens} simulated user, cost $"
            if turn.user_usage.total_tokens
            else ""
            for turn in result.turns
        ]
        assert all(words in line for words, line in zip(named, lines, strict=True))
    assert any(turn.user_usage.total_tokens for result in report.evals for turn in result.turns)


def test_a_run_without_judges_says_its_tokens_alone(registry):
    path = ROOT / "examples" / "demo-mock.yaml"
    suite = load_suite(path.read_bytes(), filename=path.name)
    suite.mock.latency_ms = 0
    report = run_suite(suite, registry)
    assert f"— 6 turns, {report.totals.total_tokens:,} tokens, $0.000000" in format_summary(report)
