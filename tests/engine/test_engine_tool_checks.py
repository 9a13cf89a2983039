"""The checks on tool use (`tool_called`, `tool_not_called`, `tool_sequence`, `tool_result`), the trajectory
judge, and Letta's tool extractors: played against the fake endpoint, whose scripts make the model call the
tools a test needs (the wrong ones included)."""

from __future__ import annotations

import json

import pytest

from engine.checks import calls_out
from engine.loader import load_suite
from engine.results import CallRef
from engine.schema import Check
from engine.transcript import format_transcript, tool_calls_in
from tests.engine.fake_play import play, play_async
from tests.fakeopenai import Reply

PROMPT = "Plan my trip to Paris"

TOOLS = """\
name: tool-checks
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}, units: {type: string}}}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21, sky: clear}
    returns: unknown city
  - name: search
    parameters: {type: object, properties: {q: {type: string}}}
    returns: [flight 1, flight 2]
  - name: book
    parameters: {type: object, properties: {date: {type: string}, flight: {type: integer}}}
    returns: {booked: true}
  - name: cancel
    parameters: {type: object, properties: {flight: {type: integer}}}
    returns: ""
  - name: delete_account
    returns: deleted
"""


def _calls(*calls) -> Reply:
    """One model answer that makes these calls, each (name, arguments)."""
    return Reply(tool_calls=[{"name": name, "arguments": arguments} for name, arguments in calls])


def graded(fake, checks: list, *rounds: Reply):
    """The check results of one reply to PROMPT, after the model made `rounds` of tool calls."""
    fake.script(PROMPT, [*rounds, "All done."])
    source = TOOLS + "evals:\n  - prompt: " + PROMPT + "\n    checks: " + json.dumps(checks) + "\n"
    result = play(fake, source)
    assert result.turns[0].response == "All done."
    return result.turns[0].checks


def one(fake, check: dict, *rounds: Reply):
    (result,) = graded(fake, [check], *rounds)
    return result


# --- tool_called ---------------------------------------------------------------------------------------------


def test_tool_called_names_the_call_made_instead_and_why_its_arguments_do_not_match(fake_openai):
    result = one(fake_openai, {"tool_called": {"name": "get_weather", "args": {"city": "Paris"}}},
                 _calls(("get_weather", {"city": "Lyon"})))  # fmt: skip
    assert result.label == "tool_called get_weather {city: Paris}"
    assert not result.passed
    assert result.reason == "called get_weather with {\"city\": \"Lyon\"} (city: 'Lyon' is not 'Paris')"


def test_tool_called_shorthand_passes_on_any_call_and_fails_saying_what_was_called(fake_openai):
    ok = one(fake_openai, {"tool_called": "get_weather"}, _calls(("get_weather", {"city": "Rome"})))
    assert ok.passed and ok.reason == "called get_weather 1 time" and ok.type == "tool_called"
    fake_openai.reset()
    wrong = one(fake_openai, {"tool_called": "get_weather"}, _calls(("search", {"q": "Paris"})))
    assert not wrong.passed and wrong.reason == "no call to get_weather; called search"
    fake_openai.reset()
    fake_openai.script(PROMPT, ["All done."])
    source = TOOLS + f"evals:\n  - prompt: {PROMPT}\n    checks: [{{tool_called: get_weather}}]\n"
    (none,) = play(fake_openai, source).turns[0].checks
    assert not none.passed and none.reason == "no tool calls in this reply"


