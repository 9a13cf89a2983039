"""Simulated users (as in @agtlantis/eval): follow-ups, persona schedules, outcome policies, termination
reasons, what the simulated user is sent, token accounting and resuming. Stop conditions have a file of their own.

Everything goes through engine.conversation.run_eval with in-test clients that record every call. The judge
client plays both the judge and, by default, the simulated user (the simulated user's model defaults to the
suite's judge), so it answers by looking at the system prompt. No Django, no patching.
"""

from __future__ import annotations

import pytest

from engine.clients import EndpointError
from engine.conversation import ResumeMismatch
from engine.results import Usage
from tests.engine.doubles import make_eval
from tests.engine.simulated_users import (
    AGENT_USAGE,
    CONFIRMED,
    JUDGE_USAGE,
    PERSONA,
    SYSTEM,
    USER_USAGE,
    Judge,
    expected_user_system,
    play,
    sim,
    system_of_user_call,
)

# --- the conversation: follow-ups, simulated user, termination ------------------------------------------


BOOKING = sim(
    f"""
persona: {PERSONA}
follow_ups: [{{input: "Tomorrow at 7pm"}}]
max_turns: 8
stop_when: {{field_equals: {{path: status, value: confirmed}}}}
"""
)


def test_booking_flow_stops_when_the_condition_is_met_on_turn_3():
    judge = Judge(user_lines=['You: "Alice."'])
    result, agent, judge = play(
        BOOKING, ["Sure! For which day and time?", "Great, under what name?", CONFIRMED], judge
    )
    assert (result.status, result.score, result.conversation, result.kind) == (
        "passed", 1.0, "simulated", "multi-turn",
    )  # fmt: skip
    assert result.termination == 'condition met: field_equals status = "confirmed"'
    assert result.verdict == 'passed after 3 turns: condition met: field_equals status = "confirmed"'
    assert [t.prompt for t in result.turns] == [
        "I want to book a table for two.",
        "Tomorrow at 7pm",
        "Alice.",
    ]
    assert [t.termination for t in result.turns] == [None, None, result.termination]
    assert [t.node for t in result.turns] == ["evals[0]", "evals[0].simulate", "evals[0].simulate"]
    # The agent saw the whole conversation, its system prompt first; the simulated user's label and quotes
    # were cleaned off its line.
    assert agent.calls[2] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "I want to book a table for two."},
        {"role": "assistant", "content": "Sure! For which day and time?"},
        {"role": "user", "content": "Tomorrow at 7pm"},
        {"role": "assistant", "content": "Great, under what name?"},
        {"role": "user", "content": "Alice."},
    ]
    # The scripted follow-up came first; the simulated user spoke once, seeing the conversation from its side.
    (call,) = judge.user_calls
    assert system_of_user_call(call) == expected_user_system(
        PERSONA,
        "You: I want to book a table for two.\nAgent: Sure! For which day and time?\n"
        "You: Tomorrow at 7pm\nAgent: Great, under what name?",
    )
    assert judge.models == [("user", "judge-m")]  # the simulated user defaults to the suite's judge


def test_simulated_user_never_sees_the_agents_system_prompt_or_given_history():
    ev = make_eval(
        """
messages:
  - {role: user, content: Earlier I asked about parking.}
  - {role: assistant, content: There is a car park next door.}
prompt: I want to book a table for two.
simulate: {persona: A customer., max_turns: 2}
"""
    )
    result, agent, judge = play(ev, ["For when?", "Booked."], Judge(user_lines=["Friday."]))
    assert agent.calls[0][:3] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Earlier I asked about parking."},
        {"role": "assistant", "content": "There is a car park next door."},
    ]
    system = system_of_user_call(judge.user_calls[0])
    assert system == expected_user_system(
        "A customer.", "You: I want to book a table for two.\nAgent: For when?"
    )
    assert SYSTEM not in system and "parking" not in system
    assert result.termination == "max turns (2)" and result.status == "failed"


