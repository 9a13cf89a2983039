"""Cost before and during a run: engine/cost.py's estimate from prices and the suite's size, and the runner's
cost limit (`max_cost`), against the fake endpoint with prices set."""

from __future__ import annotations

import pytest

from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.cost import estimate
from engine.loader import load_suite
from engine.options import RunOptions, apply
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

TEN = "0123456789" * 4  # 40 characters: 10 tokens to the estimate

SIZED = f"""
name: sized
model: gpt-test
system: "{TEN}"
model_settings: {{max_tokens: 100}}
evals:
  - id: listed
    iterations: 3
    input: ["{TEN}", "{TEN}"]
    checks: [{{contains: Paris}}]
  - id: tree
    prompt: "{TEN}{TEN}"
    checks:
      - contains: Paris
        prompt: "{TEN}"
        checks: [{{contains: Paris}}]
"""


def priced(price_input: float, price_output: float):
    config = EndpointConfig(
        name=DEFAULT, base_url="http://x.invalid/v1", price_input=price_input, price_output=price_output
    )
    return lambda ref: (DEFAULT, config)


def test_estimate_counts_conversations_turns_and_growing_history():
    """3 iterations × 2 scripted turns and a tree of depth 1, replies capped at max_tokens 100. Each call sends
    the system (10 tokens), every earlier message and reply, and its own message (text / 4):
    listed: 20 + 130 prompt tokens and 2 × 100 completion, three times; the tree's first turn 30 + 100, its
    second 140 + 100 more."""
    found = estimate(load_suite(SIZED), priced(1000, 2000))
    assert (found.conversations, found.turns_low, found.turns_high) == (4, 1, 2)
    assert (found.model.calls, found.model.prompt, found.model.completion) == (7, 3 * 150 + 30, 3 * 200 + 100)
    assert (found.model.calls_high, found.model.prompt_high, found.model.completion_high) == (8, 620, 800)
    assert found.low == pytest.approx((480 * 1000 + 700 * 2000) / 1e6)  # $1.88
    assert found.high == pytest.approx((620 * 1000 + 800 * 2000) / 1e6)  # $2.22
    assert found.text() == (
        "≈ $1.88 (up to $2.22): 4 conversations × 1–2 turns, ~68 prompt + 100 completion tokens a call "
        "at $1000.00/$2000.00 per M"
    )


def test_estimate_with_the_cache_on_says_it_counts_every_call():
    cached = apply(load_suite(SIZED), RunOptions(cache=True))
    found = estimate(cached, priced(1000, 2000))
    assert found.low == estimate(load_suite(SIZED), priced(1000, 2000)).low  # every call still counted
    assert found.text().endswith(
        "; every call counted, though the response cache may answer some for nothing"
    )
    assert "cache" not in estimate(load_suite(SIZED), priced(1000, 2000)).text()


def test_estimate_without_a_cap_uses_the_stated_default_and_counts_judges():
    suite = load_suite(
        "name: judged\nmodel: gpt-test\njudge: gpt-judge\nevals:\n"
        "  - input: hi\n    checks: [{llm_judge: {criteria: Is the reply polite?}}]\n"
    )
    found = estimate(suite, priced(1_000_000, 0))  # $1 a prompt token
    # "hi" is 1 token; replies 200 (≈) or 800 (up to); the judge reads 250 + its criteria (5) + message + reply.
    assert (found.model.prompt, found.model.completion, found.model.completion_high) == (1, 200, 800)
    assert (found.judges.calls, found.judges.prompt, found.judges.prompt_high) == (1, 250 + 5 + 1 + 200, 1056)
    assert found.low == pytest.approx(1 + 456)
    assert found.judges_low == pytest.approx(456)
    assert "judges and simulated users $456.00 (up to $1,056.00)" in found.text()


def test_estimate_says_which_endpoint_has_no_prices_and_that_the_mock_is_free():
    suite = load_suite(SIZED)
    assert estimate(suite, priced(0, 0)).text().startswith("no prices set for endpoint default: cost unknown")
    assert estimate(suite, priced(0, 0)).low is None
    assert (
        estimate(suite, lambda ref: ("mock", None)).text()
        == "no cost: the mock endpoint (4 conversations × 1–2 turns)"
    )


