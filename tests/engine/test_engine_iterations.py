"""Repeated trials (@agtlantis/eval's iterations): statistics against hand-computed values, the
iterated verdict (pass rate against pass_rate_threshold), result kinds, and run_suite repeating every eval as
its own conversation, with the statistics in the JSON report.

In-process only: run_suite gets an EndpointRegistry whose clients are in-test scripted clients.
"""

from __future__ import annotations

import copy
import json
import math
import threading

import pytest

from engine.clients import Completion, EndpointConfig, EndpointRegistry
from engine.gates import evaluate_gates
from engine.loader import load_suite
from engine.results import EvalResult, Totals, Usage, gated_status
from engine.runner import run_suite
from engine.schema import Gate
from engine.stats import Trial, iterated_results, iteration_stats, overall_status, wilson_interval

# --- Wilson interval ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # p = 0.6, z^2/n = 0.76829: centre (0.6 + 0.38415) / 1.76829 = 0.55655,
        # margin 1.96 * sqrt(0.048 + 0.038415) / 1.76829 = 0.32584
        (3, 5, 0.2307, 0.8824),
        # p = 0.8, n = 5: centre 1.18415 / 1.76829 = 0.66966, margin 1.96 * sqrt(0.032 + 0.038415) / 1.76829
        (4, 5, 0.3755, 0.9638),
        # p = 0.8, n = 10: centre 0.99207 / 1.38415 = 0.71674, margin 1.96 * sqrt(0.016 + 0.0096) / 1.38415
        (8, 10, 0.4902, 0.9433),
        (0, 5, 0.0, 0.4345),  # centre = margin = 0.21725
        (5, 5, 0.5655, 1.0),
        (1, 1, 0.2065, 1.0),
    ],
)
def test_wilson_interval_hand_computed(successes, trials, low, high):
    got = wilson_interval(successes, trials)
    assert got == (pytest.approx(low, abs=5e-5), pytest.approx(high, abs=5e-5))


def test_wilson_interval_of_nothing_is_everything():
    assert wilson_interval(0, 0) == (0.0, 1.0)


# --- iteration statistics ------------------------------------------------------------------------------------


MIXED = [
    Trial(iteration=0, passed=False, score=0.2, turns=3, termination="max turns (8)"),
    Trial(iteration=1, passed=True, score=0.9, turns=5, termination="condition met: after_turns 5"),
    Trial(iteration=2, passed=True, score=0.5, turns=4, termination="condition met: after_turns 5"),
    Trial(iteration=3, passed=True, score=0.5, turns=4, termination="condition met: after_turns 5"),
    Trial(iteration=4, passed=True, score=1.0, turns=8, termination="max turns (8)"),
]


def test_iteration_stats_hand_computed():
    stats = iteration_stats(MIXED, pass_rate_threshold=0.5)
    assert (stats.iterations, stats.pass_count, stats.pass_rate, stats.errors) == (5, 4, 0.8, 0)
    assert (stats.pass_rate_low, stats.pass_rate_high) == (
        pytest.approx(0.3755, abs=5e-5), pytest.approx(0.9638, abs=5e-5),
    )  # fmt: skip
    assert stats.scores == [0.2, 0.9, 0.5, 0.5, 1.0]
    # mean 3.1 / 5 = 0.62; deviations -0.42, 0.28, -0.12, -0.12, 0.38; squares sum 0.428; / 5 = 0.0856
    assert stats.mean == pytest.approx(0.62)
    assert stats.std_dev == pytest.approx(math.sqrt(0.0856))  # 0.29257, population (divide by n)
    assert (stats.min, stats.max) == (0.2, 1.0)
    assert (stats.avg_turns, stats.min_turns, stats.max_turns) == (pytest.approx(4.8), 3, 8)
    assert stats.termination_counts == {"max turns (8)": 2, "condition met: after_turns 5": 3}
    assert stats.representative == 2  # 0.5 is 0.12 from the mean, as is iteration 3: the earliest wins
    assert stats.flaky  # one failed, four passed
    assert stats.passed and stats.pass_rate_threshold == 0.5