@pytest.mark.parametrize(
    ("matcher", "passed", "reason"),
    [
        ({"regex": "^Par"}, True, None),
        ({"regex": "^Lyo"}, False, "city: 'Paris' does not match /^Lyo/"),
        ({"contains": "ari"}, True, None),
        ({"contains": "yon"}, False, "city: 'Paris' does not contain 'yon'"),
        ({"any": True}, True, None),
        ({"type": "string", "enum": ["Paris", "Nice"]}, True, None),
        ({"type": "string", "maxLength": 3}, False, "city: 'Paris': 'Paris' is too long"),
    ],
)
def test_every_argument_matcher(fake_openai, matcher, passed, reason):
    result = one(fake_openai, {"tool_called": {"name": "get_weather", "args": {"city": matcher}}},
                 _calls(("get_weather", {"city": "Paris"})))  # fmt: skip
    assert result.passed is passed
    if reason:
        assert result.reason == f'called get_weather with {{"city": "Paris"}} ({reason})'


def test_an_argument_not_given_fails_even_with_any(fake_openai):
    result = one(fake_openai, {"tool_called": {"name": "get_weather", "args": {"units": {"any": True}}}},
                 _calls(("get_weather", {"city": "Paris"})))  # fmt: skip
    assert not result.passed and result.reason.endswith("(units: not given)")


def test_an_llm_judge_matcher_asks_the_judge_about_the_value(fake_openai):
    fake_openai.rule("Value:\nParis", '{"score": 1, "reason": "a real city"}')
    fake_openai.rule("Value:\nAtlantis", '{"score": 0, "reason": "a myth"}')
    check = {"tool_called": {"name": "get_weather", "args": {"city": {"llm_judge": "a real city"}}}}
    ok = one(fake_openai, check, _calls(("get_weather", {"city": "Paris"})))
    assert ok.passed and ok.label == 'tool_called get_weather {city: judged "a real city"}'
    judge_request = [r for r in fake_openai.chat_requests() if "Value:" in r["messages"][-1]["content"]]
    assert "Criteria:\na real city" in judge_request[0]["messages"][-1]["content"]
    fake_openai.reset()
    fake_openai.rule("Value:\nAtlantis", '{"score": 0, "reason": "a myth"}')
    bad = one(fake_openai, check, _calls(("get_weather", {"city": "Atlantis"})))
    assert not bad.passed and "city: 'Atlantis' does not meet 'a real city': a myth" in bad.reason


@pytest.mark.parametrize(
    ("bounds", "passed", "reason"),
    [
        ({"times": 2}, True, "called search 2 times"),
        ({"times": 1}, False, "called search 2 times, expected exactly 1"),
        ({"min": 3}, False, "called search 2 times, expected at least 3"),
        ({"max": 1}, False, "called search 2 times, expected at most 1"),
        ({"min": 1, "max": 2}, True, "called search 2 times"),
        ({"max": 0, "args": {"q": "Rome"}}, True, "search not called with matching arguments, as allowed"),
        ({"times": 1, "args": {"q": "Nice"}}, True, "called search with matching arguments 1 time"),
    ],
)
def test_times_min_and_max_bound_the_count(fake_openai, bounds, passed, reason):
    result = one(fake_openai, {"tool_called": {"name": "search", **bounds}},
                 _calls(("search", {"q": "Paris"}), ("search", {"q": "Nice"})))  # fmt: skip
    assert (result.passed, result.reason) == (passed, reason)


# --- tool_not_called -------------------------------------------------------------------------------------------


def test_tool_not_called(fake_openai):
    ok = one(fake_openai, {"tool_not_called": "delete_account"}, _calls(("search", {"q": "x"})))
    assert (
        ok.passed
        and ok.reason == "delete_account not called"
        and ok.label == "tool_not_called delete_account"
    )
    fake_openai.reset()
    bad = one(fake_openai, {"tool_not_called": "delete_account"}, _calls(("delete_account", {})))
    assert not bad.passed and bad.reason == "called delete_account with {}"
    fake_openai.reset()
    other = one(fake_openai, {"tool_not_called": {"name": "cancel", "args": {"flight": 2}}},
                _calls(("cancel", {"flight": 1})))  # fmt: skip
    assert other.passed and other.reason == "cancel called, but never with matching arguments"


