"""What a simulated conversation records on each turn: its stop condition as evaluated (outcome, confidence,
threshold, the judge's answer and tokens, the members of all/any/not, those short-circuited) and how the
simulated user wrote the turn's prompt (what it was sent, what it answered).

Played by engine.conversation.run_eval through engine.clients.OpenAIClient against the real fake server
(tests/fakeopenai/), which plays the agent (a script), the simulated user (a rule on its system prompt)
and the judge (rules on the condition's system prompt or question).
"""

from __future__ import annotations

import os

import pytest

from engine.clients import EndpointConfig, OpenAIClient
from engine.conditions import NATURAL_LANGUAGE_SYSTEM
from engine.conversation import EngineContext, run_eval
from engine.loader import load_suite
from engine.report import format_eval
from engine.results import ConditionResult, EvalResult, TurnRecord, Usage
from engine.simulate import SIMULATOR_ASK, SIMULATOR_INSTRUCTIONS
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.fakeopenai import Reply

PERSONA = "You are a friendly customer. Answer what the agent asks."
PROMPT = "I want to book a table for two."
CONFIRMED = '{"status": "confirmed", "party": 2}'
JUDGE_USAGE = {"prompt_tokens": 40, "completion_tokens": 9}
USER_USAGE = {"prompt_tokens": 30, "completion_tokens": 3}


def suite(simulate: str, checks: str = "") -> str:
    body = "\n".join("      " + line for line in simulate.strip().splitlines())
    return (
        f"name: stop-when\nmodel: agent-m\njudge: judge-m\nsystem: You book tables.\nevals:\n"
        f"  - id: booking\n    prompt: {PROMPT}\n    simulate:\n{body}\n{checks}"
    )


def play(fake, source: str, prior=()) -> EvalResult:
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    client = OpenAIClient(
        EndpointConfig(
            name="fake",
            base_url=fake.base_url,
            api_key_env=FAKE_KEY_ENV,
            max_retries=0,
            price_input=1.0,  # USD per million tokens: costs are tokens / 1e6
            price_output=1.0,
        )
    )
    spec = load_suite(source)
    ctx = EngineContext(
        agent=client, model="agent-m", judge=client, judge_model="judge-m", system=spec.system
    )
    return run_eval(spec.evals[0], 0, "booking", ctx, prior=prior)


def judge_answers(fake, *answers: str) -> None:
    """The natural_language judge's answers, one per call in order."""
    fake.rule(
        NATURAL_LANGUAGE_SYSTEM[:60],
        [Reply(text=answer, usage=JUDGE_USAGE) for answer in answers],
        where="system",
        model="judge-m",
    )


def user_lines(fake, *lines: str) -> None:
    fake.rule(
        SIMULATOR_INSTRUCTIONS,
        [Reply(text=line, usage=USER_USAGE) for line in lines],
        where="system",
        model="judge-m",
    )


def requests_to(fake, system_start: str) -> list[dict]:
    return [
        body
        for body in fake.chat_requests()
        if body["messages"][0]["role"] == "system" and body["messages"][0]["content"].startswith(system_start)
    ]


BOOKING = suite(
    f"""
persona: {PERSONA}
max_turns: 5
stop_when:
  natural_language: {{prompt: Has the booking been confirmed?}}
"""
)


def test_each_turn_records_the_natural_language_verdict_confidence_threshold_reason_and_tokens(fake_openai):
    fake_openai.script(PROMPT, ["For when?", "Under what name?", CONFIRMED])
    user_lines(fake_openai, 'You: "Friday at 7pm."', "Alice.")
    judge_answers(
        fake_openai,
        '{"score": 0.1, "reason": "Nothing is booked yet."}',
        '{"score": 0.35, "reason": "The agent still needs a name."}',
        'Sure. {"score": 0.91, "reason": "The agent confirmed the booking."}',
    )
    result = play(fake_openai, BOOKING)

    assert (result.status, len(result.turns)) == ("passed", 3)
    conditions = [turn.stop_when for turn in result.turns]
    assert [(c.kind, c.label, c.met, c.confidence, c.threshold) for c in conditions] == [
        ("natural_language", 'natural_language "Has the booking been confirmed?"', False, 0.1, 0.7),
        ("natural_language", 'natural_language "Has the booking been confirmed?"', False, 0.35, 0.7),
        ("natural_language", 'natural_language "Has the booking been confirmed?"', True, 0.91, 0.7),
    ]
    assert [c.reason for c in conditions] == [
        "Nothing is booked yet.",
        "The agent still needs a name.",
        "The agent confirmed the booking.",
    ]
    assert conditions[2].raw == 'Sure. {"score": 0.91, "reason": "The agent confirmed the booking."}'
    # The judge's tokens and cost, per condition; they are the turn's judge usage (no checks here).
    judge_usage = Usage(prompt_tokens=40, completion_tokens=9)
    for turn, condition in zip(result.turns, conditions, strict=True):
        assert condition.usage == judge_usage == turn.judge_usage
        assert condition.cost == pytest.approx(49 / 1e6) == pytest.approx(turn.judge_cost)
    assert [c.outcome for c in conditions] == ["no (0.10 < 0.70)", "no (0.35 < 0.70)", "yes (0.91 ≥ 0.70)"]
    assert result.termination == (
        'condition met: natural_language "Has the booking been confirmed?" (confidence 0.91, threshold 0.7)'
    )
    assert len(requests_to(fake_openai, NATURAL_LANGUAGE_SYSTEM[:60])) == 3