@pytest.mark.parametrize(
    ("threshold", "passed"), [(0.0, True), (0.5, True), (0.8, True), (0.81, False), (1.0, False)]
)
def test_the_iterated_eval_passes_when_the_pass_rate_reaches_the_threshold(threshold, passed):
    stats = iteration_stats(MIXED, pass_rate_threshold=threshold)
    assert stats.passed is passed and stats.pass_rate_threshold == threshold


@pytest.mark.parametrize("rate", [(1, 10), (3, 10), (7, 10), (2, 3), (1, 3)])
def test_a_pass_rate_exactly_at_the_threshold_passes(rate):
    passes, n = rate
    trials = [Trial(i, i < passes, 1.0 if i < passes else 0.0, 1) for i in range(n)]
    assert iteration_stats(trials, pass_rate_threshold=passes / n).passed


def test_same_outcome_every_time_is_not_flaky_even_with_different_scores():
    trials = [Trial(i, False, score, 2) for i, score in enumerate([0.1, 0.4, 0.3, 0.2])]
    stats = iteration_stats(trials)
    assert not stats.flaky and not stats.passed and stats.pass_count == 0
    assert (
        stats.mean == pytest.approx(0.25) and stats.representative == 2
    )  # 0.3 and 0.2 tie at 0.05: earliest
    assert stats.std_dev == pytest.approx(math.sqrt((0.0225 + 0.0225 + 0.0025 + 0.0025) / 4))
    assert not iteration_stats([Trial(i, True, 1.0, 1) for i in range(3)]).flaky


def test_errored_iterations_are_left_out_of_the_rate_and_scores_but_counted():
    trials = [
        Trial(0, True, 1.0, 2, "condition met: x"),
        Trial(1, False, None, 1, "error"),
        Trial(2, False, 0.0, 3, "max turns (3)"),
        Trial(3, False, None, 0, "error"),
    ]
    stats = iteration_stats(trials, pass_rate_threshold=0.5)
    assert (stats.iterations, stats.errors, stats.pass_count, stats.pass_rate) == (4, 2, 1, 0.5)
    assert stats.scores == [1.0, 0.0] and stats.mean == 0.5 and stats.std_dev == 0.5
    assert (stats.pass_rate_low, stats.pass_rate_high) == tuple(
        pytest.approx(x) for x in wilson_interval(1, 2)
    )
    assert stats.termination_counts == {"condition met: x": 1, "error": 2, "max turns (3)": 1}
    assert stats.flaky and stats.passed


def test_every_iteration_errored():
    stats = iteration_stats([Trial(0, False, None, 0, "error"), Trial(1, False, None, 1, "error")])
    assert (stats.pass_rate, stats.mean, stats.std_dev, stats.min, stats.representative) == (
        0.0,
        None,
        None,
        None,
        None,
    )
    assert (stats.pass_rate_low, stats.pass_rate_high) == (0.0, 1.0)
    assert not stats.passed and not stats.flaky and stats.errors == 2


# --- grouping results by eval ----------------------------------------------------------------------------


SUITE = load_suite(
    """
name: iterated
model: mock
iterations: 4
pass_rate_threshold: 0.75
evals:
  - id: tree
    prompt: What is 15 * 7?
    checks: [{match: "*105*"}]
  - id: sim
    prompt: Book a table.
    simulate: {follow_ups: [{input: go on, turns: inf}], max_turns: 3, stop_when: {contains: confirmed}}
    pass_rate_threshold: 0.5
  - id: once
    prompt: Hi
    checks: [{match: "*"}]
    iterations: 1
  - id: errors
    prompt: Hello
    checks: [{match: "*"}]
    iterations: 2
"""
)


def result(index, iteration, status, score=None, kind="single-turn", turns=1, termination=None) -> EvalResult:
    return EvalResult(
        index=index,
        id=SUITE.eval_id(index),
        kind=kind,
        iteration=iteration,
        prompt="p",
        status=status,
        score=score,
        verdict=status,
        termination=termination,
        totals=Totals(turns=turns),
    )


