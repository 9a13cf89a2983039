"""Conversation trees (vibecheck's format): which follow-up is sent, when, and for which failed check;
the eval's kind.

Everything goes through engine.conversation.run_eval with an in-test scripted ChatClient that records the
messages of every call. Run without Django: ``python -m pytest tests/engine/test_engine_followups.py -p no:django``.
"""

from __future__ import annotations

from tests.engine.doubles import make_eval
from tests.engine.followup_play import PROMPTS, THREE_LEVELS, full_run, play, sent_prompts

# --- the three outcomes --------------------------------------------------------------------------------


def test_pass_on_turn_one_sends_no_followup():
    """All checks pass on turn 1: passed, one model call, passed_on_turn 1."""
    result, agent = play(THREE_LEVELS, ["15 * 7 = 105"])
    assert result.status == "passed"
    assert result.score == 1.0
    assert result.passed_on_turn == 1
    assert result.verdict == "passed on turn 1"
    assert len(result.turns) == 1
    assert len(agent.calls) == 1
    assert result.turns[0].passed is True
    assert result.turns[0].followup_reason is None


def test_pass_on_turn_two_via_check_attached_followup():
    """A failed check carrying prompt+checks sends that follow-up; the eval passes on turn 2."""
    ev = make_eval(
        """
prompt: What is 15 * 7?
checks:
  - match: "*105*"
    prompt: Please recalculate.
    checks:
      - match: "*105*"
"""
    )
    result, agent = play(ev, ["100", "105"])
    assert result.status == "passed"
    assert result.passed_on_turn == 2
    assert result.verdict == "passed on turn 2"
    assert sent_prompts(agent) == ["What is 15 * 7?", "Please recalculate."]
    assert [t.passed for t in result.turns] == [False, True]
    assert [t.turn for t in result.turns] == [1, 2]
    assert result.turns[1].node == "evals[0].checks[0]"
    assert result.kind == "multi-turn"


def test_fail_after_every_followup():
    """Every level fails: the eval fails after 3 turns with no passed_on_turn."""
    result, agent = play(THREE_LEVELS, ["100", "100", "still 100"])
    assert result.status == "failed"
    assert result.score == 0.0
    assert result.passed_on_turn is None
    assert result.verdict == "failed after 3 turns"
    assert sent_prompts(agent) == PROMPTS
    assert [t.prompt for t in result.turns] == PROMPTS
    assert [t.node for t in result.turns] == [
        "evals[0]",
        "evals[0].checks[1]",
        "evals[0].checks[1].checks[1]",
    ]


def test_single_turn_failure_without_followups():
    """No follow-up anywhere: a failed check ends the eval after 1 turn."""
    ev = make_eval("prompt: hi\nchecks:\n  - match: '*hello*'\n")
    result, agent = play(ev, ["bye"])
    assert (result.status, result.verdict, result.kind) == ("failed", "failed after 1 turn", "single-turn")
    assert len(agent.calls) == 1


def test_pass_on_last_level():
    """Passing at the third level: passed on turn 3."""
    result, _ = play(THREE_LEVELS, ["100", "100", "105"])
    assert (result.status, result.passed_on_turn) == ("passed", 3)


# --- which follow-up fires -----------------------------------------------------------------------------


def test_first_failed_check_carrying_followup_wins():
    """Two failed checks carry follow-ups: the first in list order fires, not the later one."""
    ev = make_eval(
        """
prompt: Write a function.
checks:
  - match: "*def*"
    prompt: Use def.
    checks: [{match: "*def*"}]
  - match: "*return*"
    prompt: Add a return.
    checks: [{match: "*return*"}]
"""
    )
    result, agent = play(ev, ["lambda: 1", "def f(): return 1"])
    assert sent_prompts(agent)[1] == "Use def."
    assert result.turns[1].node == "evals[0].checks[0]"


def test_first_failed_carrier_wins_even_if_an_earlier_check_failed_without_one():
    """An earlier failed check without a follow-up is skipped; the first failed carrier fires."""
    ev = make_eval(
        """
prompt: Write a function.
checks:
  - match: "*def*"
  - match: "*return*"
    prompt: Add a return.
    checks: [{match: "*return*"}]
  - prompt: Plain follow-up.
    checks: [{match: "*x*"}]
"""
    )
    result, agent = play(ev, ["nothing", "return 1"])
    assert sent_prompts(agent)[1] == "Add a return."
    assert result.status == "passed"


def test_passed_check_followup_is_not_used():
    """A follow-up attached to a check that passed never fires; the failed check's plain fallback does."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*def*"
    prompt: Attached to a passing check.
    checks: [{match: "*def*"}]
  - match: "*return*"
  - prompt: Level follow-up.
    checks: [{match: "*return*"}]
"""
    )
    result, agent = play(ev, ["def f(): pass", "def f(): return 1"])
    assert sent_prompts(agent)[1] == "Level follow-up."
    assert result.turns[1].node == "evals[0].checks[2]"


def test_passed_check_followup_alone_means_failure():
    """When the only follow-up hangs on a passed check, a failed level ends the eval."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*def*"
    prompt: Attached to a passing check.
    checks: [{match: "*def*"}]
  - match: "*return*"
"""
    )
    result, agent = play(ev, ["def f(): pass"])
    assert (result.status, result.verdict) == ("failed", "failed after 1 turn")
    assert len(agent.calls) == 1


