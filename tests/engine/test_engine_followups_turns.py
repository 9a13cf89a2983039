"""Conversation trees (vibecheck's format) turn by turn: depth, what each request carries, the reasons and records
of turns, totals, errors, resume and cancellation.

Everything goes through engine.conversation.run_eval with an in-test scripted ChatClient that records the
messages of every call. Run without Django: ``python -m pytest tests/engine/test_engine_followups_turns.py -p no:django``.
"""

from __future__ import annotations

import pytest

from engine.clients import EndpointError
from engine.conversation import ResumeMismatch, StopConversation, run_eval
from engine.report import never_started
from engine.results import TurnRecord, Usage
from engine.schema import Eval
from tests.engine.doubles import TURN_COST, TURN_USAGE, ScriptedClient, make_eval
from tests.engine.followup_play import PROMPTS, SYSTEM, THREE_LEVELS, context, full_run, play, sent_prompts

# --- depth ---------------------------------------------------------------------------------------------


def deep_eval(levels: int) -> Eval:
    lines = ["prompt: p0", "checks:"]
    indent = ""
    for level in range(1, levels + 1):
        lines += [
            f"{indent}  - match: '*ok*'",
            f"{indent}    prompt: p{level}",
            f"{indent}    checks:",
        ]
        indent += "    "
    lines.append(f"{indent}  - match: '*ok*'")
    return make_eval("\n".join(lines) + "\n")


def test_depth_five_runs_six_turns():
    """Five follow-up levels below the first prompt give six turns when every level fails."""
    result, agent = play(deep_eval(5), ["no"] * 6)
    assert result.verdict == "failed after 6 turns"
    assert sent_prompts(agent) == [f"p{i}" for i in range(6)]
    assert [t.turn for t in result.turns] == [1, 2, 3, 4, 5, 6]
    assert result.turns[-1].node == "evals[0]" + ".checks[0]" * 5


def test_depth_five_can_pass_on_turn_six():
    """The deepest follow-up passing gives passed_on_turn 6."""
    result, _ = play(deep_eval(5), ["no"] * 5 + ["ok"])
    assert (result.status, result.passed_on_turn) == ("passed", 6)


# --- what the model sees -------------------------------------------------------------------------------


def test_followup_request_carries_the_whole_conversation():
    """Each follow-up request is system + every prior user/assistant message + the new user prompt."""
    _, agent = play(THREE_LEVELS, ["first answer 100", "second answer 101", "third answer 102"])
    system = {"role": "system", "content": SYSTEM}
    assert agent.messages[0] == [system, {"role": "user", "content": PROMPTS[0]}]
    assert agent.messages[1] == [
        system,
        {"role": "user", "content": PROMPTS[0]},
        {"role": "assistant", "content": "first answer 100"},
        {"role": "user", "content": PROMPTS[1]},
    ]
    assert agent.messages[2] == [
        system,
        {"role": "user", "content": PROMPTS[0]},
        {"role": "assistant", "content": "first answer 100"},
        {"role": "user", "content": PROMPTS[1]},
        {"role": "assistant", "content": "second answer 101"},
        {"role": "user", "content": PROMPTS[2]},
    ]
    assert all(call["model"] == "model-under-test" for call in agent.calls)


def test_no_system_message_without_system_prompt():
    """Without a suite system prompt the conversation starts with the user message."""
    agent = ScriptedClient(["105"])
    run_eval(THREE_LEVELS, 0, "e", context(agent, system=None))
    assert agent.messages[0] == [{"role": "user", "content": PROMPTS[0]}]


def test_judge_on_a_followup_sees_the_whole_conversation():
    """An llm_judge at turn 2 is shown the full conversation in [Role]: markers."""
    ev = make_eval(
        """
prompt: What is 15 * 7?
checks:
  - match: "*105*"
    prompt: Recalculate.
    checks:
      - llm_judge: {criteria: Corrects itself}
"""
    )
    judge = ScriptedClient(['{"score": 1, "reason": "fixed"}'])
    result, _ = play(ev, ["100", "105"], judge=judge)
    assert result.status == "passed"
    assert judge.calls[0]["model"] == "judge-m"
    transcript = judge.calls[0]["messages"][1]["content"]
    assert (
        f"[System]:\n{SYSTEM}\n\n[User]:\nWhat is 15 * 7?\n\n[Assistant]:\n100\n\n"
        "[User]:\nRecalculate.\n\n[Assistant]:\n105"
    ) in transcript


# --- records -------------------------------------------------------------------------------------------


def test_followup_reason_names_the_failed_check_and_turn():
    """followup_reason says which check failed on which turn; the first turn has none."""
    result, _ = play(THREE_LEVELS, ["100", "101", "105"])
    reasons = [t.followup_reason for t in result.turns]
    assert reasons[0] is None
    assert reasons[1] == 'match "*105*" failed on turn 1'
    assert reasons[2] == 'match "*105*" failed on turn 2'