RESULTS = [
    *[
        result(0, i, s, 1.0 if s == "passed" else 0.0)
        for i, s in enumerate(["passed", "passed", "failed", "passed"])
    ],
    *[
        result(1, i, s, 1.0 if s == "passed" else 0.0, "multi-turn", turns, term)
        for i, (s, turns, term) in enumerate(
            [
                ("passed", 2, 'condition met: contains "confirmed"'),
                ("failed", 3, "max turns (3)"),
                ("failed", 3, "max turns (3)"),
                ("passed", 1, 'condition met: contains "confirmed"'),
            ]
        )
    ],
    result(2, 0, "failed", 0.0),
    result(3, 0, "error", termination="error"),
    result(3, 1, "error", termination="error"),
]


def test_iterated_results_group_by_eval_with_kinds_and_thresholds():
    iterated = {item.id: item for item in iterated_results(SUITE, RESULTS)}
    assert sorted(iterated) == ["errors", "sim", "tree"]  # `once` runs once: no statistics
    tree, sim, errors = iterated["tree"], iterated["sim"], iterated["errors"]
    assert (tree.index, tree.kind, tree.status) == (
        0,
        "single-turn-iterated",
        "passed",
    )  # 3/4 >= 0.75 (suite)
    assert (tree.stats.pass_rate, tree.stats.pass_rate_threshold, tree.stats.flaky) == (0.75, 0.75, True)
    assert (sim.kind, sim.status, sim.stats.pass_rate_threshold) == ("multi-turn-iterated", "passed", 0.5)
    assert sim.stats.termination_counts == {'condition met: contains "confirmed"': 2, "max turns (3)": 2}
    assert (sim.stats.avg_turns, sim.stats.min_turns, sim.stats.max_turns) == (2.25, 1, 3)
    assert sim.stats.representative == 0  # mean 0.5: every score is 0.5 away, the earliest wins
    assert (errors.kind, errors.status, errors.stats.errors) == ("single-turn-iterated", "error", 2)


def test_an_iterated_eval_counts_by_its_pass_rate_in_the_run_status():
    iterated = iterated_results(SUITE, RESULTS[:8])  # tree and sim only
    # Single iterations failed, but both evals reach their pass rate: the run passes.
    assert overall_status(RESULTS[:8], iterated) == "passed"
    assert gated_status(RESULTS[:8], [], iterated) == "passed"
    strict = SUITE.model_copy(update={"pass_rate_threshold": 0.8})
    iterated = iterated_results(strict, RESULTS[:8])
    assert [item.status for item in iterated] == ["failed", "passed"]
    assert overall_status(RESULTS[:8], iterated) == "failed"
    # A non-iterated eval still counts by its own status; an iterated eval whose every iteration errored is error.
    assert overall_status(RESULTS, iterated_results(SUITE, RESULTS)) == "error"
    gates = evaluate_gates([Gate(metric="avg", op=">=", value=0.5)], RESULTS[:8])
    assert gated_status(RESULTS[:8], gates, iterated_results(SUITE, RESULTS[:8])) == "passed"


# --- run_suite: every repetition is its own conversation ---------------------------------------------------


class Alternating:
    """Replies from a list in call order, cycling; records calls. Thread-safe."""

    label = "agent"
    is_mock = False

    def __init__(self, replies):
        self.replies = list(replies)
        self.calls: list[list[dict]] = []
        self.lock = threading.Lock()

    def complete(self, model, messages, *, temperature=None):
        with self.lock:
            text = self.replies[len(self.calls) % len(self.replies)]
            self.calls.append(copy.deepcopy(messages))
        return Completion(
            text=text, usage=Usage(prompt_tokens=4, completion_tokens=1), cost=0.0, latency_ms=1
        )

    def embed(self, model, texts):
        raise AssertionError("no embeddings expected")


class Registry(EndpointRegistry):
    """Named endpoints `agent` and `judge` answered by in-test clients."""

    def __init__(self, **clients):
        config = EndpointConfig(name="default", base_url="http://127.0.0.1:9/v1")
        super().__init__(
            config, {name: EndpointConfig(name=name, base_url=config.base_url) for name in clients}
        )
        self.clients = clients

    def client(self, name, mock=None, **_):
        return self.clients[name]


