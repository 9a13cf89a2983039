"""Tools offered to the model under test: the calls are carried out, their results go back as `tool` messages,
and the exchange is one turn; against the fake endpoint, which answers with tool calls when offered tools."""

from __future__ import annotations

import json

import pytest

from engine.conversation import run_eval
from engine.loader import load_suite
from engine.report import format_eval
from tests.engine.fake_play import fake_context, play, play_async
from tests.fakeopenai import Reply

WEATHER = """\
name: weather
tools:
  - name: get_weather
    description: Current weather for a city
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21, sky: clear}
      - when: {city: {regex: "^L"}}
        error: no station there
    returns: mild
evals:
  - prompt: What's the weather in Paris?
    checks:
      - contains: "21"
"""


def test_a_stub_result_goes_back_as_a_tool_message_and_the_text_answer_is_the_reply(fake_openai):
    result = play(fake_openai, WEATHER)
    first, second = fake_openai.chat_requests()
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    call = second["messages"][-2]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {
        "city": "Paris"
    }
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": '{"temperature": 21, "sky": "clear"}',
    }
    (turn,) = result.turns
    assert result.status == "passed"
    assert turn.response == 'Tool results: {"temperature": 21, "sky": "clear"}'
    (recorded,) = turn.tool_calls
    assert (recorded.name, recorded.arguments, recorded.source, recorded.error) == (
        "get_weather",
        {"city": "Paris"},
        "responses",
        None,
    )
    # Tokens count both model calls of the turn.
    assert turn.usage.prompt_tokens == sum(
        len(" ".join(str(m.get("content") or "") for m in request["messages"]).split())
        for request in (first, second)
    )


def test_rules_are_tried_in_order_and_fall_through_to_returns(fake_openai):
    source = WEATHER.replace("What's the weather in Paris?", "Weather in Lyon?")
    turn = play(fake_openai, source).turns[0]
    assert (
        turn.tool_calls[0].error == "no station there"
        and turn.tool_calls[0].result == "Error: no station there"
    )
    other = play(fake_openai, WEATHER.replace("What's the weather in Paris?", "Weather in Rome?")).turns[0]
    assert other.tool_calls[0].result == "mild" and other.tool_calls[0].source == "returns"


def test_an_unknown_tool_and_arguments_that_break_the_schema_are_the_models_mistakes(fake_openai):
    fake_openai.script(
        "What's the weather in Paris?",
        [
            Reply(tool_calls=[{"name": "get_forecast", "arguments": {"city": "Paris"}}]),
            Reply(tool_calls=[{"name": "get_weather", "arguments": {"town": "Paris"}}]),
            "I could not find out.",
        ],
    )
    turn = play(fake_openai, WEATHER).turns[0]
    unknown, broken = turn.tool_calls
    assert unknown.mistake and "no tool named `get_forecast`" in unknown.error
    assert broken.mistake and "'city' is a required property" in broken.error
    assert broken.result.startswith("Error: the arguments break the schema")
    last = fake_openai.chat_requests()[-1]["messages"]
    assert [m["role"] for m in last[-4:]] == ["assistant", "tool", "assistant", "tool"]


def _sent_raw(*items) -> Reply:
    """An answer whose tool_calls are these items exactly as an endpoint might send them."""
    message = {"role": "assistant", "content": None, "tool_calls": list(items)}
    return Reply(choices=[{"index": 0, "message": message, "finish_reason": "tool_calls"}])


@pytest.mark.parametrize("player", ["inline", "asyncio"])
def test_a_call_without_a_function_name_is_the_models_mistake_sent_back_never_a_reply(fake_openai, player):
    """Graded as a reply, an unreadable call was an empty text: it passed `not_match`. It is a call the
    runtime rejects, and the model answers after it."""
    nameless = {"id": "c1", "type": "function", "function": {"arguments": '{"city": "Paris"}'}}
    fake_openai.script(
        "What's the weather in Paris?",
        [_sent_raw(nameless, {"id": "c2", "type": "nonsense"}), "It is 21 degrees in Paris."],
    )
    source = WEATHER.replace('      - contains: "21"', '      - not_match: "*sorry*"\n      - contains: "21"')
    result = play(fake_openai, source) if player == "inline" else play_async(fake_openai, load_suite(source))
    assert result.status == "passed", result.verdict
    (turn,) = result.turns
    assert turn.response == "It is 21 degrees in Paris." and turn.incomplete is None
    unnamed, other = turn.tool_calls
    assert (unnamed.name, unnamed.mistake, unnamed.source) == ("", True, "none")
    assert unnamed.error == "the call names no function (offered: get_weather)"
    assert other.mistake and other.error.startswith("the call is no function call: {")
    sent = fake_openai.chat_requests()[-1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]
    assert sent[-2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Error: the call names no function (offered: get_weather)",
    }
    assert '→ (no function name) {"city": "Paris"} ⚠ mistake: the call names no function' in format_eval(
        result
    )


CUT_ROUND = Reply(
    tool_calls=[{"id": "c1", "name": "get_weather", "arguments": '{"city": "Os'}], finish_reason="length"
)
FILTERED_ROUND = Reply(
    "Let me check", tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}],
    finish_reason="content_filter",
)  # fmt: skip
UNFINISHED_ROUNDS = {
    "length": (CUT_ROUND, "reply cut off at the token limit (finish_reason: length)"),
    "content_filter": (FILTERED_ROUND, "reply stopped by the content filter (finish_reason: content_filter)"),
}