@pytest.fixture
def fake_registry(fake_openai, monkeypatch):
    """The default endpoint is the fake server, at $1 a completion token: each "OK" costs $1."""
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    fake_openai.latency = 0.05
    return EndpointRegistry(
        default=EndpointConfig(
            name=DEFAULT, base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, price_output=1_000_000
        )
    )


TEN_EVALS = "name: budget\nmodel: gpt-test\nevals:\n" + "".join(
    f"  - id: e{n}\n    input: question {n}\n    checks: [{{contains: OK}}]\n" for n in range(10)
)


def test_runner_stops_starting_conversations_once_spent(fake_registry, fake_openai):
    suite = apply(load_suite(TEN_EVALS), RunOptions(max_cost=3))
    report = run_suite(suite, fake_registry, concurrency=1)
    played = [r for r in report.evals if r.status == "passed"]
    assert [r.id for r in played] == ["e0", "e1", "e2"]
    assert all(r.turns and r.turns[0].response == "OK" for r in played)
    rest = report.evals[3:]
    assert [r.status for r in rest] == ["cancelled"] * 7
    assert rest[0].verdict == "not started: cost limit $3.00 reached"
    assert report.status == "cancelled" and report.stop_reason == "cost limit $3.00 reached"
    assert report.totals.cost == pytest.approx(3) and report.totals.cancelled == 7
    assert len(fake_openai.chat_requests()) == 3


def test_runner_lets_the_conversations_playing_finish(fake_registry, fake_openai):
    """At concurrency 2 the fourth conversation is playing when the third ends at the limit: it is kept."""
    suite = apply(load_suite(TEN_EVALS), RunOptions(max_cost=3))
    report = run_suite(suite, fake_registry, concurrency=2)
    assert [r.status for r in report.evals] == ["passed"] * 4 + ["cancelled"] * 6
    assert report.totals.cost == pytest.approx(4)


def test_runner_without_a_limit_plays_everything(fake_registry):
    report = run_suite(load_suite(TEN_EVALS), fake_registry, concurrency=3)
    assert (
        report.stop_reason is None and report.status == "passed" and report.totals.cost == pytest.approx(10)
    )


def test_a_given_reply_costs_only_its_judge_and_a_rubric_judge_reads_the_conversation():
    suite = load_suite(
        "name: given\nmodel: gpt-test\nevals:\n"
        f"  - messages: [{{role: user, content: hi}}]\n    reply: '{TEN}'\n    checks: [{{llm_judge: {{criteria: Is the reply polite?}}}}]\n"
        "  - input: hi\n    ground_truth: hello\n    grader: llm_judge\n    rubric: Does it greet? {submission}\n"
    )
    found = estimate(suite, priced(1_000_000, 0))
    assert found.model.calls == 1  # the given reply is not asked of the model
    # The given reply's judge: 250 + criteria 5 + reply 10 (its message, "hi", is in the history);
    # the rubric judge: 250 + rubric 7 + the conversation ("hi" and a 200-token reply).
    assert (found.judges.calls, found.judges.prompt) == (2, 265 + 458)


def test_a_limit_with_some_calls_priced_is_said_to_count_them_not_to_never_stop():
    """The model on an endpoint without prices, its judge on one with: the limit counts the judge's calls and
    can stop the run, so the estimate must not say it never does."""
    from engine.cost import before_run

    suite = load_suite(SIZED.replace("model: gpt-test", "model: gpt-test\njudge: paid/judge"))
    free = EndpointConfig(name=DEFAULT, base_url="http://x.invalid/v1")
    paid = EndpointConfig(name="paid", base_url="http://y.invalid/v1", price_input=1, price_output=2)
    mixed = estimate(suite, lambda ref: ("paid", paid) if ref.startswith("paid/") else (DEFAULT, free))
    assert mixed.low is None and mixed.some_priced
    [line] = before_run([("", mixed)], 0.5)[-1:]
    assert "never stops" not in line and line.endswith(
        "limit $0.50, counting the calls to endpoints with prices"
    )
    unpriced = estimate(suite, lambda ref: (DEFAULT, free))
    assert before_run([("", unpriced)], 0.5)[-1].endswith("so never stops the run")