FLAKY = """
name: flaky
model: agent/m
iterations: 5
evals:
  - id: arithmetic
    prompt: What is 15 * 7?
    checks: [{match: "*105*"}]
  - id: greeting
    prompt: Say hi.
    checks: [{match: "*"}]
    iterations: 1
"""


def test_run_suite_repeats_each_eval_and_reports_statistics():
    agent = Alternating(
        ["105", "100"]
    )  # concurrency 1: iterations 0, 2, 4 pass; then the greeting gets "100"
    report = run_suite(load_suite(FLAKY), Registry(agent=agent), concurrency=1)
    assert [(r.id, r.iteration, r.status) for r in report.evals] == [
        ("arithmetic", 0, "passed"),
        ("arithmetic", 1, "failed"),
        ("arithmetic", 2, "passed"),
        ("arithmetic", 3, "failed"),
        ("arithmetic", 4, "passed"),
        ("greeting", 0, "passed"),
    ]
    # Each repetition is a conversation of its own: a fresh message list every time.
    assert [len(call) for call in agent.calls] == [1] * 6
    (item,) = report.iterated
    assert (item.id, item.index, item.kind, item.status) == (
        "arithmetic",
        0,
        "single-turn-iterated",
        "passed",
    )
    stats = item.stats
    assert (stats.iterations, stats.pass_count, stats.pass_rate, stats.flaky) == (5, 3, 0.6, True)
    assert (stats.pass_rate_low, stats.pass_rate_high) == (
        pytest.approx(0.2307, abs=5e-5), pytest.approx(0.8824, abs=5e-5),
    )  # fmt: skip
    assert stats.scores == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert stats.mean == pytest.approx(0.6) and stats.std_dev == pytest.approx(math.sqrt(0.24))
    assert (stats.min, stats.max, stats.representative) == (0.0, 1.0, 0)
    assert report.status == "passed"  # 3/5 >= 0.5, and the greeting passed
    assert report.totals.evals == 6

    data = json.loads(report.model_dump_json())
    assert [e["iteration"] for e in data["evals"]] == [0, 1, 2, 3, 4, 0]
    assert data["iterated"][0]["kind"] == "single-turn-iterated"
    assert data["iterated"][0]["stats"]["pass_rate"] == 0.6
    assert {"mean", "std_dev", "min", "max", "pass_rate_low", "pass_rate_high", "representative", "flaky",
            "avg_turns", "min_turns", "max_turns", "termination_counts"} <= set(data["iterated"][0]["stats"])  # fmt: skip


def test_the_eval_pass_rate_threshold_can_fail_the_run():
    source = FLAKY.replace(
        'checks: [{match: "*105*"}]', 'checks: [{match: "*105*"}]\n    pass_rate_threshold: 0.8'
    )
    report = run_suite(load_suite(source), Registry(agent=Alternating(["105", "100"])), concurrency=1)
    assert report.iterated[0].status == "failed" and report.status == "failed"


def test_iterated_simulated_evals_are_multi_turn_iterated_with_turn_statistics():
    source = """
name: sim
model: agent/m
judge: judge/j
evals:
  - id: booking
    prompt: Book a table.
    simulate:
      follow_ups: [{input: Go on., turns: .inf}]
      max_turns: 3
      stop_when: {contains: confirmed}
    iterations: 3
"""
    # Sequential: iteration 0 gets "no", "confirmed"; iteration 1 "no" x3; iteration 2 "confirmed".
    agent = Alternating(["no", "confirmed", "no", "no", "no", "confirmed"])
    report = run_suite(
        load_suite(source), Registry(agent=agent, judge=Alternating(["unused"])), concurrency=1
    )
    assert [(r.iteration, r.status, r.totals.turns, r.termination) for r in report.evals] == [
        (0, "passed", 2, 'condition met: contains "confirmed"'),
        (1, "failed", 3, "max turns (3)"),
        (2, "passed", 1, 'condition met: contains "confirmed"'),
    ]
    (item,) = report.iterated
    assert (item.kind, item.status) == ("multi-turn-iterated", "passed")  # 2/3 >= 0.5 (the default)
    stats = item.stats
    assert (stats.pass_count, stats.avg_turns, stats.min_turns, stats.max_turns) == (2, 2.0, 1, 3)
    assert stats.termination_counts == {'condition met: contains "confirmed"': 2, "max turns (3)": 1}
    assert stats.mean == pytest.approx(2 / 3) and stats.std_dev == pytest.approx(math.sqrt(2 / 9))
    assert stats.representative == 0 and stats.flaky