def test_plain_followup_fires_when_no_failed_check_carries_one():
    """No failed check carries a follow-up: the level's FIRST pure {prompt, checks} item fires."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*a*"
  - prompt: First plain.
    checks: [{match: "*a*"}]
  - prompt: Second plain.
    checks: [{match: "*a*"}]
"""
    )
    result, agent = play(ev, ["b", "a"])
    assert sent_prompts(agent)[1] == "First plain."
    assert result.turns[1].node == "evals[0].checks[1]"
    assert result.passed_on_turn == 2


def test_all_checks_passing_ignores_followups():
    """A level whose checks all pass ends the eval, whatever follow-ups the level holds."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*a*"
    prompt: Attached.
    checks: [{match: "*a*"}]
  - prompt: Plain.
    checks: [{match: "*a*"}]
"""
    )
    result, agent = play(ev, ["a"])
    assert (result.status, result.passed_on_turn) == ("passed", 1)
    assert len(agent.calls) == 1


def test_every_check_of_the_level_must_pass():
    """One passing and one failing check: the level fails and the follow-up fires."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*a*"
  - contains: b
  - prompt: Again.
    checks: [{contains: b}]
"""
    )
    result, _ = play(ev, ["a", "b"])
    assert [t.passed for t in result.turns] == [False, True]
    assert [[c.passed for c in t.checks] for t in result.turns] == [[True, False], [True]]


def test_followup_checks_replace_the_parent_level():
    """At a follow-up, only that follow-up's checks are graded (the parent's are not re-applied)."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*a*"
  - prompt: Say b.
    checks: [{match: "*b*"}]
"""
    )
    result, _ = play(ev, ["x", "b"])
    assert result.status == "passed"
    assert [c.label for c in result.turns[1].checks] == ['match "*b*"']


# --- or blocks -----------------------------------------------------------------------------------------

OR_MEMBER_FOLLOWUP = make_eval(
    """
prompt: What is 15 * 7?
checks:
  - or:
      - match: "*105*"
      - contains: one hundred and five
        prompt: Give the number.
        checks: [{match: "*105*"}]
"""
)


def test_or_followup_does_not_fire_when_an_option_passes():
    """or block: one option passing means the block passes; the member's follow-up is not sent."""
    result, agent = play(OR_MEMBER_FOLLOWUP, ["one hundred and five"])
    assert (result.status, result.passed_on_turn) == ("passed", 1)
    assert len(agent.calls) == 1


def test_or_member_followup_fires_when_every_option_fails():
    """or block: a follow-up inside the or-list fires when every option fails."""
    result, agent = play(OR_MEMBER_FOLLOWUP, ["one hundred", "105"])
    assert sent_prompts(agent) == ["What is 15 * 7?", "Give the number."]
    assert (result.status, result.passed_on_turn) == ("passed", 2)
    assert result.turns[1].node == "evals[0].checks[0].or[1]"
    assert "every option failed" in result.turns[1].followup_reason


def test_or_member_followup_not_used_when_block_passes_but_another_check_fails():
    """A passed or-block's member follow-up is not used when a different check fails."""
    ev = make_eval(
        """
prompt: Q
checks:
  - or:
      - match: "*105*"
        prompt: Member follow-up.
        checks: [{match: "*105*"}]
      - contains: hundred
  - contains: seven
"""
    )
    result, agent = play(ev, ["one hundred"])
    assert (result.status, result.verdict) == ("failed", "failed after 1 turn")
    assert len(agent.calls) == 1


def test_or_items_own_followup_is_preferred_over_members():
    """or block carrying its own prompt+checks: that follow-up is preferred over a member's."""
    ev = make_eval(
        """
prompt: Q
checks:
  - or:
      - match: "*105*"
        prompt: Member follow-up.
        checks: [{match: "*105*"}]
      - contains: hundred and five
    prompt: Block follow-up.
    checks: [{match: "*105*"}]
"""
    )
    result, agent = play(ev, ["100", "105"])
    assert sent_prompts(agent)[1] == "Block follow-up."
    assert result.turns[1].node == "evals[0].checks[0]"
    assert result.status == "passed"


def test_or_followup_before_later_failed_carrier():
    """A failed or-block's member follow-up counts at the block's position in list order."""
    ev = make_eval(
        """
prompt: Q
checks:
  - or:
      - match: "*105*"
        prompt: Member follow-up.
        checks: [{match: "*105*"}]
  - contains: seven
    prompt: Later carrier.
    checks: [{contains: seven}]
"""
    )
    _, agent = play(ev, ["100", "105"])
    assert sent_prompts(agent)[1] == "Member follow-up."


def test_resumed_request_rebuilds_the_conversation_from_prior_turns():
    """The first new request after resuming carries the stored turns' messages."""
    original, first_agent = full_run()
    _, agent = play(THREE_LEVELS, ["101", "105"], prior=original.turns[:1])
    assert agent.messages[0] == first_agent.messages[1]


# --- kind ----------------------------------------------------------------------------------------------


def test_kind_multi_turn_for_trees_even_when_passing_on_turn_one():
    """An eval with a follow-up is a multi-turn eval even if it passed on turn 1."""
    result, _ = play(THREE_LEVELS, ["105"])
    assert result.kind == "multi-turn"


def test_kind_multi_turn_for_or_member_followups():
    """A follow-up nested in a top-level or-list also makes the eval a multi-turn tree."""
    result, _ = play(OR_MEMBER_FOLLOWUP, ["105"])
    assert result.kind == "multi-turn"
