"""Tools in every kind of conversation: a simulated user talks with an agent that calls tools (and sees only
its text replies), a given history carries OpenAI-shaped tool exchanges (validated, sent as given), trees and
scripted turns send each turn's exchange on, a resumed conversation re-sends its stored exchanges without
calling the model or the tools again, and a re-grade grades the stored rounds without calling either.

Against the fake endpoint (tests/fakeopenai/), which calls the first offered tool after a user message and
answers "Tool results: …" once the results are back.
"""

from __future__ import annotations

import pytest

from engine.loader import load_suite
from engine.simulate import transcript_for_user
from engine.source import SuiteError
from tests.engine.fake_play import play

WEATHER_TOOL = """\
tools:
  - name: get_weather
    description: Current weather for a city
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21}
    returns: mild
"""


def _roles(messages: list[dict]) -> list[str]:
    return [m["role"] + ("+calls" if m.get("tool_calls") else "") for m in messages]


# --- simulated users ---------------------------------------------------------------------------------------

SIMULATED = f"""\
name: trip
{WEATHER_TOOL}evals:
  - prompt: Weather in Paris?
    simulate:
      persona: You are planning a trip and ask about the weather.
      max_turns: 3
      on_max_turns: pass
    checks:
      - contains: Tool results
"""


def test_a_simulated_user_talks_with_an_agent_that_calls_tools_on_every_turn(fake_openai):
    """The simulated user sees the conversation as a person would: its messages and the agent's text
    replies, never a tool call or result, and it is offered no tools."""
    fake_openai.rule(
        "You are the user in a conversation", ["Weather in London?", "Weather in Rome?"], where="system"
    )
    result = play(fake_openai, SIMULATED)

    assert result.status == "passed" and len(result.turns) == 3
    assert [[(c.name, c.arguments) for c in turn.tool_calls] for turn in result.turns] == [
        [("get_weather", {"city": "Paris"})],
        [("get_weather", {"city": "London"})],
        [("get_weather", {"city": "Rome"})],
    ]
    assert [turn.response for turn in result.turns] == [
        'Tool results: {"temperature": 21}',
        "Tool results: mild",
        "Tool results: mild",
    ]
    asked = [r for r in fake_openai.chat_requests() if "You are the user" in r["messages"][0]["content"]]
    assert len(asked) == 2
    for request in asked:
        assert "tools" not in request
        assert _roles(request["messages"]) == ["system", "user"]
    assert asked[1]["messages"][0]["content"].endswith(
        "You: Weather in Paris?\n"
        'Agent: Tool results: {"temperature": 21}\n'
        "You: Weather in London?\n"
        "Agent: Tool results: mild"
    )
    # The agent, meanwhile, is sent every earlier turn's tool exchange.
    last = [r for r in fake_openai.chat_requests() if "tools" in r][-2]["messages"]
    assert _roles(last) == ["user", "assistant+calls", "tool", "assistant"] * 2 + ["user"]
    assert result.turns[2].simulated_user.messages == asked[1]["messages"]


def test_a_simulated_conversation_with_tools_resumes_and_regrades_from_its_stored_turns(fake_openai):
    fake_openai.rule(
        "You are the user in a conversation", ["Weather in London?", "Weather in Rome?"], where="system"
    )
    original = play(fake_openai, SIMULATED)
    asked = len(fake_openai.chat_requests())

    resumed = play(fake_openai, SIMULATED, prior=original.turns[:2])
    again = fake_openai.chat_requests()[asked:]
    # The simulated user writes turn 3 only, asked as before; the agent plays turn 3's round and answer.
    assert len(again) == 3 and again[0]["messages"] == original.turns[2].simulated_user.messages
    assert resumed.turns[2].prompt == "Weather in London?"  # the rule's next answer: a new run of turn 3
    assert [len(turn.tool_calls) for turn in resumed.turns] == [1, 1, 1]

    regraded = play(fake_openai, SIMULATED, replay=original.turns)
    assert len(fake_openai.chat_requests()) == asked + 3  # nothing asked: not the user, the agent or a tool
    assert [t.tool_rounds for t in regraded.turns] == [t.tool_rounds for t in original.turns]
    assert regraded.status == "passed"