def test_a_suite_without_iterations_reports_none():
    report = run_suite(
        load_suite(FLAKY.replace("iterations: 5", "iterations: 1")), Registry(agent=Alternating(["105"]))
    )
    assert report.iterated == [] and [r.iteration for r in report.evals] == [0, 0]
    assert report.evals[0].kind == "single-turn"


# --- each iteration keeps its score: the judge's 0.6 is 0.6, not a pass or a fail -------------


JUDGED = """
name: judged
model: agent
judge: judge
iterations: 4
evals:
  - id: explain
    prompt: Explain recursion.
    checks:
      - llm_judge: {criteria: Clear and correct, threshold: 0.5}
  - id: simulated
    prompt: Book a table.
    iterations: 3
    simulate:
      follow_ups: [{input: For two, turns: inf}]
      max_turns: 2
      on_max_turns: pass
    checks:
      - contains: booked
      - llm_judge: {criteria: Polite, threshold: 0.5}
"""


def _fake_registry(fake):
    import os

    from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    return EndpointRegistry(config)


def test_iterations_of_a_judged_tree_keep_the_judges_scores(fake_openai):
    """Through the real fake endpoint: each iteration's score is its judge's score (on 0-1), so the statistics
    describe how well it did; pass and fail still come from the check's threshold."""
    fake_openai.rule("Explain recursion.", "It calls itself.", where="any", model="agent")
    fake_openai.rule("Book a table.", "Your table is booked.", where="any", model="agent")
    judged = [0.6, 0.9, 0.3, 1.0]
    fake_openai.rule(
        "Clear and correct", [json.dumps({"score": s, "reason": f"r{s}"}) for s in judged], where="any"
    )
    # Simulated: the judge's 0.8, 0.2 and 0.5 and a contains check that passes (1.0): means 0.9, 0.6, 0.75.
    fake_openai.rule(
        "Polite", [json.dumps({"score": s, "reason": "ok"}) for s in (0.8, 0.2, 0.5)], where="any"
    )
    report = run_suite(load_suite(JUDGED), _fake_registry(fake_openai), concurrency=1)

    tree, simulated = report.iterated
    assert [r.score for r in report.evals if r.index == 0] == judged
    assert tree.stats.scores == judged
    assert tree.stats.pass_count == 3  # 0.3 is under the threshold: counts unchanged by scores
    assert tree.stats.mean == pytest.approx(0.7)
    # deviations -0.1, 0.2, -0.4, 0.3: squares 0.01 + 0.04 + 0.16 + 0.09 = 0.30, / 4 = 0.075
    assert tree.stats.std_dev == pytest.approx(math.sqrt(0.075))
    assert (tree.stats.min, tree.stats.max, tree.stats.representative) == (0.3, 1.0, 0)

    assert simulated.stats.scores == pytest.approx([0.9, 0.6, 0.75])
    assert simulated.stats.pass_count == 2  # the judge's 0.2 fails its check, so the conversation fails
    assert simulated.stats.mean == pytest.approx(0.75)


def test_a_tree_without_scored_checks_still_scores_one_or_zero(fake_openai):
    fake_openai.rule("What is 15 * 7?", ["105", "100"], where="any")
    source = FLAKY.replace("model: agent/m", "model: m")
    report = run_suite(load_suite(source), _fake_registry(fake_openai), concurrency=1)
    assert report.iterated[0].stats.scores == [1.0, 0.0, 1.0, 0.0, 1.0]