def test_persona_schedule_switches_by_turn():
    ev = sim(
        """
persona:
  - {until_turn: 2, text: You are patient and friendly.}
  - {until_turn: 4, text: You are becoming slightly impatient.}
  - {text: You are in a hurry.}
max_turns: 6
"""
    )
    judge = Judge(user_lines=["u2", "u3", "u4", "u5", "u6"])
    result, _, judge = play(ev, [f"a{n}" for n in range(1, 7)], judge)
    personas = [system_of_user_call(call).split("\n\n")[0] for call in judge.user_calls]
    assert personas == [
        "You are patient and friendly.",  # writes turn 2
        "You are becoming slightly impatient.",  # turn 3
        "You are becoming slightly impatient.",  # turn 4
        "You are in a hurry.",  # turn 5
        "You are in a hurry.",  # turn 6
    ]
    assert [t.prompt for t in result.turns] == [
        "I want to book a table for two.",
        "u2",
        "u3",
        "u4",
        "u5",
        "u6",
    ]
    # Each call carries the conversation so far, one more exchange each time.
    assert system_of_user_call(judge.user_calls[-1]).endswith("You: u5\nAgent: a5")
    assert result.termination == "max turns (6)"


def test_a_schedule_whose_last_stage_has_an_end_keeps_it_afterwards():
    ev = sim("persona: [{until_turn: 2, text: first}, {until_turn: 3, text: second}]\nmax_turns: 5")
    _, _, judge = play(ev, ["a"] * 5, Judge(user_lines=["u"] * 4))
    assert [system_of_user_call(c).split("\n\n")[0] for c in judge.user_calls] == [
        "first", "second", "second", "second",
    ]  # fmt: skip


def test_follow_ups_are_used_first_each_for_its_turns_then_the_simulated_user():
    ev = sim(
        """
persona: p
follow_ups: [{input: one, turns: 2}, {input: two}]
max_turns: 6
stop_when: {after_turns: 5}
"""
    )
    result, _, judge = play(ev, ["a1", "a2", "a3", "a4", "a5"], Judge(user_lines=["sim"]))
    assert [t.prompt for t in result.turns] == ["I want to book a table for two.", "one", "one", "two", "sim"]
    assert [t.user_usage.total_tokens for t in result.turns] == [0, 0, 0, 0, USER_USAGE.total_tokens]
    assert len(judge.user_calls) == 1
    assert result.termination == "condition met: after_turns 5" and result.status == "passed"


def test_inf_follow_up_repeats_until_max_turns_and_the_simulated_user_is_never_asked():
    ev = sim("persona: p\nfollow_ups: [{input: first}, {input: Go on., turns: .inf}]\nmax_turns: 5")
    result, _, judge = play(ev, ["a"] * 5, Judge())
    assert [t.prompt for t in result.turns] == [
        "I want to book a table for two.", "first", "Go on.", "Go on.", "Go on.",
    ]  # fmt: skip
    assert judge.calls == 0
    assert (result.termination, result.status) == ("max turns (5)", "failed")


def test_inf_follow_up_stops_on_the_condition():
    ev = sim("follow_ups: [{input: Go on., turns: inf}]\nstop_when: {contains: done}")
    result, _, _ = play(ev, ["no", "no", "done"])
    assert [t.prompt for t in result.turns] == ["I want to book a table for two.", "Go on.", "Go on."]
    assert result.termination == 'condition met: contains "done"' and result.status == "passed"


def test_running_out_of_inputs_without_a_simulated_user_fails_with_that_reason():
    ev = sim("follow_ups: [{input: Tomorrow}, {input: Alice, turns: 2}]\nstop_when: {contains: confirmed}")
    result, agent, judge = play(ev, ["When?", "Name?", "Name, please?", "Still need a name."])
    assert len(agent.calls) == 4 and judge.calls == 0
    assert (result.status, result.score, result.termination) == ("failed", 0.0, "inputs exhausted")
    assert result.verdict == "failed after 4 turns: inputs exhausted"


def test_no_persona_and_no_follow_ups_is_one_turn_then_inputs_exhausted():
    result, _, _ = play(sim("max_turns: 5"), ["Hello"])
    assert (len(result.turns), result.termination, result.status) == (1, "inputs exhausted", "failed")