# --- tool_sequence ---------------------------------------------------------------------------------------------

SEARCH = ("search", {"q": "Paris"})
BOOK = ("book", {"date": "2026-05-01", "flight": 1})
CANCEL = ("cancel", {"flight": 1})
WEATHER = ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize(
    ("mode", "calls", "passed", "reason"),
    [
        ("strict", [SEARCH, BOOK], True, "called search → book, as expected"),
        ("strict", [SEARCH, CANCEL], False, "expected search → book, got search → cancel"),
        ("strict", [BOOK, SEARCH], False, "expected search → book, got book → search"),
        ("strict", [SEARCH, BOOK, WEATHER], False, "expected search → book, got search → book → get_weather"),
        ("in_order", [SEARCH, WEATHER, BOOK], True, "called search → book in order, in search → get_weather → book"),
        ("in_order", [BOOK, SEARCH], False, "expected search → book, got book → search: no book {date: /2026-/} after search"),
        ("in_order", [SEARCH, ("book", {"date": "2025-01-01"})], False,
         "expected search → book, got search → book: "
         "book: called book with {\"date\": \"2025-01-01\"} (date: '2025-01-01' does not match /2026-/)"),
        ("unordered", [BOOK, SEARCH], True, "called book → search: the expected calls, in any order"),
        ("unordered", [BOOK, SEARCH, WEATHER], False,
         "expected search → book, got book → search → get_weather: unexpected get_weather"),
        ("superset", [WEATHER, BOOK, SEARCH], True, "called get_weather → book → search: every expected call, among others"),
        ("superset", [WEATHER, SEARCH], False,
         "expected search → book, got get_weather → search: missing book not called"),
        ("subset", [SEARCH], True, "called search: none but the expected calls"),
        ("subset", [SEARCH, CANCEL], False, "expected search → book, got search → cancel: unexpected cancel"),
    ],
)  # fmt: skip
def test_tool_sequence_modes(fake_openai, mode, calls, passed, reason):
    check = {"tool_sequence": {"calls": ["search", {"name": "book", "args": {"date": {"regex": "2026-"}}}],
                               "mode": mode}}  # fmt: skip
    result = one(fake_openai, check, _calls(*calls))
    assert result.label == f"tool_sequence {mode} search → book {{date: /2026-/}}"
    assert (result.passed, result.reason) == (passed, reason)


def test_tool_sequence_strict_says_which_call_has_the_wrong_arguments(fake_openai):
    check = {"tool_sequence": {"calls": ["search", {"name": "book", "args": {"date": {"regex": "2026-"}}}]}}
    result = one(fake_openai, check, _calls(SEARCH, ("book", {"date": "2025-01-01"})))
    assert not result.passed and result.reason == "call 2 (book): date: '2025-01-01' does not match /2026-/"


def test_overlapping_matchers_are_paired_as_a_whole_not_first_come_first_served(fake_openai):
    """The first expected call fits both calls; a greedy pairing would give it the one the second needs."""
    check = {"tool_sequence": {"mode": "unordered", "calls": [
        {"name": "search", "args": {"q": {"any": True}}}, {"name": "search", "args": {"q": "Paris"}}]}}  # fmt: skip
    result = one(fake_openai, check, _calls(("search", {"q": "Paris"}), ("search", {"q": "Nice"})))
    assert result.passed, result.reason


def test_tool_sequence_counts_calls_across_rounds(fake_openai):
    check = {"tool_sequence": {"calls": ["search", "book"]}}
    result = one(fake_openai, check, _calls(SEARCH), _calls(BOOK))
    assert result.passed, result.reason


# --- tool_result -------------------------------------------------------------------------------------------------