def test_each_simulated_turn_records_what_the_simulated_user_was_sent_and_answered(fake_openai):
    fake_openai.script(PROMPT, ["For when?", "Under what name?", CONFIRMED])
    user_lines(fake_openai, 'You: "Friday at 7pm."', "Alice.")
    judge_answers(fake_openai, '{"score": 0.1}', '{"score": 0.2}', '{"score": 0.9}')
    result = play(fake_openai, BOOKING)

    first, second, third = result.turns
    assert first.simulated_user is None  # the eval's own prompt
    sent = requests_to(fake_openai, PERSONA)
    assert len(sent) == 2
    for turn, body, answer in ((second, sent[0], 'You: "Friday at 7pm."'), (third, sent[1], "Alice.")):
        call = turn.simulated_user
        assert (call.model, call.reply) == ("judge-m", answer)
        assert call.messages == body["messages"]  # exactly what went over the wire
        assert call.messages[1] == {"role": "user", "content": SIMULATOR_ASK}
        assert turn.user_usage == Usage(prompt_tokens=30, completion_tokens=3)
    assert second.prompt == "Friday at 7pm."  # the answer cleaned of its label and quotes
    assert second.simulated_user.messages[0]["content"].endswith(
        "You: I want to book a table for two.\nAgent: For when?"
    )
    assert third.simulated_user.messages[0]["content"].endswith(
        "Agent: For when?\nYou: Friday at 7pm.\nAgent: Under what name?"
    )


def test_follow_ups_are_not_written_by_the_simulated_user_and_record_none(fake_openai):
    fake_openai.script(PROMPT, ["For when?", "Booked."])
    result = play(fake_openai, suite("follow_ups: [{input: Friday.}]\nstop_when: {contains: booked}"))
    assert [turn.simulated_user for turn in result.turns] == [None, None]
    assert [(t.stop_when.met, t.stop_when.reason, t.stop_when.usage) for t in result.turns] == [
        (False, "substring not found", None),
        (True, "substring found", None),
    ]
    assert [t.stop_when.outcome for t in result.turns] == ["no: substring not found", "yes: substring found"]


COMBINED = suite(
    f"""
persona: {PERSONA}
max_turns: 3
stop_when:
  any:
    - field_equals: {{path: status, value: confirmed}}
    - all:
        - after_turns: 2
        - natural_language: {{prompt: Did the customer give up?, threshold: 0.8}}
    - not: {{contains: "?"}}
"""
)