def test_condition_met_on_the_first_reply_needs_no_other_input():
    result, agent, judge = play(sim("stop_when: {contains: confirmed}"), ["Booked and confirmed."])
    assert (len(agent.calls), judge.calls) == (1, 0)
    assert (result.status, result.kind, result.termination) == (
        "passed", "multi-turn", 'condition met: contains "confirmed"',
    )  # fmt: skip


def test_the_condition_is_checked_after_every_reply_before_max_turns():
    """Met on the very turn max_turns is reached: the condition is the reason, on_condition_met decides."""
    ev = sim("persona: p\nmax_turns: 2\nstop_when: {contains: confirmed}\non_max_turns: fail")
    result, _, _ = play(ev, ["When?", "confirmed"], Judge(user_lines=["now"]))
    assert (result.termination, result.status) == ('condition met: contains "confirmed"', "passed")


@pytest.mark.parametrize(
    ("policy", "replies", "termination", "status"),
    [
        ("", ["a", "confirmed"], 'condition met: contains "confirmed"', "passed"),  # default pass
        ("on_condition_met: pass", ["a", "confirmed"], 'condition met: contains "confirmed"', "passed"),
        ("on_condition_met: fail", ["a", "confirmed"], 'condition met: contains "confirmed"', "failed"),
        ("", ["a", "b", "c"], "max turns (3)", "failed"),  # default fail
        ("on_max_turns: fail", ["a", "b", "c"], "max turns (3)", "failed"),
        ("on_max_turns: pass", ["a", "b", "c"], "max turns (3)", "passed"),
        ("on_condition_met: fail\non_max_turns: pass", ["a", "b", "c"], "max turns (3)", "passed"),
        ("on_condition_met: fail\non_max_turns: pass", ["confirmed"], 'condition met: contains "confirmed"',
         "failed"),
    ],
)  # fmt: skip
def test_outcome_policies(policy, replies, termination, status):
    ev = sim(f"persona: p\nmax_turns: 3\nstop_when: {{contains: confirmed}}\n{policy}")
    result, _, _ = play(ev, replies, Judge(user_lines=["u"] * 3))
    assert (result.termination, result.status, result.score) == (
        termination, status, 1.0 if status == "passed" else 0.0,
    )  # fmt: skip
    assert result.verdict.startswith(f"{status} after {len(replies)} turn")


def test_the_termination_reason_names_the_condition_that_was_met():
    ev = sim(
        """
persona: p
stop_when:
  any:
    - field_equals: {path: booking.status, value: confirmed}
    - natural_language: {prompt: 'Did the user give up?', threshold: 0.8}
"""
    )
    judge = Judge(user_lines=["u"], confidences=['{"score": 0.2}', '{"score": 0.9, "reason": "Gave up."}'])
    result, _, judge = play(ev, ["a", "b"], judge)
    assert result.termination == (
        'condition met: natural_language "Did the user give up?" (confidence 0.90, threshold 0.8)'
    )
    # The natural-language judge was asked after each reply, with the conversation so far.
    assert len(judge.nl_calls) == 2
    assert judge.nl_calls[1][1]["content"].endswith(
        "[Assistant]:\nb\n\nQuestion: Did the user give up?\nRespond with the JSON object only."
    )


# --- final checks -----------------------------------------------------------------------------------------


