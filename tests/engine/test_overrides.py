"""Reviewers' overrides (engine.overrides): one check's outcome overturned, and the conversation's verdict
recomputed by its own driver's rule. The turns come from real plays of each style (run_eval with a scripted
client); the stored turns are never changed."""

from __future__ import annotations

import pytest

from engine.conversation import EngineContext, run_eval
from engine.drivers import Defaults, driver_for
from engine.overrides import GRADE, OverrideError, apply, check, reverdict, targets
from engine.results import OverrideRecord
from tests.engine.doubles import ScriptedClient, make_eval

TREE = make_eval(
    """
prompt: What is 15 * 7?
checks:
  - match: "*105*"
  - prompt: Recalculate 15 multiplied by 7.
    checks:
      - match: "*105*"
      - prompt: "Hint: 10*7 + 5*7."
        checks:
          - match: "*105*"
"""
)


def play(ev, replies, defaults=None):
    ctx = EngineContext(
        agent=ScriptedClient(replies),
        model="m",
        judge=ScriptedClient([]),
        judge_model="j",
        defaults=defaults or Defaults(),
    )
    return run_eval(ev, 0, "e", ctx)


def override(turn, target, passed, note="reviewed"):
    return OverrideRecord(turn=turn, target=target, passed=passed, note=note)


def test_a_tree_that_now_passes_on_an_earlier_turn_passes_there():
    result = play(TREE, ["It is 100.", "It is 95.", "It is 105."])
    assert (result.status, result.passed_on_turn, len(result.turns)) == ("passed", 3, 3)
    driver = driver_for(TREE, 0, Defaults())

    reviewed = reverdict(driver, result.turns, [override(1, "checks[0]", True)])

    assert reviewed.verdict.outcome == "passed" and reviewed.verdict.passed_on_turn == 1
    assert [turn.turn for turn in reviewed.turns] == [1]
    assert "turns after turn 1 no longer count" in reviewed.note
    assert result.turns[0].checks[0].passed is False  # the stored record is untouched


def test_a_tree_whose_deciding_turn_is_overturned_fails_with_the_unplayed_follow_up_said():
    result = play(TREE, ["It is 100.", "It is 105."])
    assert (result.status, result.passed_on_turn) == ("passed", 2)

    reviewed = reverdict(driver_for(TREE, 0, Defaults()), result.turns, [override(2, "checks[0]", False)])

    assert reviewed.verdict.outcome == "failed" and reviewed.verdict.passed_on_turn is None
    assert reviewed.verdict.score == 0.0
    assert "never played" in reviewed.note
    overturned = reviewed.turns[1].checks[0]
    assert overturned.overridden and overturned.passed is False and reviewed.turns[1].passed is False


def test_a_failed_tree_fails_when_an_override_fixes_nothing_that_decides():
    result = play(TREE, ["100", "95", "90"])
    assert result.status == "failed"
    reviewed = reverdict(driver_for(TREE, 0, Defaults()), result.turns, [override(3, "checks[0]", True)])
    assert reviewed.verdict.outcome == "passed" and reviewed.verdict.passed_on_turn == 3
    assert reviewed.note == ""


def test_scripted_turns_are_recounted_with_the_overridden_grade():
    ev = make_eval("input: [France, Spain]\nground_truth: [Paris, Madrid]")
    result = play(ev, ["Paris", "Barcelona"])
    assert result.status == "failed" and result.turns_total == 2
    assert [item.key for item in targets(result.turns[1])] == [GRADE]

    reviewed = reverdict(driver_for(ev, 0, Defaults()), result.turns, [override(2, GRADE, True)])

    assert reviewed.verdict.outcome == "passed" and reviewed.verdict.score == 1.0
    assert reviewed.turns[1].grade.overridden


def test_scripted_stop_on_failure_ends_at_a_turn_that_now_fails():
    ev = make_eval(
        """
turns:
  - {input: One, checks: [{contains: one}]}
  - {input: Two, checks: [{contains: two}]}
on_turn_failure: stop
"""
    )
    result = play(ev, ["one", "two"])
    assert result.status == "passed"
    reviewed = reverdict(driver_for(ev, 0, Defaults()), result.turns, [override(1, "checks[0]", False)])
    assert reviewed.verdict.outcome == "failed"
    assert len(reviewed.turns) == 1 and "no longer count" in reviewed.note


def test_an_override_must_name_an_outcome_and_change_it():
    result = play(TREE, ["100", "105"])
    with pytest.raises(OverrideError, match="no turn 7"):
        check(result.turns, 7, "checks[0]", True)
    with pytest.raises(OverrideError, match="no outcome 'checks\\[4\\]'"):
        check(result.turns, 1, "checks[4]", True)
    with pytest.raises(OverrideError, match="already passed"):
        check(result.turns, 2, "checks[0]", True)
    assert check(result.turns, 1, "checks[0]", True).label == 'match "*105*"'


def test_apply_without_overrides_gives_the_same_turns():
    result = play(TREE, ["100", "105"])
    assert apply(result.turns, []) == result.turns