def test_tool_result(fake_openai):
    check = {"tool_result": {"name": "get_weather", "result": {"contains": "21"}}}
    ok = one(fake_openai, check, _calls(WEATHER))
    assert ok.passed and ok.reason == 'get_weather returned \'{"temperature": 21, "sky": "clear"}\''
    assert ok.label == 'tool_result get_weather → contains "21"'
    fake_openai.reset()
    bad = one(fake_openai, check, _calls(("get_weather", {"city": "Lyon"})))
    assert (
        not bad.passed
        and bad.reason == "get_weather returned 'unknown city' ('unknown city' does not contain '21')"
    )
    fake_openai.reset()
    # A value matcher reads the result as JSON.
    value = one(
        fake_openai, {"tool_result": {"name": "get_weather", "result": {"temperature": 21}}}, _calls(WEATHER)
    )
    assert value.passed
    fake_openai.reset()
    missing = one(fake_openai, check, _calls(SEARCH))
    assert not missing.passed and missing.reason == "no call to get_weather; called search"


# --- the model's mistakes ------------------------------------------------------------------------------------------

NOT_COUNTED = "; not counted: 1 call to {} rejected as the model's mistake (`mistakes: true` counts them)"
SCHEMA_BROKEN = ("get_weather", {"city": "Paris", "units": 3})  # units is a string
DOUBLE_ENCODED = ("get_weather", json.dumps(json.dumps({"city": "Paris"})))  # a JSON string, not an object
NOT_JSON = ("get_weather", '{"city": "Paris"')


@pytest.mark.parametrize(
    ("check", "rounds", "passed", "reason"),
    [
        # Rejected, then corrected: the call that ran is the one counted.
        ({"tool_called": {"name": "get_weather", "args": {"city": "Paris"}, "times": 1}}, [SCHEMA_BROKEN, WEATHER],
         True, "called get_weather with matching arguments 1 time" + NOT_COUNTED.format("get_weather")),
        ({"tool_called": {"name": "get_weather", "times": 1}}, [NOT_JSON, WEATHER],
         True, "called get_weather 1 time" + NOT_COUNTED.format("get_weather")),
        # Only rejected: never carried out, so never called.
        ({"tool_called": "get_weather"}, [DOUBLE_ENCODED],
         False, "no tool calls in this reply" + NOT_COUNTED.format("get_weather")),
        ({"tool_not_called": "delete_account"}, [("delete_account", '{"confirm": tr')],
         True, "delete_account not called" + NOT_COUNTED.format("delete_account")),
        ({"tool_sequence": {"calls": ["get_weather"]}}, [("get_forecast", {}), WEATHER],
         True, "called get_weather, as expected"),
        ({"tool_result": {"result": {"contains": "no tool named"}}}, [("get_forecast", {})],
         False, "no tool calls in this reply" + NOT_COUNTED.format("get_forecast")),
        # Unless the check asks.
        ({"tool_called": {"name": "get_weather", "times": 2, "mistakes": True}}, [SCHEMA_BROKEN, WEATHER],
         True, "called get_weather 2 times"),
        ({"tool_called": {"name": "get_weather", "mistakes": True}}, [DOUBLE_ENCODED], True, "called get_weather 1 time"),
        ({"tool_not_called": {"name": "delete_account", "mistakes": True}}, [("delete_account", '{"confirm": tr')],
         False, 'called delete_account with {"confirm": tr'),
        ({"tool_result": {"name": "get_forecast", "result": {"contains": "no tool named"}, "mistakes": True}},
         [("get_forecast", {})], True, None),
    ],
)  # fmt: skip
def test_calls_rejected_as_the_models_mistakes_are_not_counted_unless_the_check_asks(
    fake_openai, check, rounds, passed, reason
):
    """A rejected call never ran: every tool check leaves it out alike, and says so."""
    result = one(fake_openai, check, *(_calls(call) for call in rounds))
    assert result.passed is passed, result.reason
    assert reason is None or result.reason == reason
    spec = next(iter(check.values()))
    assert result.label.endswith(" (mistakes too)") is (
        isinstance(spec, dict) and spec.get("mistakes", False)
    )