def test_followup_reason_lists_several_failed_checks():
    """With a plain follow-up and several failed checks, the reason names each of them."""
    ev = make_eval(
        """
prompt: Q
checks:
  - match: "*def*"
  - contains: return
  - prompt: Again.
    checks: [{match: "*def*"}]
"""
    )
    result, _ = play(ev, ["x", "def"])
    reason = result.turns[1].followup_reason
    assert 'match "*def*"' in reason
    assert 'contains "return"' in reason
    assert reason.endswith("on turn 1")


def test_turn_records_keep_prompt_response_usage_and_checks():
    """Each turn keeps its prompt, response, usage, cost, latency and check results."""
    result, _ = play(THREE_LEVELS, ["100", "105"])
    first = result.turns[0]
    assert (first.prompt, first.response) == (PROMPTS[0], "100")
    assert first.usage == TURN_USAGE
    assert first.cost == pytest.approx(TURN_COST)
    assert first.latency_ms == 3
    assert [(c.type, c.passed, c.label) for c in first.checks] == [("match", False, 'match "*105*"')]


def test_totals_sum_tokens_and_cost_over_turns():
    """Totals add every turn's tokens and cost (model and judge)."""
    result, _ = play(THREE_LEVELS, ["100", "100", "100"])
    totals = result.totals
    assert totals.turns == 3
    assert totals.prompt_tokens == 30
    assert totals.completion_tokens == 15
    assert totals.total_tokens == 45
    assert totals.cost == pytest.approx(3 * TURN_COST)
    assert totals.estimated is False


def test_totals_include_judge_tokens_and_cost():
    """Judge calls are counted separately in judge_tokens and added to cost."""
    ev = make_eval(
        """
prompt: Q
checks:
  - llm_judge: {criteria: good}
    prompt: Again.
    checks:
      - llm_judge: {criteria: good}
"""
    )
    judge = ScriptedClient(
        ['{"score": 0}', '{"score": 1}'], usage=Usage(prompt_tokens=100, completion_tokens=20), cost=0.01
    )
    result, _ = play(ev, ["a", "b"], judge=judge)
    assert result.status == "passed"
    assert [t.judge_usage.total_tokens for t in result.turns] == [120, 120]
    assert result.totals.judge_tokens == 240
    assert result.totals.total_tokens == 30  # the model's own tokens only
    assert result.totals.cost == pytest.approx(2 * TURN_COST + 2 * 0.01)


def test_estimated_usage_flows_into_totals():
    """A client reporting estimated usage marks the totals estimated and token checks say so."""
    agent = ScriptedClient(["x" * 40], usage=Usage(prompt_tokens=3, completion_tokens=99, estimated=True))
    ev = make_eval("prompt: Q\nchecks:\n  - max_tokens: 10\n")
    result = run_eval(ev, 0, "e", context(agent))
    assert result.status == "passed"  # 10 estimated tokens from the text, not the 99 reported
    assert "estimated" in result.turns[0].checks[0].reason
    assert result.totals.estimated is True


# --- errors --------------------------------------------------------------------------------------------


def test_agent_endpoint_error_ends_eval_with_error():
    """An EndpointError from the model ends the eval: status error, message kept, earlier turns kept."""
    result, agent = play(THREE_LEVELS, ["100", EndpointError("HTTP 500 from default: boom")])
    assert result.status == "error"
    assert result.score is None
    assert result.error == "HTTP 500 from default: boom"
    assert result.verdict == "error on turn 2: HTTP 500 from default: boom"
    assert len(result.turns) == 1
    assert len(agent.calls) == 2


def test_judge_endpoint_error_ends_eval_with_error():
    """An EndpointError raised by the llm_judge's endpoint also gives status error."""
    ev = make_eval("prompt: Q\nchecks:\n  - llm_judge: {criteria: good}\n")
    judge = ScriptedClient([EndpointError("judge timed out")])
    result, _ = play(ev, ["answer"], judge=judge)
    assert result.status == "error"
    assert result.error == "judge timed out"
    assert "judge timed out" in result.verdict
    assert result.passed_on_turn is None


@pytest.mark.parametrize("stored", [1, 2])
# --- resume --------------------------------------------------------------------------------------------


def test_resume_does_not_replay_prior_turns(stored):
    """Resuming with the first N turns calls the model only for later turns and gives identical turns."""
    original, _ = full_run()
    replies = ["100", "101", "105"][stored:]
    resumed, agent = play(THREE_LEVELS, replies, prior=original.turns[:stored])
    assert len(agent.calls) == 3 - stored
    assert sent_prompts(agent) == PROMPTS[stored:]
    assert [t.model_dump() for t in resumed.turns] == [t.model_dump() for t in original.turns]
    assert (resumed.status, resumed.passed_on_turn, resumed.verdict) == ("passed", 3, "passed on turn 3")
    assert resumed.totals == original.totals