def test_the_simulated_users_transcript_leaves_tool_messages_out():
    conversation = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temperature": 21}'},
        {"role": "assistant", "content": "It is 21 degrees."},
    ]
    assert transcript_for_user(conversation) == "You: Weather in Paris?\nAgent: It is 21 degrees."


# --- given histories ---------------------------------------------------------------------------------------

GIVEN = f"""\
name: given-tools
{WEATHER_TOOL}evals:
  - id: answers-from-the-result
    messages:
      - {{role: user, content: Weather in Paris?}}
      - role: assistant
        tool_calls:
          - id: call_1
            function: {{name: get_weather, arguments: '{{"city": "Paris"}}'}}
          - id: call_2
            type: function
            function: {{name: get_weather, arguments: {{city: Lyon}}}}
      - {{role: tool, tool_call_id: call_1, content: '{{"temperature": 21}}'}}
      - {{role: tool, tool_call_id: call_2, content: mild}}
    checks:
      - contains: "21"
"""

GIVEN_SENT = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21}'},
    {"role": "tool", "tool_call_id": "call_2", "content": "mild"},
]


def test_a_given_history_with_a_tool_exchange_is_sent_as_given(fake_openai):
    result = play(fake_openai, GIVEN)
    (request,) = fake_openai.chat_requests()
    assert request["messages"] == GIVEN_SENT
    assert result.status == "passed"
    (turn,) = result.turns
    assert turn.response == 'Tool results: {"temperature": 21} | mild' and turn.tool_calls == []
    assert result.history == GIVEN_SENT


def test_a_given_history_with_tool_calls_leads_into_live_turns_and_a_given_reply(fake_openai):
    live = GIVEN.replace(
        '    checks:\n      - contains: "21"\n',
        "    input: And in Rome?\n    checks:\n      - contains: mild\n",
    )
    result = play(fake_openai, live)
    assert result.status == "passed"
    (turn,) = result.turns
    assert [c.arguments for c in turn.tool_calls] == [{"city": "Rome"}]
    first = fake_openai.chat_requests()[0]["messages"]
    assert first == [*GIVEN_SENT, {"role": "user", "content": "And in Rome?"}]

    given = GIVEN.replace("    checks:\n", "    reply: It is 21 degrees in Paris.\n    checks:\n")
    before = len(fake_openai.chat_requests())
    assert play(fake_openai, given).status == "passed"
    assert len(fake_openai.chat_requests()) == before  # a given reply calls no model


def _history_problem(messages: str):
    with pytest.raises(SuiteError) as info:
        load_suite(f"name: s\nevals:\n  - messages: {messages}\n    checks: [{{contains: x}}]\n")
    (problem,) = info.value.problems
    return problem


CALL = "{role: assistant, tool_calls: [{id: c1, function: {name: f}}]}"


@pytest.mark.parametrize(
    ("messages", "path", "needle"),
    [
        (
            "[{role: user, content: hi}, {role: tool, tool_call_id: c1, content: r}]",
            "evals[0].messages[1].tool_call_id",
            "answers the call `c1`, which was made by no assistant message before it",
        ),
        (
            f"[{{role: user, content: hi}}, {CALL}, {{role: tool, tool_call_id: c2, content: r}}]",
            "evals[0].messages[2].tool_call_id",
            "was made by no assistant message before it",
        ),
        (
            f"[{{role: user, content: hi}}, {CALL}, {{role: tool, tool_call_id: c1, content: r}},"
            " {role: tool, tool_call_id: c1, content: again}]",
            "evals[0].messages[3].tool_call_id",
            "which was answered already",
        ),
        (
            f"[{{role: user, content: hi}}, {CALL}, {{role: user, content: well?}}]",
            "evals[0].messages[1].tool_calls",
            "the call `c1` has no `tool` message answering it before the next message",
        ),
        (
            f"[{{role: user, content: hi}}, {CALL}]",
            "evals[0].messages[1].tool_calls",
            "the call `c1` has no `tool` message answering it before the history ends",
        ),
        (
            f"[{{role: user, content: hi}}, {CALL}, {{role: tool, tool_call_id: c1, content: r}},"
            f" {CALL}, {{role: tool, tool_call_id: c1, content: r}}]",
            "evals[0].messages[3].tool_calls[0].id",
            "the call id `c1` is used twice",
        ),
        (
            "[{role: user, content: hi}, {role: assistant}]",
            "evals[0].messages[1].content",
            "`content` is required",
        ),
        (
            "[{role: user, content: hi}, {role: assistant, content: ''}]",
            "evals[0].messages[1].content",
            "a message needs content: text, or parts with text or a file (or, from the assistant, `tool_calls`)",
        ),
        (
            "[{role: user, content: hi}, {role: assistant, tool_calls: []}]",
            "evals[0].messages[1].tool_calls",
            "`tool_calls` needs at least one call",
        ),
        (
            "[{role: user, content: hi, tool_calls: [{id: c1, function: {name: f}}]}]",
            "evals[0].messages[0].tool_calls",
            "only an `assistant` message makes tool calls",
        ),
        (
            f"[{{role: user, content: hi}}, {CALL}, {{role: tool, content: r}}]",
            "evals[0].messages[1].tool_calls",
            "the call `c1` has no `tool` message answering it before the next message",
        ),
        (
            "[{role: user, content: hi, tool_call_id: c1}]",
            "evals[0].messages[0].tool_call_id",
            "only a `tool` message answers a tool call",
        ),
    ],
)
def test_a_tool_exchange_in_a_history_is_checked_where_it_breaks(messages, path, needle):
    problem = _history_problem(messages)
    assert problem.path == path and needle in problem.message, problem
    assert problem.line == 3