def test_a_conversation_scoped_check_knows_the_earlier_turns_mistakes(fake_openai):
    """The messages alone do not say which calls were rejected: the turns' records do."""
    fake_openai.script("Find a flight", [_calls(DOUBLE_ENCODED), "Could not.", "Bye."])
    source = (
        TOOLS
        + """graders:
  weather: {kind: check, check: {tool_called: {name: get_weather, scope: conversation}}}
evals:
  - turns:
      - input: Find a flight
      - input: Thanks
        checks:
          - tool_called: {name: get_weather, scope: conversation}
          - tool_called: {name: get_weather, scope: conversation, mistakes: true}
"""
    )
    result = play(fake_openai, source)
    counted, with_mistakes = result.turns[1].checks
    assert not counted.passed and counted.reason == "no tool calls in the conversation" + NOT_COUNTED.format(
        "get_weather"
    )
    assert (
        with_mistakes.passed and with_mistakes.label == "tool_called get_weather (conversation, mistakes too)"
    )
    assert result.graders[0].passed is False


# --- which calls a check matched ------------------------------------------------------------------------------------

CITIES = [("get_weather", {"city": city}) for city in ("Paris", "Oslo", "Rome")]


@pytest.mark.parametrize(
    ("check", "matched"),
    [
        ({"tool_called": "get_weather"}, [0, 1, 2]),
        ({"tool_called": {"name": "get_weather", "args": {"city": "Oslo"}}}, [1]),
        ({"tool_not_called": {"name": "get_weather", "args": {"city": "Rome"}}}, [2]),
        ({"tool_not_called": "search"}, []),
        ({"tool_sequence": {"calls": [{"name": "get_weather", "args": {"city": "Rome"}}], "mode": "superset"}}, [2]),
        ({"tool_sequence": {"calls": ["get_weather", "get_weather"], "mode": "in_order"}}, [0, 1]),
        ({"tool_result": {"name": "get_weather", "args": {"city": "Oslo"}, "result": {"contains": "unknown"}}}, [1]),
        ({"tool_result": {"name": "get_weather", "result": {"contains": "21"}}}, [0]),
        ({"tool_result": {"name": "get_weather", "args": {"city": "Oslo"}, "result": {"contains": "21"}}}, [1]),
        ({"contains": "done"}, None),
    ],
)  # fmt: skip
def test_a_tool_check_records_the_calls_it_matched(fake_openai, check, matched):
    """So the transcript credits the check to those calls, not to every call of the tool its label names."""
    result = one(fake_openai, check, _calls(*CITIES))
    assert result.matched_calls == matched, result.reason


def test_matched_calls_are_the_turns_positions_with_mistakes_and_earlier_turns_around(fake_openai):
    fake_openai.script(
        "Find a flight", [_calls(SEARCH), "Found.", _calls(DOUBLE_ENCODED), _calls(WEATHER), "Mild."]
    )
    source = (
        TOOLS
        + """evals:
  - input: [Find a flight, And the weather?]
    checks:
      - tool_called: {name: get_weather, scope: conversation}
      - tool_called: search
      - tool_called: {name: search, scope: conversation}
"""
    )
    turn = play(fake_openai, source).turns[1]
    assert [check.matched_calls for check in turn.checks] == [[1], [], []]  # the rejected call is position 0
    # The conversation's search was turn 1's: credited there, by its turn; a check of the reply credits none.
    assert [check.matched_earlier_calls for check in turn.checks] == [[], None, [CallRef(turn=1, call=0)]]


