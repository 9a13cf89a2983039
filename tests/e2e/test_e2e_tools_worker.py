"""Tools through real Celery workers and the fake OpenAI server: every stored Turn row carries its tool rounds,
a simulated user talks with an agent that calls tools, and a worker killed mid-run is taken over after the
last stored turn without a turn or a tool call lost or played twice."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from engine.results import TurnRecord
from runs.models import Conversation, Status, Turn
from tests.e2e.conftest import wait_for_run
from tests.factories import launch

pytestmark = [pytest.mark.e2e]

TOOLS = """\
tools:
  - name: get_weather
    description: Current weather for a city
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21}
    returns: mild
"""

SUITE = f"""\
name: weather-agent
model: fake/m
{TOOLS}evals:
  - id: scripted
    input: [Weather in Paris?, Weather in Rome?]
    checks: [{{contains: mild}}]
  - id: simulated
    prompt: Weather in Oslo?
    simulate:
      persona: You are planning a trip.
      max_turns: 2
      on_max_turns: pass
    checks: [{{contains: Tool results}}]
  - id: history
    messages:
      - {{role: user, content: Weather in Nice?}}
      - role: assistant
        tool_calls: [{{id: given_1, function: {{name: get_weather, arguments: {{city: Nice}}}}}}]
      - {{role: tool, tool_call_id: given_1, content: sunny}}
    checks: [{{contains: sunny}}]
"""

GIVEN_SENT = [
    {"role": "user", "content": "Weather in Nice?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "given_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Nice"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "given_1", "content": "sunny"},
]


def _records(conversation: Conversation) -> list[TurnRecord]:
    return [TurnRecord.model_validate(turn.record) for turn in conversation.turns.order_by("position")]


def test_stored_turns_carry_their_tool_rounds(user, fake_endpoint, fake_openai, start_worker):
    fake_openai.rule("You are the user in a conversation", "Weather in Lima?", where="system")
    start_worker()
    run = wait_for_run(launch(user, SUITE))

    assert run.status == Status.PASSED
    scripted = _records(run.conversations.get(eval_id="scripted"))
    assert [[(c.name, c.arguments, c.result, c.source) for c in r.tool_calls] for r in scripted] == [
        [("get_weather", {"city": "Paris"}, '{"temperature": 21}', "responses")],
        [("get_weather", {"city": "Rome"}, "mild", "returns")],
    ]
    assert scripted[1].response == "Tool results: mild"
    simulated = _records(run.conversations.get(eval_id="simulated"))
    assert [r.prompt for r in simulated] == ["Weather in Oslo?", "Weather in Lima?"]
    assert [[c.arguments["city"] for c in r.tool_calls] for r in simulated] == [["Oslo"], ["Lima"]]
    (asked,) = [r for r in fake_openai.chat_requests() if "You are the user" in r["messages"][0]["content"]]
    assert [m["role"] for m in asked["messages"]] == ["system", "user"]
    assert asked["messages"][0]["content"].endswith("You: Weather in Oslo?\nAgent: Tool results: mild")
    # A given history's tool exchange is stored at launch and sent as given; the model answers its result.
    history = run.conversations.get(eval_id="history")
    assert history.history == GIVEN_SENT
    (answer,) = fake_openai.chat_requests(first_user="Weather in Nice?")
    assert answer["messages"] == GIVEN_SENT and _records(history)[0].response == "Tool results: sunny"
    # Rome's turn was sent Paris's exchange as it was stored.
    rome = [
        r for r in fake_openai.chat_requests(first_user="Weather in Paris?") if "Rome" in str(r["messages"])
    ]
    stored_call = scripted[0].tool_calls[0]
    assert rome[0]["messages"][1]["tool_calls"][0]["id"] == stored_call.id
    assert rome[0]["messages"][2] == {
        "role": "tool",
        "tool_call_id": stored_call.id,
        "content": stored_call.result,
    }


TURNS = 4
CONVERSATIONS = 4


def _long_suite() -> str:
    body = "".join(
        f"  - id: c{i}\n    input: [{', '.join(f'Weather in Paris for c{i} turn {k}?' for k in range(1, TURNS + 1))}]\n"
        "    checks: [{contains: Tool results}]\n"
        for i in range(CONVERSATIONS)
    )
    return f"name: long-weather\nmodel: fake/m\n{TOOLS}evals:\n{body}"


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _asked_for(request: dict) -> str:
    """The user message a request answers: the last one it carries (a tool round's request carries it too)."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"][-1]


def test_a_killed_worker_is_resumed_without_a_turn_or_a_tool_call_lost_or_repeated(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_openai.latency = 0.25
    workers = [start_worker(), start_worker()]
    run = launch(user, _long_suite(), concurrency=CONVERSATIONS)
    holder: list = []

    def under_way() -> bool:
        if Turn.objects.filter(conversation__run=run).count() < CONVERSATIONS:
            return False
        for worker in workers:
            if Conversation.objects.filter(
                run=run, status=Status.RUNNING, worker__contains=f":{worker.process.pid}:"
            ).exists():
                holder.append(worker)
                return True
        return False

    _wait(under_way, 40, "a worker to play part of the run")
    holder[0].kill()
    stored_before = {
        (eval_id, position)
        for eval_id, position in Turn.objects.filter(conversation__run=run).values_list(
            "conversation__eval_id", "position"
        )
    }

    run = wait_for_run(run, timeout=60)

    assert run.status == Status.PASSED
    assert any(c.attempt >= 2 for c in run.conversations.all()), "no conversation was taken over"
    requests = Counter(_asked_for(r) for r in fake_openai.chat_requests())
    for conversation in run.conversations.all():
        records = _records(conversation)
        assert [r.turn for r in records] == list(range(1, TURNS + 1)), conversation.eval_id
        assert [len(r.tool_calls) for r in records] == [1] * TURNS, conversation.eval_id
        for record in records:
            asked = requests[record.prompt]
            if (conversation.eval_id, record.turn) in stored_before:
                # Stored before the kill: its tool round and its answer were asked once, never again.
                assert asked == 2, (conversation.eval_id, record.turn, asked)
            else:  # the turn in flight when the worker died is asked again, whole
                assert 2 <= asked <= 4, (conversation.eval_id, record.turn, asked)
        # Each later turn was sent the earlier turns' exchanges as stored: their calls' ids, not new ones.
        last = [r for r in fake_openai.chat_requests() if _asked_for(r) == records[-1].prompt][-1]
        sent_ids = [m["tool_call_id"] for m in last["messages"] if m["role"] == "tool"]
        assert sent_ids == [r.tool_calls[0].id for r in records]
    assert len(stored_before) < CONVERSATIONS * TURNS, "the worker was killed after the run had finished"
