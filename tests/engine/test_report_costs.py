"""The report's tokens and costs say what they count: the summary's cost is the model's, the judges' and the
simulated user's together, and so its tokens name all three; a cost that counts calls to an endpoint without
prices is said to be unknown, or a lower bound, never a plain $0."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace

import pytest

from engine.clients import EndpointConfig, EndpointRegistry
from engine.exports import evals_csv, markdown_summary, turns_csv
from engine.loader import load_suite
from engine.matrix import build_grid, column_of_report, summary_header, summary_rows
from engine.report import format_eval, format_report, format_summary
from engine.results import EvalResult, RunReport, RunTotals, SuiteRef
from engine.runner import run_suite
from evalsite import terminal
from evalsite.cli import main
from evalsite.cli.local import interrupted, say_stopped
from evalsite.cli.progress import Tally
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


# --- without prices -------------------------------------------------------------------------------------------


def _played_unpriced(source: str, **named: EndpointConfig):
    """The suite played on the fake endpoint as the default one, which has no prices, and `named` others."""
    with FakeOpenAI() as fake:
        fake.default_reply = '{"score": 1, "reason": "ok"}'
        default = EndpointConfig(name="default", base_url=fake.base_url, max_retries=0)
        named = {name: replace(config, base_url=fake.base_url) for name, config in named.items()}
        return run_suite(load_suite(source), EndpointRegistry(default=default, named=named))


def test_a_run_on_an_endpoint_without_prices_says_its_cost_is_unknown():
    report = _played_unpriced(JUDGED)
    assert report.unpriced == ["default"] and report.totals.total_tokens > 0
    summary = format_summary(report)
    assert "tokens (+ " in summary and ", cost unknown (no prices for endpoint default), " in summary
    text = format_report(report)
    assert "$0.000000" not in text
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("Tokens:")]
    assert lines and all(line.endswith(", cost unknown") for line in lines)
    assert "cost unknown (no prices for endpoint default)" in markdown_summary(report)
    data = json.loads(report.model_dump_json())  # the numbers stay, and say they are not the whole cost
    assert (data["totals"]["cost"], data["unpriced"], data["cost_known"]) == (0.0, ["default"], False)


def test_a_judge_without_prices_leaves_a_lower_bound():
    source = JUDGED.replace("model: m\n", "model: m\njudge: judges/j\n")
    priced = EndpointConfig(name="judges", base_url="", max_retries=0)
    with FakeOpenAI() as fake:
        fake.default_reply = '{"score": 1, "reason": "ok"}'
        default = EndpointConfig(name="default", base_url=fake.base_url, price_input=1.0, price_output=1.0)
        judges = replace(priced, base_url=fake.base_url)
        report = run_suite(load_suite(source), EndpointRegistry(default=default, named={"judges": judges}))
    assert report.unpriced == ["judges"] and report.totals.judge_tokens > 0
    assert report.totals.cost == round(report.totals.total_tokens / 1e6, 8)  # the model's calls alone
    assert f", at least ${report.totals.cost:.6f} (no prices for endpoint judges), " in format_summary(report)
    (turn,) = report.evals[0].turns
    assert turn.unpriced == ["judges"]  # the turn names where its calls went without prices
    (line,) = [line for line in format_eval(report.evals[0]).splitlines() if "Tokens:" in line]
    assert line.endswith(f", cost at least ${turn.cost:.6f}")


def test_an_endpoint_without_prices_that_no_call_went_to_leaves_the_cost_known():
    """The suite names a judge on an endpoint without prices, but no check asks it: every call went to the
    priced model, so the cost is known, in dollars."""
    source = JUDGED.replace("model: m\n", "model: m\njudge: judges/j\n").replace(
        "      - llm_judge: {criteria: Names Paris}\n", "      - contains: Paris\n"
    )
    with FakeOpenAI() as fake:
        default = EndpointConfig(name="default", base_url=fake.base_url, price_input=1.0, price_output=1.0)
        judges = EndpointConfig(name="judges", base_url=fake.base_url, max_retries=0)
        report = run_suite(load_suite(source), EndpointRegistry(default=default, named={"judges": judges}))
        assert [request["model"] for request in fake.chat_requests()] == ["m"]  # the judge was never asked
    assert report.unpriced == [] and report.cost_known
    assert report.totals.cost == round(report.totals.total_tokens / 1e6, 8) > 0
    assert f", ${report.totals.cost:.6f}, " in format_summary(report)


def test_the_mock_costs_nothing_it_is_not_unknown(registry):
    path = ROOT / "examples" / "demo-mock.yaml"
    suite = load_suite(path.read_bytes(), filename=path.name)
    suite.mock.latency_ms = 0
    report = run_suite(suite, registry)
    assert report.unpriced == [] and report.cost_known
    assert ", $0.000000, " in format_summary(report)


def test_a_document_written_before_runs_said_so_reads_back(registry):
    path = ROOT / "examples" / "demo-mock.yaml"
    suite = load_suite(path.read_bytes(), filename=path.name)
    suite.mock.latency_ms = 0
    data = json.loads(run_suite(suite, registry).model_dump_json())
    del data["unpriced"], data["cost_known"]
    read = RunReport.model_validate(data)
    assert read.unpriced == [] and read.cost_known


def test_evalsite_run_says_so_and_its_json_too(tmp_path, monkeypatch, settings):
    monkeypatch.setattr(terminal, "active", terminal.active)  # the command sets it; put it back after
    suite = tmp_path / "suite.yaml"
    suite.write_text(JUDGED)
    results = tmp_path / "results.json"
    with FakeOpenAI() as fake:
        fake.default_reply = '{"score": 1, "reason": "ok"}'
        settings.OPENAI_BASE_URL = fake.base_url  # the default endpoint, which has no prices
        settings.EVALSITE_RETRY_SECONDS = 0
        with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
            assert main(["run", str(suite), "--json", str(results)]) == 0, err.getvalue()
    assert ", cost unknown (no prices for endpoint default), " in out.getvalue()
    data = json.loads(results.read_text())
    assert (data["unpriced"], data["cost_known"]) == (["default"], False)
    assert list(data)[-2:] == ["unpriced", "cost_known"]  # where the report has them, after its totals


def test_the_lines_a_run_ends_with_say_what_prices_do_not_tell(capsys):
    tally = Tally(4)
    tally.calls_unpriced().add("default")  # a call went out to the default endpoint, which has no prices
    assert " · cost unknown · " in tally.line() and " · $? · " in tally.line(40)
    with pytest.raises(KeyboardInterrupt) as stopped, interrupted(tally, None, shown=True):
        raise KeyboardInterrupt
    assert str(stopped.value) == (
        "0 of 4 conversations had ended, an unknown amount spent (no prices for endpoint default); "
        "no summary was written"
    )
    tally.spend = 2.5  # what the endpoints with prices cost
    assert " · at least $2.5000 · " in tally.line() and " · ≥$2.5000 · " in tally.line(40)
    evals = [
        EvalResult(index=n, id=f"e{n}", kind="single-turn", prompt="p", status=status, verdict=verdict)
        for n, (status, verdict) in enumerate(
            [("passed", "passed"), ("passed", "passed")]
            + [("cancelled", "not started: cost limit $2.00 reached")] * 2
        )
    ]
    report = RunReport(
        suite=SuiteRef(name="s"), model="m", endpoint="default", status="cancelled", evals=evals,
        totals=RunTotals(evals=4, cancelled=2, cost=2.5), stop_reason="cost limit $2.00 reached",
        unpriced=["judges"],
    )  # fmt: skip
    say_stopped(report)
    assert capsys.readouterr().err == (
        "stopped: cost limit $2.00 reached (spent at least $2.50, no prices for endpoint judges; "
        "2 of 4 conversations played, the rest not started)\n"
    )


def test_a_matrix_variant_without_prices_has_an_unknown_cost(registry):
    path = ROOT / "examples" / "demo-mock.yaml"
    suite = load_suite(path.read_bytes(), filename=path.name)
    suite.mock.latency_ms = 0
    on_mock = run_suite(suite, registry)
    unpriced = on_mock.model_copy(update={"unpriced": ["fast"]})
    grid = build_grid([column_of_report("1", "mock", on_mock), column_of_report("2", "fast", unpriced)])
    cost = summary_header(grid).index("cost")
    assert [row[cost] for row in summary_rows(grid)] == ["$0.0000", "unknown"]


def test_the_csv_gives_the_simulated_users_tokens_and_cost_its_eval_cost_counts(registry):
    path = ROOT / "examples" / "booking-simulated.yaml"
    suite = load_suite(path.read_bytes(), filename=path.name)
    suite.mock.latency_ms = 0
    report = run_suite(suite, registry)
    rows = list(csv.DictReader(io.StringIO(evals_csv(report))))
    assert [int(row["user_tokens"]) for row in rows] == [result.totals.user_tokens for result in report.evals]
    assert any(int(row["user_tokens"]) for row in rows)
    turns = [row for row in csv.DictReader(io.StringIO(turns_csv(report))) if not row["tool_call"]]
    assert [float(row["user_cost"]) for row in turns] == [
        turn.user_cost for result in report.evals for turn in result.turns
    ]
