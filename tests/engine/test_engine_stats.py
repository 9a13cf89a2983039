"""Iteration statistics against hand-computed values."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from engine.loader import load_saved_suite
from engine.simulate import clean_reply, persona_for, simulator_messages
from engine.stats import Trial, iterated_results, iteration_stats, wilson_interval


def test_wilson_interval_hand_computed():
    """3 of 5: p = 0.6, z = 1.96 gives [0.2307, 0.8824] (Wilson score interval)."""
    low, high = wilson_interval(3, 5)
    assert low == pytest.approx(0.2307, abs=1e-4)
    assert high == pytest.approx(0.8824, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(5, 5)
    assert high == 1.0 and low == pytest.approx(0.5655, abs=1e-4)


def test_alternating_outcomes_are_flaky_with_the_right_numbers():
    trials = [
        Trial(
            iteration=i, passed=i % 2 == 0, score=1.0 if i % 2 == 0 else 0.0, turns=2 + i % 2, termination=t
        )
        for i, t in enumerate(["condition met", "max turns", "condition met", "max turns", "condition met"])
    ]
    stats = iteration_stats(trials, pass_rate_threshold=0.5)
    assert (stats.iterations, stats.pass_count, stats.pass_rate) == (5, 3, 0.6)
    assert stats.mean == pytest.approx(0.6)
    assert stats.std_dev == pytest.approx(math.sqrt(0.24))  # population: sqrt(mean of squared deviations)
    assert (stats.min, stats.max) == (0.0, 1.0)
    assert (stats.avg_turns, stats.min_turns, stats.max_turns) == (pytest.approx(2.4), 2, 3)
    assert stats.termination_counts == {"condition met": 3, "max turns": 2}
    assert stats.flaky and stats.passed
    assert stats.representative == 0  # |1.0 - 0.6| = 0.4 < |0.0 - 0.6|; earliest of the ties


def test_consistent_outcomes_are_not_flaky_and_threshold_applies():
    trials = [Trial(iteration=i, passed=False, score=s, turns=1) for i, s in enumerate([0.2, 0.4, 0.3])]
    stats = iteration_stats(trials, pass_rate_threshold=0.5)
    assert not stats.flaky and not stats.passed
    assert stats.mean == pytest.approx(0.3) and stats.representative == 2


def test_errored_iterations_are_counted_apart():
    trials = [Trial(0, True, 1.0, 1), Trial(1, False, None, 0, "error"), Trial(2, True, 1.0, 1)]
    stats = iteration_stats(trials)
    assert stats.errors == 1 and stats.pass_count == 2 and stats.pass_rate == 1.0
    assert stats.termination_counts == {"error": 1}


class Stage:
    def __init__(self, text, until_turn=None):
        self.text, self.until_turn = text, until_turn


def test_persona_schedule_switches_by_turn():
    schedule = [Stage("patient", 2), Stage("impatient", 5), Stage("in a hurry")]
    assert [persona_for(schedule, turn) for turn in (1, 2, 3, 5, 6, 40)] == [
        "patient", "patient", "impatient", "impatient", "in a hurry", "in a hurry",
    ]  # fmt: skip
    assert persona_for("plain", 9) == "plain"


def test_simulated_user_sees_the_conversation_from_its_side():
    live = [{"role": "user", "content": "A table for two."}, {"role": "assistant", "content": "Which day?"}]
    system, ask = simulator_messages("You are a friendly customer.", live)
    assert system["role"] == "system" and ask["role"] == "user"
    assert system["content"].startswith("You are a friendly customer.\n\n")
    assert system["content"].endswith("You: A table for two.\nAgent: Which day?")
    assert clean_reply('You: "Tomorrow at 7pm"') == "Tomorrow at 7pm"


def test_an_eval_whose_iterations_were_all_cancelled_is_cancelled_not_error():
    suite = load_saved_suite(
        "name: s\nmodel: mock\niterations: 3\nevals:\n  - prompt: hi\n    checks: [{contains: hi}]\n"
    )
    row = SimpleNamespace(index=0, turn_count=0, termination="", kind="single-turn", score=None)
    cancelled = [SimpleNamespace(**vars(row), iteration=i, status="cancelled") for i in range(3)]
    assert [item.status for item in iterated_results(suite, cancelled)] == ["cancelled"]
    one_error = [*cancelled[:2], SimpleNamespace(**vars(row), iteration=2, status="error")]
    assert [item.status for item in iterated_results(suite, one_error)] == ["error"]
