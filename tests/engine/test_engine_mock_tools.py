"""The built-in mock playing an agent (engine/clients/mock.py, a rule's `calls`), and the example agent suite
examples/agent-weather.yaml that `make run` loads, which must pass on the mock."""

from __future__ import annotations

import json

from engine.clients import MockClient
from engine.loader import load_suite
from engine.runner import run_suite
from engine.schema import MockSpec
from tests.conftest import ROOT
from tests.engine.doubles import assistant, user

AGENT = ROOT / "examples" / "agent-weather.yaml"
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def _spec() -> MockSpec:
    return MockSpec(
        rules=[
            {
                "when": "*Paris*",
                "calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "get_time", "arguments": {"city": "Paris", "utc": True}},
                ],
                "reply": "Paris: {{tool_results}}.",
            },
            {"when": "*", "reply": "plain"},
        ]
    )


def _tool(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _calling(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [{"id": i, "type": "function"} for i in ids]}


def test_a_rule_with_calls_answers_the_users_message_with_them_when_tools_are_offered():
    completion = MockClient(_spec()).complete("m", [user("Weather in Paris?")], tools=[WEATHER_TOOL])
    assert completion.tool_calls and completion.text == ""
    assert completion.calls == (
        {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"id": "call_2", "name": "get_time", "arguments": '{"city": "Paris", "utc": true}'},
    )
    assert completion.usage.completion_tokens > 0 and completion.usage.estimated


def test_after_the_results_the_rule_replies_with_them_in_place_of_the_placeholder():
    messages = [user("Weather in Paris?"), _calling("call_1", "call_2"), _tool("call_1", "21 °C"),
                _tool("call_2", '{"time": "12:00"}')]  # fmt: skip
    completion = MockClient(_spec()).complete("m", messages, tools=[WEATHER_TOOL])
    assert not completion.calls and not completion.tool_calls
    assert completion.text == 'Paris: 21 °C; {"time": "12:00"}.'


def test_only_this_turns_results_fill_the_placeholder_and_ids_go_on_in_the_conversation():
    earlier = [user("Paris?"), _calling("call_1", "call_2"), _tool("call_1", "old"), _tool("call_2", "old"),
               assistant("Paris: old; old.")]  # fmt: skip
    asked = MockClient(_spec()).complete("m", [*earlier, user("And Paris now?")], tools=[WEATHER_TOOL])
    assert [call["id"] for call in asked.calls] == ["call_3", "call_4"]
    answered = MockClient(_spec()).complete(
        "m", [*earlier, user("And Paris now?"), _calling("call_3", "call_4"), _tool("call_3", "new"),
              _tool("call_4", "now")], tools=[WEATHER_TOOL],
    )  # fmt: skip
    assert answered.text == "Paris: new; now."


def test_without_tools_offered_a_rule_with_calls_replies_at_once():
    completion = MockClient(_spec()).complete("m", [user("Weather in Paris?")])
    assert not completion.calls and completion.text == "Paris: ."


def test_the_example_agent_suite_plays_its_tools_and_passes_on_the_mock(registry):
    suite = load_suite(AGENT.read_bytes(), filename=AGENT.name)
    suite.mock.latency_ms = 0
    report = run_suite(suite, registry)
    assert report.mock and report.status == "passed"
    assert {r.id: r.status for r in report.evals} == dict.fromkeys(
        ["weather-paris", "two-cities", "no-station", "currency", "unknown-tool"], "passed"
    )
    calls = {r.id: r.turns[0].tool_calls for r in report.evals}
    assert [(c.name, c.arguments, c.result) for c in calls["two-cities"]] == [
        ("get_weather", {"city": "Paris"}, "21 °C, clear"),
        ("get_weather", {"city": "Oslo"}, "-3 °C, snow"),
    ]
    assert [(c.source, c.error) for c in calls["no-station"]] == [
        ("responses", "no weather station for this city")
    ]
    assert json.loads(calls["currency"][0].result) == {"amount": 108.4, "currency": "USD"}
    [mistake] = calls["unknown-tool"]
    assert mistake.mistake and mistake.name == "get_forecast"
    assert report.evals[0].turns[0].response == "It is 21 °C, clear in Paris."