# --- trees and scripted turns ------------------------------------------------------------------------------

TREE = f"""\
name: tree
{WEATHER_TOOL}evals:
  - prompt: Weather in Paris?
    checks:
      - contains: sunny
      - prompt: Weather in London?
        checks:
          - contains: mild
"""


def test_a_tree_follow_up_carries_the_first_turns_tool_exchange(fake_openai):
    result = play(fake_openai, TREE)
    assert result.status == "passed" and len(result.turns) == 2
    assert [c.arguments for c in result.turns[1].tool_calls] == [{"city": "London"}]
    follow_up = fake_openai.chat_requests()[2]["messages"]
    assert _roles(follow_up) == ["user", "assistant+calls", "tool", "assistant", "user"]


TURNS = f"""\
name: turns
{WEATHER_TOOL}evals:
  - turns:
      - input: Weather in Paris?
        checks: [{{contains: "21"}}]
      - input: Weather in London?
        checks: [{{match: "*mild*"}}]
      - input: Weather in Rome?
        checks: [{{contains: mild}}]
"""


def test_a_resumed_conversation_resends_its_stored_exchanges_and_calls_nothing_again(fake_openai):
    """A worker that died after turn 1: the resumed conversation asks the model only for turns 2 and 3, and
    sends turn 1's stored exchange exactly as the first run did."""
    original = play(fake_openai, TURNS)
    assert original.status == "passed" and len(fake_openai.chat_requests()) == 6
    first_run = fake_openai.chat_requests()

    reported = []
    resumed = play(fake_openai, TURNS, prior=original.turns[:1], on_turn=reported.append)
    again = fake_openai.chat_requests()[6:]
    assert len(again) == 4  # two requests (a tool round and the answer) for each of turns 2 and 3
    assert again[0]["messages"] == first_run[2]["messages"]  # turn 1's exchange, with its stored call ids
    assert [_roles(r["messages"]) for r in again] == [_roles(r["messages"]) for r in first_run[2:]]
    assert [turn.turn for turn in reported] == [2, 3]
    assert resumed.status == "passed"
    assert resumed.turns[0].tool_rounds == original.turns[0].tool_rounds  # the stored calls, not new ones
    assert [len(turn.tool_calls) for turn in resumed.turns] == [1, 1, 1]

    whole = play(fake_openai, TURNS, prior=original.turns)
    assert len(fake_openai.chat_requests()) == 10 and whole.turns == original.turns


def test_a_regrade_grades_the_stored_tool_rounds_without_calling_the_model_or_the_tools(fake_openai):
    original = play(fake_openai, TURNS)
    asked = len(fake_openai.chat_requests())
    edited = TURNS.replace('[{match: "*mild*"}]', "[{contains: sunny}]")
    regraded = play(fake_openai, edited, replay=original.turns)
    assert len(fake_openai.chat_requests()) == asked
    assert [turn.tool_rounds for turn in regraded.turns] == [turn.tool_rounds for turn in original.turns]
    assert [turn.passed for turn in regraded.turns] == [True, False, True]
    assert regraded.status == "failed"
