"""End-to-end for the checks on tool use: a suite with tools, launched and played by a real Celery worker
against the fake OpenAI server, whose scripts make the model call the wrong tool or the right one.

We assert what is stored: each turn's calls and check results (Turn.record), the follow-up's reason, and
the conversation's verdict.
"""

from __future__ import annotations

import pytest

from runs.models import Status
from tests.e2e.conftest import wait_for_run
from tests.factories import launch
from tests.fakeopenai import Reply

pytestmark = [pytest.mark.e2e]

TOOLS = """
name: tools-e2e
model: fake/test-model
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21, sky: clear}
    returns: no data
  - name: get_forecast
    parameters: {type: object, properties: {city: {type: string}}}
    returns: rain tomorrow
  - name: search
    parameters: {type: object, properties: {q: {type: string}}}
    returns: [AF123, BA456]
  - name: book
    parameters: {type: object, properties: {flight: {type: string}}}
    returns: {booked: true}
"""

TREE = (
    TOOLS
    + """
evals:
  - id: corrected
    prompt: What's the weather in Paris?
    checks:
      - tool_called: {name: get_weather, args: {city: Paris}}
        prompt: Use the get_weather tool, please.
        checks:
          - tool_called: {name: get_weather, args: {city: Paris}}
          - tool_result: {name: get_weather, result: {contains: "21"}}
  - id: stubborn
    prompt: What's the weather in Lyon?
    checks:
      - tool_called: {name: get_weather, args: {city: Lyon}}
        prompt: Use the get_weather tool, please.
        checks:
          - tool_called: {name: get_weather, args: {city: Lyon}}
"""
)


def _calls(name: str, arguments: dict) -> Reply:
    return Reply(tool_calls=[{"name": name, "arguments": arguments}])


def test_a_follow_up_fires_because_the_wrong_tool_was_called(user, fake_endpoint, fake_openai, start_worker):
    fake_openai.script(
        "What's the weather in Paris?",
        [_calls("get_forecast", {"city": "Paris"}), "Rain tomorrow.", _calls("get_weather", {"city": "Paris"}), "21 and clear."],
    )  # fmt: skip
    fake_openai.script(
        "What's the weather in Lyon?",
        [_calls("get_forecast", {"city": "Lyon"}), "Rain.", _calls("get_forecast", {"city": "Lyon"}), "Rain."],
    )  # fmt: skip
    start_worker()
    run = wait_for_run(launch(user, TREE))

    corrected = run.conversations.get(eval_id="corrected")
    assert (corrected.status, corrected.verdict, corrected.turn_count) == (
        Status.PASSED,
        "passed on turn 2",
        2,
    )
    first, second = [turn.record for turn in corrected.turns.all()]
    assert [call["name"] for call in first["tool_rounds"][0]["calls"]] == ["get_forecast"]
    (wrong,) = first["checks"]
    assert wrong["label"] == "tool_called get_weather {city: Paris}"
    assert (wrong["passed"], wrong["reason"]) == (False, "no call to get_weather; called get_forecast")
    # The follow-up's turn is stored, and says why it was sent.
    assert second["prompt"] == "Use the get_weather tool, please."
    assert second["followup_reason"] == "tool_called get_weather {city: Paris} failed on turn 1"
    assert second["tool_rounds"][0]["calls"][0]["arguments"] == {"city": "Paris"}
    assert [check["passed"] for check in second["checks"]] == [True, True]
    # The follow-up request carried the first turn's tool exchange.
    requests = fake_openai.chat_requests(first_user="What's the weather in Paris?")
    assert [m["role"] for m in requests[-1]["messages"]] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool",
    ]  # fmt: skip

    stubborn = run.conversations.get(eval_id="stubborn")
    assert (stubborn.status, stubborn.verdict) == (Status.FAILED, "failed after 2 turns")
    last = stubborn.turns.all().last().record
    assert last["checks"][0]["reason"] == "no call to get_weather; called get_forecast"
    assert run.status == Status.FAILED


TURNS = (
    TOOLS
    + """
evals:
  - id: booking
    turns:
      - input: Find me a flight to Paris.
        checks:
          - tool_called: {name: search, args: {q: {contains: paris}}, times: 1}
          - tool_not_called: book
      - input: Book the first one.
        checks:
          - tool_called: {name: book, args: {flight: AF123}}
          - tool_sequence: {calls: [search, book], mode: strict, scope: conversation}
      - input: Thanks!
        checks:
          - tool_sequence: {calls: [], mode: strict}
          - tool_not_called: {name: book, scope: conversation}
"""
)


def test_scripted_turns_carry_their_own_tool_expectations(user, fake_endpoint, fake_openai, start_worker):
    fake_openai.script(
        "Find me a flight to Paris.",
        [_calls("search", {"q": "Paris flights"}), "AF123 or BA456.", _calls("book", {"flight": "BA456"}), "Booked.",
         "You're welcome."],
    )  # fmt: skip
    start_worker()
    run = wait_for_run(launch(user, TURNS))

    booking = run.conversations.get(eval_id="booking")
    assert booking.status == Status.FAILED and booking.turn_count == 3
    first, second, third = [turn.record for turn in booking.turns.all()]
    assert first["passed"] is True
    assert [check["reason"] for check in first["checks"]] == [
        "called search with matching arguments 1 time",
        "book not called",
    ]
    assert second["passed"] is False
    wrong_flight, sequence = second["checks"]
    assert (
        wrong_flight["reason"] == "called book with {\"flight\": \"BA456\"} (flight: 'BA456' is not 'AF123')"
    )
    assert sequence["passed"] and sequence["label"] == "tool_sequence strict search → book (conversation)"
    assert third["tool_rounds"] == []
    no_calls, never_booked = third["checks"]
    assert no_calls["passed"] and no_calls["reason"] == "no tool calls, as expected"
    assert not never_booked["passed"] and never_booked["reason"] == 'called book with {"flight": "BA456"}'
    assert booking.status == "failed" and booking.verdict.startswith("1 of 3 turns passed")