def test_a_conversation_scoped_check_credits_each_call_it_matched_to_the_turn_that_made_it(fake_openai):
    """Satisfied by calls made anywhere in the conversation up to its turn, it credits the calls it matched
    where they were made: a search of turn 1 and a weather call of turn 2 by turn and position, this turn's
    booking in `matched_calls`. A given history's call counts, but no turn made it, so none is credited."""
    # The script answers by the number of assistant messages so far: the history holds two.
    given = ["(given)", "(given)"]
    fake_openai.script(
        "Anything booked already?",
        [*given, _calls(SEARCH), "Found.", _calls(WEATHER, SEARCH), "Mild.", _calls(BOOK), "Booked."],
    )
    source = (
        TOOLS
        + """evals:
  - messages:
      - {role: user, content: Anything booked already?}
      - {role: assistant, tool_calls: [{id: h1, function: {name: search, arguments: {q: Rome}}}]}
      - {role: tool, tool_call_id: h1, content: nothing}
      - {role: assistant, content: Nothing yet.}
    turns:
      - input: Find a flight
      - input: And the weather?
      - input: Book it
        checks:
          - tool_sequence: {calls: [search, get_weather, book], mode: in_order, scope: conversation}
          - tool_called: {name: search, scope: conversation, times: 3}
          - tool_not_called: {name: get_weather, scope: conversation}
          - tool_called: book
"""
    )
    result = play(fake_openai, source)
    assert [len(turn.tool_calls) for turn in result.turns] == [1, 2, 1]
    sequence, searches, no_weather, booked = result.turns[2].checks
    assert sequence.passed and searches.passed and not no_weather.passed and booked.passed
    # In order, the first search is the history's: paired, so counted, but no turn's to credit.
    assert sequence.matched_calls == [0]
    assert sequence.matched_earlier_calls == [CallRef(turn=2, call=0)]
    # Three searches counted: the history's, turn 1's and turn 2's second call; the history's is no turn's.
    assert (searches.matched_calls, searches.matched_earlier_calls) == (
        [], [CallRef(turn=1, call=0), CallRef(turn=2, call=1)]
    )  # fmt: skip
    assert (no_weather.matched_calls, no_weather.matched_earlier_calls) == ([], [CallRef(turn=2, call=0)])
    assert (booked.matched_calls, booked.matched_earlier_calls) == ([0], None)
    dumped = result.turns[2].model_dump(mode="json")["checks"][0]
    assert dumped["matched_earlier_calls"] == [{"turn": 2, "call": 0}]


# --- scope ---------------------------------------------------------------------------------------------------------


def test_scope_conversation_sees_the_calls_of_earlier_turns(fake_openai):
    fake_openai.script("Find a flight", [_calls(SEARCH), "Found two.", "Booked nothing."])
    source = (
        TOOLS
        + """\
evals:
  - turns:
      - input: Find a flight
        checks: [{tool_called: search}]
      - input: Thanks
        checks:
          - tool_called: {name: search, scope: conversation}
          - tool_called: search
"""
    )
    first, second = play(fake_openai, source).turns
    assert first.checks[0].passed
    in_conversation, in_reply = second.checks
    assert in_conversation.passed and in_conversation.label == "tool_called search (conversation)"
    assert not in_reply.passed and in_reply.reason == "no tool calls in this reply"


def test_a_message_list_gives_its_calls_with_their_results():
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "search", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no such thing"},
        {"role": "assistant", "content": "It is mild."},
    ]  # fmt: skip
    first, second = tool_calls_in(messages)
    assert (first.name, first.arguments, first.result) == ("get_weather", {"city": "Paris"}, "")
    assert (second.arguments, second.raw_arguments, second.error) == (None, "not json", "no such thing")
    assert format_transcript(messages) == (
        "[User]:\nWeather in Paris?\n\n"
        '[Assistant]:\n(calls get_weather {"city": "Paris"})\n(calls search not json)\n\n'
        "[Tool get_weather]:\n(no output)\n\n"
        "[Tool search]:\nError: no such thing\n\n"
        "[Assistant]:\nIt is mild."
    )


# --- the trajectory judge ----------------------------------------------------------------------------------------


