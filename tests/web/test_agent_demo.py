"""The agent demo `make run` loads (examples/agent-weather.yaml) plays its tool calls on the workers' path, on
the built-in mock, and passes; each turn's calls are stored with it."""

from __future__ import annotations

import pytest

from engine.results import TurnRecord
from tests.conftest import ROOT
from tests.factories import launch, play

AGENT = ROOT / "examples" / "agent-weather.yaml"


@pytest.mark.django_db
def test_the_agent_demo_plays_its_tools_on_the_workers_path_and_passes(user):
    source = AGENT.read_text().replace("latency_ms: 300", "latency_ms: 0")
    run = play(launch(user, source))
    assert run.status == "passed"
    conversations = {c.eval_id: c for c in run.conversations.all()}
    assert {eval_id: c.status for eval_id, c in conversations.items()} == dict.fromkeys(
        ["weather-paris", "two-cities", "no-station", "currency", "unknown-tool"], "passed"
    )
    [turn] = conversations["two-cities"].turns.all()
    record = TurnRecord.model_validate(turn.record)
    assert [(call.name, call.arguments, call.result) for call in record.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "21 °C, clear"),
        ("get_weather", {"city": "Oslo"}, "-3 °C, snow"),
    ]
    assert record.response == "Paris and Oslo right now: 21 °C, clear; -3 °C, snow."