@pytest.mark.parametrize("player", ["inline", "asyncio"])
@pytest.mark.parametrize("kind", UNFINISHED_ROUNDS)
def test_a_tool_round_that_did_not_finish_ends_the_turn_unfinished_its_calls_not_carried_out(
    fake_openai, player, kind
):
    """A round cut off at the token limit is not the model's mistake (its arguments are cut short), and a
    filtered one is not a finished answer: the turn is incomplete, by the incomplete_reply rule."""
    answer, why = UNFINISHED_ROUNDS[kind]
    fake_openai.script("What's the weather in Paris?", [answer, "It is 21 degrees."])
    result = (
        play(fake_openai, WEATHER) if player == "inline" else play_async(fake_openai, load_suite(WEATHER))
    )
    unfinished = f"{why}; its tool calls were not carried out"
    assert (result.status, result.verdict) == ("error", f"error on turn 1: {unfinished}")
    assert len(fake_openai.chat_requests()) == 1  # nothing was sent back
    (turn,) = result.turns
    assert (turn.incomplete, turn.finish_reason, turn.checks) == (unfinished, kind, [])
    assert turn.response == answer.text
    (round_,) = turn.tool_rounds
    assert (round_.finish_reason, round_.incomplete, round_.text) == (kind, unfinished, "")
    (call,) = round_.calls
    assert (call.name, call.mistake, call.error, call.result) == ("get_weather", False, None, "")
    assert call.arguments == (None if kind == "length" else {"city": "Paris"})  # as sent, cut short or not


def test_a_tool_round_that_did_not_finish_is_graded_as_given_under_grade_its_calls_not_counted(fake_openai):
    fake_openai.script("What's the weather in Paris?", [FILTERED_ROUND, "It is 21 degrees."])
    source = WEATHER.replace(
        '    checks:\n      - contains: "21"',
        "    incomplete_reply: grade\n    checks:\n      - contains: check\n      - tool_not_called: get_weather",
    )
    result = play(fake_openai, source)
    assert result.status == "passed", result.verdict
    (turn,) = result.turns
    assert turn.response == "Let me check" and turn.incomplete.endswith("its tool calls were not carried out")
    assert [check.reason for check in turn.checks][1] == "get_weather not called"


def test_a_refusal_in_a_tool_round_ends_the_turn(fake_openai):
    refused = Reply(
        refusal="I won't look that up.", null_content=True,
        tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}],
    )  # fmt: skip
    fake_openai.script("What's the weather in Paris?", [refused, "It is 21 degrees."])
    result = play(fake_openai, WEATHER.replace("    checks:", "    incomplete_reply: fail\n    checks:"))
    assert result.status == "failed" and len(fake_openai.chat_requests()) == 1
    assert result.verdict == (
        "failed on turn 1: the model refused: “I won't look that up.”; its tool calls were not carried out"
    )


def test_max_tool_rounds_ends_the_turn_unfinished_and_says_so(fake_openai):
    fake_openai.tool_rounds = 5
    result = play(fake_openai, WEATHER.replace("tools:\n", "max_tool_rounds: 2\ntools:\n", 1))
    (turn,) = result.turns
    assert len(turn.tool_rounds) == 2 and len(fake_openai.chat_requests()) == 3
    assert result.status == "error"
    assert "no answer after 2 rounds of tool calls (max_tool_rounds)" in result.verdict


def test_a_later_turn_sends_the_earlier_tool_exchange_again(fake_openai):
    source = WEATHER.replace(
        '  - prompt: What\'s the weather in Paris?\n    checks:\n      - contains: "21"\n',
        "  - input: [Weather in Paris?, And tomorrow?]\n    checks:\n      - contains: Tool results\n",
    )
    result = play(fake_openai, source)
    assert result.status == "passed"
    later = fake_openai.chat_requests()[2]["messages"]
    assert [m["role"] for m in later] == ["user", "assistant", "tool", "assistant", "user"]


@pytest.mark.parametrize("kind", ["inline", "async"])
def test_the_asyncio_path_plays_tools_as_the_inline_one(fake_openai, kind):
    suite = load_suite(WEATHER)
    if kind == "inline":
        result = run_eval(suite.evals[0], 0, "e", fake_context(fake_openai, suite))
    else:
        result = play_async(fake_openai, suite)
    assert result.status == "passed" and result.turns[0].tool_calls[0].source == "responses"


def test_a_tool_may_be_written_in_openais_request_form_and_a_call_pattern_may_say_arguments(fake_openai):
    source = """\
name: openai-form
tools:
  - type: function
    function:
      name: get_weather
      description: Current weather for a city
      parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    returns: sunny
evals:
  - prompt: Weather in Paris?
    checks:
      - tool_called: {name: get_weather, arguments: {city: Paris}}
      - tool_not_called: {name: get_weather, arguments: {city: Lyon}}
      - tool_result: {name: get_weather, arguments: {city: Paris}, result: sunny}
"""
    suite = load_suite(source)
    assert suite.tools[0].name == "get_weather" and suite.tools[0].returns == "sunny"
    result = play(fake_openai, source)
    assert (
        fake_openai.chat_requests()[0]["tools"][0]["function"]["description"] == "Current weather for a city"
    )
    assert result.status == "passed"
    assert [check.passed for check in result.turns[0].checks] == [True, True, True]