def test_combinators_record_every_member_and_short_circuited_ones_as_not_evaluated(fake_openai):
    fake_openai.script(PROMPT, ["For when?", "Which time?", CONFIRMED])
    user_lines(fake_openai, "Friday.", "At 7.")
    judge_answers(fake_openai, '{"score": 0.5, "reason": "Still booking."}')
    result = play(fake_openai, COMBINED)
    assert [turn.termination for turn in result.turns] == [
        None,
        None,
        'condition met: field_equals status = "confirmed"',
    ]

    def tree(condition: ConditionResult):
        return (condition.label, condition.met, [tree(child) for child in condition.children])

    first, second, third = (turn.stop_when for turn in result.turns)
    # Turn 1: `all` stops at after_turns 2, so the judge is not asked; the `not` member still runs.
    assert tree(first) == (
        "any",
        False,
        [
            ('field_equals status = "confirmed"', False, []),
            ("all", False, [("after_turns 2", False, []), ('natural_language "Did the customer give up?"', None, [])]),
            ("not", False, [('contains "?"', True, [])]),
        ],
    )  # fmt: skip
    assert first.children[1].children[0].reason == "turn 1 < 2"
    assert first.children[1].children[1].reason == "not evaluated: an earlier member did not hold"
    assert first.children[0].reason == "no status in the reply (not JSON, or not set)"
    # Turn 2: after_turns holds, so the judge is asked (0.5 < 0.8).
    assert tree(second)[2][1] == (
        "all",
        False,
        [("after_turns 2", True, []), ('natural_language "Did the customer give up?"', False, [])],
    )
    asked = second.children[1].children[1]
    assert (asked.confidence, asked.threshold, asked.reason, asked.outcome) == (
        0.5, 0.8, "Still booking.", "no (0.50 < 0.80)",
    )  # fmt: skip
    # Turn 3: the first member holds; the others are recorded, all of them as not evaluated, and cost nothing.
    assert tree(third) == (
        "any",
        True,
        [
            ('field_equals status = "confirmed"', True, []),
            ("all", None, [("after_turns 2", None, []), ('natural_language "Did the customer give up?"', None, [])]),
            ("not", None, [('contains "?"', None, [])]),
        ],
    )  # fmt: skip
    assert third.children[2].reason == "not evaluated: an earlier member held"
    assert third.children[1].outcome == "not evaluated"
    # Short-circuiting is unchanged: the judge was asked once in all (turn 2), and only that turn paid for it.
    assert len(requests_to(fake_openai, NATURAL_LANGUAGE_SYSTEM[:60])) == 1
    assert [turn.judge_usage.total_tokens for turn in result.turns] == [0, 49, 0]


def test_an_unreadable_judge_answer_is_asked_again_then_the_conversation_is_an_error(fake_openai):
    fake_openai.script(PROMPT, ["For when?"])
    judge_answers(fake_openai, "Probably.", "Hard to say.")
    result = play(fake_openai, suite("stop_when: {natural_language: {prompt: Booked?}}"))
    # No verdict: the reply stays, ungraded, with what it and the judge's two calls cost.
    assert result.status == "error" and [turn.passed for turn in result.turns] == [None]
    assert result.turns[0].response == "For when?" and result.turns[0].judge_usage.total_tokens > 0
    assert result.error.startswith(
        "judge judge-m gave no verdict that could be read, asked twice: its answer "
    )
    assert "'Probably.'" in result.error and "'Hard to say.'" in result.error
    asked = [body for body in fake_openai.chat_requests() if body["model"] == "judge-m"]
    assert len(asked) == 2 and asked[1]["messages"][-2] == {"role": "assistant", "content": "Probably."}
    assert asked[1]["messages"][-1]["content"].startswith("Your answer could not be read: it has no score")


def test_a_yes_or_no_answers_a_natural_language_question(fake_openai):
    fake_openai.script(PROMPT, ["For when?"])
    judge_answers(fake_openai, "<think>The user said {score: 1}?</think>No, nothing was booked yet.")
    result = play(fake_openai, suite("stop_when: {natural_language: {prompt: Booked?}}"))
    condition = result.turns[0].stop_when
    assert (condition.met, condition.confidence, condition.reason) == (False, 0.0, "nothing was booked yet.")
    assert (condition.parsed_from, condition.read_from, condition.first_answer) == ("words", "No", None)


def test_an_llm_judge_condition_records_its_score_threshold_reason_answer_and_tokens(fake_openai):
    fake_openai.script(PROMPT, ["Booked for Friday."])
    fake_openai.rule(
        "Criteria:\nThe booking is confirmed",
        Reply(text='{"score": 4, "reason": "Clearly booked."}', usage=JUDGE_USAGE),
        model="judge-m",
    )
    result = play(
        fake_openai,
        suite("stop_when: {llm_judge: {criteria: The booking is confirmed, scale: 0-100, threshold: 70}}"),
    )
    condition = result.turns[0].stop_when
    assert (condition.kind, condition.met, condition.score, condition.threshold) == (
        "llm_judge",
        False,
        0.04,
        0.7,
    )
    assert condition.reason.endswith("Clearly booked.")
    assert condition.raw == '{"score": 4, "reason": "Clearly booked."}'
    assert condition.usage == Usage(prompt_tokens=40, completion_tokens=9) == result.turns[0].judge_usage
    assert condition.outcome == "no (0.04 < 0.70)"