def test_resume_with_every_turn_stored_makes_no_call():
    """All turns stored: the result is rebuilt without any model call."""
    original, _ = full_run()
    resumed, agent = play(THREE_LEVELS, [], prior=original.turns)
    assert agent.calls == []
    assert resumed.model_dump() == original.model_dump()


def test_resume_mismatch_when_prior_prompt_differs():
    """A stored turn whose prompt is not the suite's prompt at that position raises ResumeMismatch."""
    stale = TurnRecord(turn=1, prompt="What is 15 * 8?", response="120", passed=False, checks=[])
    with pytest.raises(ResumeMismatch, match="15 \\* 8"):
        play(THREE_LEVELS, [], prior=[stale])


def test_resume_mismatch_on_a_later_turn():
    """A stored follow-up turn whose prompt changed in the suite raises ResumeMismatch."""
    original, _ = full_run()
    changed = original.turns[1].model_copy(update={"prompt": "An older follow-up text."})
    with pytest.raises(ResumeMismatch):
        play(THREE_LEVELS, [], prior=[original.turns[0], changed])


def test_resume_mismatch_when_the_levels_checks_changed():
    """Stored turn with the same prompt but results for a different set of checks is a ResumeMismatch."""
    original, _ = full_run()
    edited = make_eval(
        """
prompt: What is 15 * 7?
checks:
  - match: "*105*"
  - max_tokens: 100
  - prompt: That answer is incorrect. Please recalculate 15 multiplied by 7.
    checks:
      - match: "*105*"
"""
    )
    with pytest.raises(ResumeMismatch):
        run_eval(edited, 0, "eval-1", context(ScriptedClient(["105"])), prior=original.turns[:1])


# --- cancellation and callbacks ------------------------------------------------------------------------


def test_should_stop_before_first_turn_cancels():
    """should_stop returning True before any turn: cancelled, no model call, no score."""
    result, agent = play(THREE_LEVELS, [], should_stop=lambda: True)
    assert result.status == "cancelled"
    assert result.score is None
    assert result.verdict == "cancelled after 0 turns"
    assert agent.calls == []


def test_should_stop_between_turns_keeps_played_turns():
    """should_stop turning True after turn 1: cancelled with the one played turn."""
    asked = []

    def should_stop():
        asked.append(True)
        return len(asked) > 1

    result, agent = play(THREE_LEVELS, ["100"], should_stop=should_stop)
    assert result.status == "cancelled"
    assert result.verdict == "cancelled after 1 turn"
    assert len(result.turns) == 1
    assert len(agent.calls) == 1


def test_should_stop_with_a_reason_says_it():
    """should_stop answering why (a run's cost limit): said in the verdict; before any turn, as a conversation
    the run never started."""
    asked = []

    def should_stop():
        asked.append(True)
        return len(asked) > 1 and "cost limit $1.00 reached"

    result, agent = play(THREE_LEVELS, ["100"], should_stop=should_stop)
    assert (result.status, result.verdict) == ("cancelled", "stopped after 1 turn: cost limit $1.00 reached")
    assert len(result.turns) == 1 and len(agent.calls) == 1
    result, agent = play(THREE_LEVELS, [], should_stop=lambda: "cost limit $1.00 reached")
    assert (result.status, result.verdict) == ("cancelled", "not started: cost limit $1.00 reached")
    assert never_started(result) and agent.calls == []


def test_should_stop_not_consulted_for_prior_turns():
    """Replaying stored turns does not ask should_stop; it is asked before each new turn only."""
    original, _ = full_run()
    asked = []
    play(THREE_LEVELS, ["105"], prior=original.turns[:2], should_stop=lambda: asked.append(1) or False)
    assert len(asked) == 1


def test_on_turn_called_once_per_new_turn_in_order():
    """on_turn gets each new turn record, in order, as it is graded."""
    seen: list[TurnRecord] = []
    result, _ = play(THREE_LEVELS, ["100", "101", "105"], on_turn=seen.append)
    assert [t.turn for t in seen] == [1, 2, 3]
    assert [t.model_dump() for t in seen] == [t.model_dump() for t in result.turns]


def test_on_turn_not_called_for_prior_turns():
    """Resuming: on_turn is called only for the turns played now."""
    original, _ = full_run()
    seen: list[TurnRecord] = []
    play(THREE_LEVELS, ["101", "105"], prior=original.turns[:1], on_turn=seen.append)
    assert [t.turn for t in seen] == [2, 3]
    assert [t.prompt for t in seen] == PROMPTS[1:]


def test_on_turn_stop_conversation_cancels():
    """on_turn raising StopConversation ends the eval as cancelled without further model calls."""

    def stop(turn):
        raise StopConversation

    result, agent = play(THREE_LEVELS, ["100"], on_turn=stop)
    assert result.status == "cancelled"
    assert len(agent.calls) == 1