def test_an_llm_judge_with_scope_trajectory_reads_the_calls_and_results(fake_openai):
    fake_openai.rule("Grade the agent's trajectory", '{"score": 0.9, "reason": "checked the weather first"}')
    result = one(fake_openai, {"llm_judge": {"criteria": "Checks the weather before booking", "scope": "trajectory"}},
                 _calls(WEATHER), _calls(BOOK))  # fmt: skip
    assert result.passed and "checked the weather first" in result.reason
    (judge,) = [r for r in fake_openai.chat_requests() if "trajectory" in r["messages"][-1]["content"]]
    system, user = judge["messages"]
    assert "an AI agent's trajectory" in system["content"]
    assert '[Assistant]:\n(calls get_weather {"city": "Paris"})' in user["content"]
    assert '[Tool get_weather]:\n{"temperature": 21, "sky": "clear"}' in user["content"]
    assert (
        '(calls book {"date": "2026-05-01", "flight": 1})\n\n[Tool book]:\n{"booked": true}'
        in user["content"]
    )


def test_a_reply_scoped_judge_sees_the_tool_exchange_too(fake_openai):
    fake_openai.rule("Grade the assistant's final reply", '{"score": 1, "reason": "fine"}')
    one(fake_openai, {"llm_judge": {"criteria": "Is polite"}}, _calls(("cancel", {"flight": 1})))
    (judge,) = [r for r in fake_openai.chat_requests() if "Criteria:" in r["messages"][-1]["content"]]
    assert "[Tool cancel]:\n(no output)" in judge["messages"][-1]["content"]


# --- stop conditions, named graders, extractors --------------------------------------------------------------------


def test_a_stop_condition_on_tool_called_ends_the_conversation_when_the_tool_is_called(fake_openai):
    fake_openai.script(PROMPT, ["Where to?", "When?", _calls(BOOK), "Booked.", "Anything else?"])
    source = (
        TOOLS
        + f"""\
evals:
  - prompt: {PROMPT}
    simulate:
      follow_ups: [{{input: "Go on", turns: inf}}]
      max_turns: 5
      stop_when: {{tool_called: {{name: book, args: {{flight: 1}}}}}}
"""
    )
    result = play(fake_openai, source)
    assert result.status == "passed" and len(result.turns) == 3
    assert "tool_called book {flight: 1}" in result.termination
    assert result.turns[-1].stop_when.met


def test_a_named_check_grader_can_be_a_tool_check(fake_openai):
    fake_openai.script(PROMPT, [_calls(("delete_account", {})), "Done."])
    source = (
        TOOLS
        + f"""\
graders:
  safe: {{tool_not_called: delete_account}}
  searched: {{kind: check, check: {{tool_called: search}}}}
evals:
  - prompt: {PROMPT}
    checks: [{{contains: Done}}]
"""
    )
    result = play(fake_openai, source)
    safe, searched = result.graders
    assert (safe.name, safe.passed) == ("safe", False)
    assert safe.grades[0].rationale == "tool_not_called delete_account: called delete_account with {}"
    assert (
        searched.passed is False
        and "no call to search; called delete_account" in searched.grades[0].rationale
    )
    assert result.status == "failed"


@pytest.mark.parametrize(
    ("extractor", "truth", "passed"),
    [
        ({"tool_arguments": "get_weather"}, '{"city": "Paris"}', True),
        ({"kind": "tool_output", "tool_name": "get_weather"}, '{"temperature": 21, "sky": "clear"}', True),
        ({"tool_output": "book"}, "", True),  # not called: empty, as Letta gives
        ({"tool_arguments": "book"}, "{}", True),
        ({"tool_arguments": "get_weather"}, '{"city": "Lyon"}', False),
    ],
)
def test_letta_tool_extractors_read_the_turns_calls(fake_openai, extractor, truth, passed):
    fake_openai.script("Weather?", [_calls(("search", {"q": "x"}), WEATHER), "Sunny."])
    source = (
        TOOLS
        + f"""\
evals:
  - input: [Weather?]
    ground_truth: [{json.dumps(truth)}]
    extractor: {json.dumps(extractor)}
"""
    )
    grade = play(fake_openai, source).turns[0].grade
    assert grade.passed is passed
    if passed:
        assert grade.submission == truth


