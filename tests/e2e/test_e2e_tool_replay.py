"""Recorded tool results replayed, end to end through a real Celery worker and the fake OpenAI server: a run
whose tool is played by a model (`llm`) is exported as its results.json from the run page, attached to a suite
whose tool `replay`s it, and that run gets the same tool results and replies without calling the tool's model."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import wait_for_run
from tests.factories import launch

pytestmark = [pytest.mark.e2e]

TOOL_MODEL = "You play the tool `get_weather`"

RECORDING = """\
name: weather agent
model: fake/agent-model
judge: fake/judge-model
tools:
  - name: get_weather
    description: Current weather for a city, as JSON
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    llm: true
evals:
  - id: paris
    prompt: Weather in Paris?
    checks:
      - contains: temperature
  - id: rome
    input: [Weather in Rome?, And tomorrow in Rome?]
    checks:
      - contains: temperature
"""
# The same tool replayed, the judge still there for a call that was not recorded (none is).
REPLAYING = RECORDING.replace("name: weather agent", "name: weather agent, replayed").replace(
    "    llm: true\n", "    replay: recorded.json\n    llm: true\n"
)


def _tool_model_calls(fake) -> int:
    return sum(
        1 for request in fake.chat_requests() if TOOL_MODEL in str(request["messages"][0].get("content"))
    )


def _exported(client, run) -> dict:
    response = client.get(f"/runs/{run.pk}/results.json")
    assert response.status_code == 200
    return json.loads(b"".join(response.streaming_content) if response.streaming else response.content)


def _calls(document: dict) -> dict[str, list]:
    return {
        result["id"]: [
            [(call["name"], call["arguments"], call["result"], call["error"]) for call in _turn_calls(turn)]
            for turn in result["turns"]
        ]
        for result in document["evals"]
    }


def _turn_calls(turn: dict) -> list[dict]:
    return [call for round_ in turn["tool_rounds"] for call in round_["calls"]]


def test_a_run_replays_the_tool_results_another_run_recorded(
    user, client, fake_endpoint, fake_openai, start_worker
):
    # The tool's model answers by the call's arguments, and by how many of its own answers it is shown.
    fake_openai.script('{"city": "Paris"}', ['{"temperature": 21, "sky": "clear"}'])
    fake_openai.script(
        '{"city": "Rome"}', ['{"temperature": 17}', '{"temperature": 15, "as": "said: 17 today"}']
    )
    start_worker()
    client.force_login(user)

    recorded_run = wait_for_run(launch(user, RECORDING))
    assert recorded_run.status == "passed"
    recorded = _exported(client, recorded_run)
    asked = _tool_model_calls(fake_openai)
    assert asked == 3  # Paris once, Rome on each of its two turns

    replay_run = wait_for_run(launch(user, REPLAYING, files={"recorded.json": json.dumps(recorded)}))
    assert replay_run.status == "passed"
    replayed = _exported(client, replay_run)

    assert _tool_model_calls(fake_openai) == asked  # the tool's model was not called again
    assert _calls(replayed) == _calls(recorded)
    assert _calls(recorded)["rome"][1] == [
        ("get_weather", {"city": "Rome"}, '{"temperature": 15, "as": "said: 17 today"}', None)
    ]
    replies = {r["id"]: [t["response"] for t in r["turns"]] for r in recorded["evals"]}
    assert {r["id"]: [t["response"] for t in r["turns"]] for r in replayed["evals"]} == replies
    sources = {call["source"] for r in replayed["evals"] for t in r["turns"] for call in _turn_calls(t)}
    assert sources == {"replay"}
    # The recording paid for the tool's model as judge usage; the replay paid nothing.
    assert recorded["totals"]["judge_tokens"] > 0 and replayed["totals"]["judge_tokens"] == 0