def test_checks_grade_the_final_reply_only_and_llm_judge_can_grade_the_whole_conversation():
    ev = sim(
        f"persona: {PERSONA}\nmax_turns: 4\nstop_when: {{field_equals: {{path: status, value: confirmed}}}}",
        """checks:
  - field_is_set: booking.time
  - llm_judge: {criteria: "Confirmed date, time and party size", scope: conversation}
""",
    )
    judge = Judge(user_lines=["Friday at 7."], verdicts=['{"score": 0.9, "reason": "All there."}'])
    result, _, judge = play(ev, ["When?", CONFIRMED], judge)
    assert [len(t.checks) for t in result.turns] == [0, 2]
    assert [t.passed for t in result.turns] == [None, True]
    assert [(c.type, c.passed) for c in result.turns[-1].checks] == [
        ("field_is_set", True),
        ("llm_judge", True),
    ]
    (call,) = judge.judge_calls
    assert call[1]["content"] == (
        "Criteria:\nConfirmed date, time and party size\n\n"
        f"Conversation:\n[System]:\n{SYSTEM}\n\n[User]:\nI want to book a table for two.\n\n"
        f"[Assistant]:\nWhen?\n\n[User]:\nFriday at 7.\n\n[Assistant]:\n{CONFIRMED}\n\n"
        "Grade the whole conversation against the criteria. Respond with the JSON object only."
    )
    assert "final reply" not in call[0]["content"]
    assert result.status == "passed"


def test_failing_final_checks_fail_the_eval_even_when_the_condition_is_met():
    ev = sim("stop_when: {contains: confirmed}", "checks: [{contains: '19:00'}]")
    result, _, _ = play(ev, ["Table confirmed for 18:00."])
    assert result.termination == 'condition met: contains "confirmed"'
    assert (result.status, result.score) == ("failed", 0.0)
    assert result.verdict == 'failed after 1 turn: condition met: contains "confirmed"; final checks failed'


def test_final_checks_also_grade_a_conversation_that_hit_max_turns():
    ev = sim("persona: p\nmax_turns: 2\non_max_turns: pass", "checks: [{contains: thanks}]")
    result, _, _ = play(ev, ["hi", "thanks, bye"], Judge(user_lines=["u"]))
    assert result.status == "passed" and result.turns[-1].checks[0].passed
    result, _, _ = play(ev, ["thanks", "bye"], Judge(user_lines=["u"]))
    assert result.status == "failed"  # the first reply had the word; the final one is graded


# --- models, tokens, errors -------------------------------------------------------------------------------


def test_simulate_model_picks_the_simulated_users_endpoint():
    other = Judge(user_lines=["Friday."])
    seen = []

    def resolve(ref):
        seen.append(ref)
        return other, "user-model"

    ev = sim("persona: p\nmodel: users/user-model\nmax_turns: 2")
    result, _, judge = play(ev, ["When?", "Ok."], resolve=resolve)
    assert seen == ["users/user-model"]
    assert other.models == [("user", "user-model")] and judge.calls == 0
    assert result.turns[1].prompt == "Friday."


def test_agent_judge_and_simulated_user_tokens_are_counted_apart():
    ev = sim(
        "persona: p\nmax_turns: 3\nstop_when: {natural_language: {prompt: 'Booked?'}}",
        "checks: [{llm_judge: {criteria: Polite}}]",
    )
    judge = Judge(
        user_lines=["u2", "u3"],
        confidences=['{"score": 0.1}', '{"score": 0.2}', '{"score": 0.9}'],
        verdicts=['{"score": 1}'],
    )
    result, _, _ = play(ev, ["a1", "a2", "a3"], judge)
    turns = result.turns
    assert [t.user_usage for t in turns] == [Usage(), USER_USAGE, USER_USAGE]
    assert [t.judge_usage for t in turns] == [JUDGE_USAGE, JUDGE_USAGE, JUDGE_USAGE + JUDGE_USAGE]
    assert [t.usage for t in turns] == [AGENT_USAGE] * 3
    totals = result.totals
    assert (totals.prompt_tokens, totals.completion_tokens, totals.total_tokens) == (30, 9, 39)
    assert totals.user_tokens == 2 * USER_USAGE.total_tokens == 18
    assert totals.judge_tokens == 4 * JUDGE_USAGE.total_tokens == 100
    assert totals.cost == pytest.approx(3 * 0.001 + 4 * 0.01 + 2 * 0.01)  # agent + judge + user
    assert [(t.user_cost, t.judge_cost) for t in turns] == [(0.0, 0.01), (0.01, 0.01), (0.01, 0.02)]