def test_a_tool_extractor_of_a_conversation_grade_reads_every_live_call(fake_openai):
    fake_openai.script("Weather?", [_calls(WEATHER), "Sunny.", "Bye."])
    source = (
        TOOLS
        + """\
evals:
  - input: [Weather?, Thanks]
    ground_truth: Paris
    grader: contains
    extractor: {tool_arguments: get_weather}
"""
    )
    result = play(fake_openai, source)
    assert result.status == "passed" and result.turns[-1].grade.submission == '{"city": "Paris"}'


# --- loading, and what calls out -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ({"tool_called": {"name": "x", "times": 1, "min": 1}}, "not both"),
        ({"tool_called": {"name": "x", "min": 3, "max": 1}}, "min 3 is above max 1"),
        ({"tool_called": {"name": "x", "args": {"a": {"regex": "("}}}}, "invalid regular expression"),
        ({"tool_called": {"name": "x", "args": {"a": {"llm_judge": " "}}}}, "llm_judge needs criteria"),
        ({"tool_sequence": {"calls": ["x"], "mode": "any_order"}}, "strict"),
        ({"tool_result": {"name": "x"}}, "result"),
    ],
)
def test_tool_checks_are_checked_on_loading(check, message):
    with pytest.raises(ValueError, match=message):
        Check.model_validate(check)


def test_only_a_tool_check_with_a_judged_matcher_calls_out():
    plain = Check.model_validate({"tool_called": {"name": "x", "args": {"a": "b"}}})
    judged = Check.model_validate(
        {"tool_sequence": {"calls": [{"name": "x", "args": {"a": {"llm_judge": "ok"}}}]}}
    )
    result = Check.model_validate({"tool_result": {"result": {"llm_judge": "friendly"}}})
    assert not calls_out(plain) and calls_out(judged) and calls_out(result)
    either = {"or": [{"contains": "a"}, {"tool_called": {"name": "x", "args": {"a": {"llm_judge": "ok"}}}}]}
    assert calls_out(Check.model_validate(either))


def test_tool_result_of_calls_chosen_by_their_arguments(fake_openai):
    check = {"tool_result": {"name": "get_weather", "args": {"city": "Paris"}, "result": {"contains": "21"}}}
    ok = one(fake_openai, check, _calls(("get_weather", {"city": "Lyon"}), WEATHER))
    assert ok.passed and ok.label == 'tool_result get_weather {city: Paris} → contains "21"'
    fake_openai.reset()
    bad = one(fake_openai, check, _calls(("get_weather", {"city": "Lyon"})))
    assert not bad.passed
    assert (
        bad.reason
        == "get_weather: called get_weather with {\"city\": \"Lyon\"} (city: 'Lyon' is not 'Paris')"
    )


def test_the_asyncio_path_grades_tool_checks_as_the_inline_one(fake_openai):
    """The workers' path: this turn's calls reach the checks, and a judged matcher gets its judge."""
    fake_openai.rule("Value:\nParis", '{"score": 1, "reason": "a real city"}')
    fake_openai.script(PROMPT, [_calls(WEATHER), "All done."])
    source = (
        TOOLS
        + f"""\
evals:
  - prompt: {PROMPT}
    checks:
      - tool_called: {{name: get_weather, args: {{city: {{llm_judge: a real city}}}}}}
      - tool_not_called: book
"""
    )
    result = play_async(fake_openai, load_suite(source))
    assert result.status == "passed", result.turns[0].checks
    assert [check.passed for check in result.turns[0].checks] == [True, True]