def test_resumed_conversation_keeps_the_stored_records_and_records_the_new_turn(fake_openai):
    fake_openai.script(PROMPT, ["For when?", "Under what name?", CONFIRMED])
    user_lines(fake_openai, "Friday.", "Alice.")
    judge_answers(fake_openai, '{"score": 0.1}', '{"score": 0.2}', '{"score": 0.95}')
    full = play(fake_openai, BOOKING)
    stored = [TurnRecord.model_validate(turn.model_dump(mode="json")) for turn in full.turns[:2]]
    # Stored records say what the first attempt saw; the resumed attempt must not re-judge or rewrite them.
    stored[1].stop_when.reason = "as stored"
    fake_openai.reset()
    fake_openai.script(PROMPT, ["For when?", "Under what name?", CONFIRMED])
    user_lines(fake_openai, "Alice.")
    judge_answers(fake_openai, '{"score": 0.97, "reason": "Booked."}')

    resumed = play(fake_openai, BOOKING, prior=stored)
    assert resumed.turns[:2] == stored
    assert resumed.turns[1].stop_when.reason == "as stored"
    third = resumed.turns[2]
    assert (third.stop_when.met, third.stop_when.confidence, third.stop_when.reason) == (
        True,
        0.97,
        "Booked.",
    )
    assert third.simulated_user.reply == "Alice."
    assert third.simulated_user.messages == full.turns[2].simulated_user.messages
    assert len(requests_to(fake_openai, NATURAL_LANGUAGE_SYSTEM[:60])) == 1


def test_the_results_json_carries_them_and_reads_back(fake_openai):
    fake_openai.script(PROMPT, ["For when?", CONFIRMED])
    user_lines(fake_openai, "Friday.")
    judge_answers(fake_openai, '{"score": 0.2, "reason": "No."}', '{"score": 0.9, "reason": "Yes."}')
    result = play(fake_openai, BOOKING)
    data = result.model_dump(mode="json")
    first, second = data["turns"]
    assert first["stop_when"] == {
        "kind": "natural_language",
        "label": 'natural_language "Has the booking been confirmed?"',
        "met": False,
        "reason": "No.",
        "confidence": 0.2,
        "score": None,
        "threshold": 0.7,
        "raw": '{"score": 0.2, "reason": "No."}',
        "parsed_from": "json",
        "read_from": None,
        "first_answer": None,
        "usage": {"prompt_tokens": 40, "completion_tokens": 9, "estimated": False},
        "cost": pytest.approx(49 / 1e6),
        "children": [],
    }
    assert first["simulated_user"] is None
    assert second["simulated_user"]["reply"] == "Friday."
    assert second["simulated_user"]["model"] == "judge-m"
    assert [m["role"] for m in second["simulated_user"]["messages"]] == ["system", "user"]
    assert EvalResult.model_validate(data) == result
    # A record stored before these fields existed still reads, as having none.
    old = {key: value for key, value in first.items() if key not in ("stop_when", "simulated_user")}
    assert TurnRecord.model_validate(old).stop_when is None


def test_the_terminal_report_shows_the_stop_condition_on_each_turn_in_one_line(fake_openai):
    fake_openai.script(PROMPT, ["For when?", "Which time?", CONFIRMED])
    user_lines(fake_openai, "Friday.", "At 7.")
    judge_answers(fake_openai, '{"score": 0.5, "reason": "Still booking."}')
    lines = [line for line in format_eval(play(fake_openai, COMBINED)).splitlines() if "Stop when" in line]
    assert lines == [
        '    Stop when: any → no [field_equals status = "confirmed" → no; all → no [after_turns 2 → no; '
        'natural_language "Did the customer give up?" → not evaluated]; not → no [contains "?" → yes]]',
        '    Stop when: any → no [field_equals status = "confirmed" → no; all → no [after_turns 2 → yes; '
        'natural_language "Did the customer give up?" → no (0.50 < 0.80)]; not → no [contains "?" → yes]]',
        '    Stop when: any → yes [field_equals status = "confirmed" → yes; all → not evaluated; '
        "not → not evaluated] — stopped",
    ]


def test_the_terminal_report_gives_a_judges_reason_after_its_numbers(fake_openai):
    fake_openai.script(PROMPT, ["For when?"])
    judge_answers(fake_openai, '{"score": 0.35, "reason": "Nothing booked."}')
    text = format_eval(play(fake_openai, suite("stop_when: {natural_language: {prompt: Booked?}}")))
    assert '    Stop when: natural_language "Booked?" → no (0.35 < 0.70) — Nothing booked.\n' in text