def test_agent_judge_and_simulated_user_cost_are_counted_apart_per_conversation():
    ev = sim("persona: p\nmax_turns: 2", "checks: [{llm_judge: {criteria: Polite}}]")
    result, _, _ = play(ev, ["a1", "a2"], Judge(user_lines=["u2"], verdicts=['{"score": 1}']))
    totals = result.totals.model_dump()
    assert totals["judge_cost"] == pytest.approx(0.01)
    assert totals["user_cost"] == pytest.approx(0.01)


def test_simulated_user_endpoint_failure_is_an_error_of_this_conversation():
    judge = Judge(user_lines=[EndpointError("gave up after 3 attempts: 503")])
    result, agent, _ = play(sim("persona: p\nmax_turns: 4"), ["When?"], judge)
    assert (result.status, result.termination) == ("error", "error")
    assert result.verdict == "error on turn 2 (simulated user): gave up after 3 attempts: 503"
    assert result.error == "gave up after 3 attempts: 503"
    assert len(result.turns) == 1 and len(agent.calls) == 1


def test_agent_failure_mid_conversation_is_an_error_with_termination_error():
    result, _, _ = play(
        sim("persona: p\nmax_turns: 4"), ["When?", EndpointError("timeout")], Judge(user_lines=["now"])
    )
    assert (result.status, result.termination, result.verdict) == (
        "error",
        "error",
        "error on turn 2: timeout",
    )


def test_natural_language_judge_failure_is_an_error():
    judge = Judge(confidences=[EndpointError("judge down")])
    result, _, _ = play(sim("stop_when: {natural_language: {prompt: 'Booked?'}}"), ["ok"], judge)
    assert (result.status, result.termination) == ("error", "error")


# --- resume -----------------------------------------------------------------------------------------------


RESUMABLE = sim(
    f"persona: {PERSONA}\nmax_turns: 5\nstop_when: {{natural_language: {{prompt: 'Booked?'}}}}",
    "checks: [{llm_judge: {criteria: Polite, scope: conversation}}]",
)


def resumable_judge():
    return Judge(
        user_lines=["Tomorrow at 7pm.", "Alice."],
        confidences=['{"score": 0.1}', '{"score": 0.2}', '{"score": 0.95}'],
        verdicts=['{"score": 0.8, "reason": "Polite."}'],
    )


def test_resume_from_every_stored_turn_calls_nobody():
    full, _, _ = play(RESUMABLE, ["When?", "Name?", CONFIRMED], resumable_judge())
    assert full.status == "passed" and len(full.turns) == 3
    resumed, agent, judge = play(RESUMABLE, [], Judge(), prior=full.turns)
    assert agent.calls == [] and judge.calls == 0
    assert resumed.model_dump() == full.model_dump()


def test_resume_after_two_stored_turns_asks_the_simulated_user_and_judge_only_for_turn_3():
    full, _, first = play(RESUMABLE, ["When?", "Name?", CONFIRMED], resumable_judge())
    judge = Judge(user_lines=["Alice."], confidences=['{"score": 0.95}'], verdicts=['{"score": 0.8}'])
    resumed, agent, judge = play(RESUMABLE, [CONFIRMED], judge, prior=full.turns[:2])
    assert len(agent.calls) == 1
    assert (len(judge.user_calls), len(judge.nl_calls), len(judge.judge_calls)) == (1, 1, 1)
    # The simulated user sees the stored turns as the conversation so far, exactly as on the first attempt.
    assert judge.user_calls[0] == first.user_calls[1]
    assert agent.calls[0][-1] == {"role": "user", "content": "Alice."}
    assert resumed.turns[:2] == full.turns[:2]
    assert (resumed.status, resumed.termination, len(resumed.turns)) == ("passed", full.termination, 3)


def test_resume_refuses_turns_from_other_follow_ups():
    ev = sim("follow_ups: [{input: Tomorrow}]\nmax_turns: 3")
    full, _, _ = play(ev, ["When?", "Ok"])
    other = sim("follow_ups: [{input: Friday}]\nmax_turns: 3")
    with pytest.raises(ResumeMismatch, match="stored turn 2 was 'Tomorrow'"):
        play(other, [], prior=full.turns)
