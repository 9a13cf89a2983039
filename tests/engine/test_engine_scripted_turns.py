"""Scripted turns with their own checks: which turns are graded, aggregation, on_turn_failure and validation.

Everything goes through engine.conversation.run_eval with an in-test scripted ChatClient. No Django, no patching.
"""

from __future__ import annotations

import pytest

from tests.engine.doubles import ScriptedClient, make_eval
from tests.engine.scripted_play import (
    THREE_CHECKED,
    play,
    problems_of,
)

# --- `turns`: checks on chosen turns, aggregation, on_turn_failure ------------------------------------

NAME_MEMORY = make_eval(
    """
turns:
  - input: My name is Alice.
  - input: What is my name?
    checks: [{match: "*Alice*"}]
"""
)


def test_turns_grade_only_the_turns_with_checks():
    result, agent = play(NAME_MEMORY, ["Nice to meet you.", "Your name is Alice."])
    assert len(agent.messages) == 2
    assert agent.messages[1][-3:] == [
        {"role": "user", "content": "My name is Alice."},
        {"role": "assistant", "content": "Nice to meet you."},
        {"role": "user", "content": "What is my name?"},
    ]
    assert [(turn.checks, turn.passed) for turn in result.turns][0] == ([], None)
    assert result.turns[1].checks[0].passed is True
    assert (result.status, result.turns_passed, result.turns_total, result.conversation) == (
        "passed",
        1,
        1,
        "turns",
    )
    assert [turn.node for turn in result.turns] == ["evals[0].turns[0]", "evals[0].turns[1]"]


def test_turn_checks_read_their_own_turns_reply():
    """A check on turn 2 sees turn 2's reply, not the conversation's last one."""
    ev = make_eval(
        """
turns:
  - input: one
  - input: two
    checks: [{contains: TWO}]
  - input: three
"""
    )
    result, _ = play(ev, ["x", "reply TWO", "reply three"])
    assert result.status == "passed"
    result, _ = play(ev, ["TWO", "x", "TWO"])
    assert result.status == "failed"


@pytest.mark.parametrize(
    ("aggregation", "threshold", "score", "status"),
    [
        ("mean", 0.6, 2 / 3, "passed"),
        ("mean", 0.7, 2 / 3, "failed"),
        ("min", 0.1, 0.0, "failed"),
        ("max", 1.0, 1.0, "passed"),
    ],
)
def test_aggregation_combines_turn_scores(aggregation, threshold, score, status):
    ev = make_eval(THREE_CHECKED + f"aggregation: {aggregation}\npass_threshold: {threshold}\n")
    result, agent = play(ev, ["A", "nope", "C"])
    assert len(agent.messages) == 3  # continue is the default
    assert result.score == pytest.approx(score)
    assert result.status == status
    assert (result.turns_passed, result.turns_total) == (2, 3)


def test_on_turn_failure_stop_ends_the_conversation_and_fails_it():
    ev = make_eval(THREE_CHECKED + "on_turn_failure: stop\naggregation: max\npass_threshold: 0.0\n")
    result, agent = play(ev, ["A", "nope"])
    assert len(agent.messages) == 2
    assert len(result.turns) == 2
    assert result.status == "failed"  # even though max >= 0.0: a stopped conversation is not finished
    assert "stopped after turn 2" in result.verdict


def test_on_turn_failure_continue_plays_every_turn():
    ev = make_eval(THREE_CHECKED + "on_turn_failure: continue\n")
    result, agent = play(ev, ["nope", "nope", "C"])
    assert len(agent.messages) == 3
    assert "stopped" not in result.verdict


def test_turn_score_is_the_mean_of_its_checks():
    ev = make_eval(
        "turns:\n  - input: one\n    checks: [{contains: A}, {contains: B}]\npass_threshold: 0.5\n"
    )
    result, _ = play(ev, ["only A"])
    assert result.score == 0.5
    assert result.status == "passed"
    assert (result.turns_passed, result.turns_total) == (0, 1)


def test_passing_judge_checks_pass_the_conversation():
    """A check that passes its own threshold counts in full: a judge's 0.9 (threshold 0.5) must not fail
    a conversation whose every check passed against the default pass_threshold of 1.0."""
    ev = make_eval(
        """
turns:
  - input: Hello
  - input: Tell me a joke.
    checks: [{llm_judge: {criteria: Is a joke}}, {match: "*chicken*"}]
"""
    )
    judge = ScriptedClient(['{"score": 0.9, "reason": "A pun."}'])
    result, _ = play(ev, ["Hi", "Why did the chicken..."], judge=judge)
    assert result.turns[1].checks[0].passed is True
    assert (result.status, result.score) == ("passed", 1.0)


def test_a_failed_judge_check_keeps_partial_credit():
    ev = make_eval(
        "turns:\n  - input: Tell me a joke.\n    checks: [{llm_judge: {criteria: Is a joke, threshold: 0.5}}]\n"
        "pass_threshold: 0.3\n"
    )
    judge = ScriptedClient(['{"score": 0.4, "reason": "Barely."}'])
    result, _ = play(ev, ["Knock knock."], judge=judge)
    assert result.turns[0].checks[0].passed is False
    assert (result.status, result.score, result.turns_passed) == ("passed", 0.4, 0)


def test_eval_checks_on_turns_grade_the_last_reply():
    ev = make_eval(
        "turns:\n  - input: one\n    checks: [{contains: A}]\n  - input: two\nchecks: [{contains: Z}]\n"
    )
    result, _ = play(ev, ["A", "Z"])
    assert [len(turn.checks) for turn in result.turns] == [1, 1]
    assert result.status == "passed"
    result, _ = play(ev, ["A", "no"])
    assert result.status == "failed"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("input: a\nground_truth: b\naggregation: min", "apply to `turns` conversations"),
        ("input: a\nground_truth: b\non_turn_failure: stop", "apply to `turns` conversations"),
        ("turns: [{input: a}]", "no turn has checks"),
        ("turns: []", "`turns` needs at least one turn"),
        ("turns: [{input: a, checks: [{contains: x}]}]\nground_truth: x", "give `turns` their own checks"),
        (
            "turns: [{input: a, checks: [{contains: x, prompt: again, checks: [{contains: x}]}]}]",
            "follow-ups (prompt + checks) belong to `prompt` conversations only",
        ),
        ("input: []\nchecks: [{contains: x}]", "`input` needs at least one message"),
        ("input: a", "nothing grades this conversation"),
        ("input: a\nprompt: b\nchecks: [{contains: x}]", "use one of prompt, input, turns or reply"),
        ("input: a\nground_truth: b\naggregation: median", "Input should be"),
    ],
)
def test_scripted_validation_errors(body, needle):
    indented = "\n".join("    " + line for line in body.splitlines()).replace("    ", "  - ", 1)
    problems = problems_of(f"name: s\nevals:\n{indented}\n")
    assert any(needle in problem.message for problem in problems), problems
    assert all(problem.path.startswith("evals[0]") and problem.line >= 3 for problem in problems)
