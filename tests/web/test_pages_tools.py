"""Tool calls on the pages and in the exports: the transcript folds each call under the model's reply (name,
arguments and result pretty-printed, latency, whose fault an error was, the tool check that looked at it),
compare says how two runs' calls differ, the run page filters by "called X", and the results.json, CSV and
JUnit exports carry the calls. Runs are played on the fake endpoint through the worker's own store path."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from engine.results import CheckResult, ToolCall, ToolRound, TurnRecord
from runs.models import Conversation, Status
from runs.services import create_run, create_share_link
from runs.worker import writes
from suites import services as suite_services
from tests.factories import body, play, store_turns
from tests.fakeopenai import Reply
from tests.web.test_pages_runs import make_run

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"
SUITE = f"""\
name: agent
model: fake/agent
tools:
  - name: get_weather
    description: Current weather for a city
    parameters: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    returns: {{temperature: 21, sky: clear}}
  - name: lookup
    description: Look a thing up
    parameters: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
    returns: "{HOSTILE}"
  - name: bookings
    description: The booking service
    error: booking service is down
evals:
  - id: weather
    prompt: Weather in Paris?
    checks: [{{contains: "21"}}]
  - id: hostile
    prompt: Look up Lyon please
    checks: [{{contains: Lyon}}]
  - id: mistake
    prompt: Delete my account
    checks: [{{contains: Sorry}}]
  - id: outage
    prompt: Book a table
    checks: [{{contains: down}}]
  - id: chat
    prompt: Hello there
    checks: [{{contains: hello}}]
"""


def script_agent(fake, weather_city: str = "Paris", weather_tool: str = "get_weather") -> None:
    """The model under test: the weather question calls `weather_tool`, the others as each eval needs."""
    city = {"city": weather_city} if weather_tool == "get_weather" else {"q": weather_city}
    fake.script(
        "Weather in Paris?", [Reply(tool_calls=[{"name": weather_tool, "arguments": city}]), "It is 21."]
    )
    fake.script(
        "Look up Lyon please", [Reply(tool_calls=[{"name": "lookup", "arguments": {"q": "Lyon"}}]), "Lyon."]
    )
    fake.script(
        "Delete my account", [Reply(tool_calls=[{"name": "delete_account", "arguments": {}}]), "Sorry."]
    )
    fake.script("Book a table", [Reply(tool_calls=[{"name": "bookings", "arguments": {}}]), "It is down."])
    fake.script("Hello there", ["hello to you"])  # fmt: skip


@pytest.fixture
def tool_run(user, fake_endpoint, fake_openai):
    script_agent(fake_openai)
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    return play(create_run(version=version, user=user))


def text(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode())))


def page_of(client, run, index: int):
    return client.get(reverse("runs:conversation", args=[run.pk, index]))


# --- the transcript -----------------------------------------------------------------------------------------


def test_the_transcript_folds_each_call_under_the_reply_with_its_arguments_result_and_latency(
    logged_in, tool_run
):
    assert tool_run.status == Status.PASSED, list(tool_run.conversations.values_list("verdict", flat=True))
    page = page_of(logged_in, tool_run, 0)
    content = page.content.decode()
    calls = content[content.index('class="tool-calls"') : content.index('class="bubble bubble-assistant"')]
    assert "<details>" in calls and "<summary>" in calls  # folded, before the reply's bubble
    shown = html.unescape(calls)
    assert '<code class="tool-name">get_weather</code>' in shown
    assert '{\n  "city": "Paris"\n}' in shown  # the arguments, pretty-printed
    assert '"temperature": 21,\n  "sky": "clear"' in shown  # the result, pretty-printed as it parses
    assert re.search(r'class="tool-latency"[^>]*>\d+ ms<', shown)
    assert "result from returns" in text(page)


def test_an_error_says_whether_it_was_the_models_mistake_or_the_tools(logged_in, tool_run):
    mistake = text(page_of(logged_in, tool_run, 2))
    assert "delete_account" in mistake and "model's mistake" in mistake and "tool error" not in mistake
    outage = text(page_of(logged_in, tool_run, 3))
    assert "bookings" in outage and "tool error" in outage and "model's mistake" not in outage
    assert "booking service is down" in outage


def test_a_tool_round_cut_off_ends_the_conversation_its_calls_shown_not_carried_out(
    logged_in, user, fake_endpoint, fake_openai
):
    """The worker plays it as the CLI does: not the model's mistake, not a FAIL, but a reply that did not
    finish (incomplete_reply), its cut call recorded on the round."""
    cut = Reply(tool_calls=[{"name": "get_weather", "arguments": '{"city": "Pa'}], finish_reason="length")
    fake_openai.script("Weather in Paris?", [cut, "It is 21."])
    source = SUITE.replace("name: agent", "name: agent-cut").split("  - id: hostile")[0]
    run = play(
        create_run(version=suite_services.create_suite(owner=user, source=source).latest_version, user=user)
    )
    conversation = run.conversations.get()
    why = "reply cut off at the token limit (finish_reason: length); its tool calls were not carried out"
    assert (conversation.status, conversation.error) == (
        Status.ERROR,
        f"{why}; not graded (incomplete_reply: error)",
    )
    shown = text(page_of(logged_in, run, 0))
    assert f"Not finished: {why}" in shown and "Not carried out: the round did not finish." in shown
    assert "model's mistake" not in shown and '{"city": "Pa' in shown


def test_a_hostile_tool_result_is_escaped(logged_in, tool_run):
    content = page_of(logged_in, tool_run, 1).content.decode()
    assert HOSTILE not in content
    assert html.escape(HOSTILE, quote=False) in content or "&lt;script&gt;alert(1)&lt;/script&gt;" in content


def test_the_conversation_as_text_carries_the_calls_and_results_as_judges_read_them(logged_in, tool_run):
    shown = text(page_of(logged_in, tool_run, 0))
    assert '(calls get_weather {"city": "Paris"})' in shown
    assert '[Tool get_weather]: {"temperature": 21, "sky": "clear"}' in shown


def test_the_shared_transcript_shows_the_calls_too(client, user, tool_run):
    link = create_share_link(tool_run, user)
    shared = client.get(reverse("share:conversation", args=[link.token, 0]))
    assert shared.status_code == 200
    assert '<code class="tool-name">get_weather</code>' in shared.content.decode()


def test_the_tool_check_that_looked_at_a_call_is_linked_from_it(logged_in, user):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = make_run(version, user, conversations=1)
    conversation = Conversation.objects.get(run=run, index=0)
    conversation.turns.all().delete()
    Conversation.objects.filter(pk=conversation.pk).update(turn_count=0)
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}, raw_arguments='{"city": "Paris"}',
                    result='{"temperature": 21}', source="returns", latency_ms=7)  # fmt: skip
    checks = [
        CheckResult(type="contains", label='contains "get_weather"', passed=True, reason="found"),
        CheckResult(type="tool_not_called", label="tool_not_called delete_account", passed=True, reason="ok"),
        CheckResult(type="tool_called", label="tool_called get_weather", passed=True, reason="called once"),
    ]
    record = TurnRecord(turn=1, prompt="Weather in Paris?", response="21", checks=checks, passed=True,
                        tool_rounds=[ToolRound(calls=[call], latency_ms=30)])  # fmt: skip
    store_turns(conversation, [record])
    content = page_of(logged_in, run, 0).content.decode()
    assert 'id="turn-1-check-3"' in content  # the tool check's anchor
    body_ = content[content.index('id="turn-1-call-1"') :]
    linked = re.findall(r'href="#(turn-1-check-\d+)"', body_[: body_.index("</li>")])
    assert linked == ["turn-1-check-3"]  # not the contains check, nor the check on another tool


def test_a_tool_check_is_credited_to_the_calls_it_graded_not_every_call_of_that_tool(
    logged_in, user, fake_endpoint, fake_openai
):
    """`tool_result get_weather {city: Oslo}` read Oslo's result: the Paris and Rome calls were not checked."""
    cities = [{"name": "get_weather", "arguments": {"city": city}} for city in ("Paris", "Oslo", "Rome")]
    fake_openai.script("Weather in Paris?", [Reply(tool_calls=cities), "It is 21."])
    source = (
        SUITE.replace("name: agent", "name: agent-credits")
        .split("  - id: hostile")[0]
        .replace(
            '    checks: [{contains: "21"}]',
            "    checks:\n      - contains: '21'\n"
            "      - tool_result: {name: get_weather, args: {city: Oslo}, result: {contains: '21'}}\n"
            "      - tool_not_called: {name: get_weather, args: {city: Rome}}",
        )
    )
    version = suite_services.create_suite(owner=user, source=source).latest_version
    run = play(create_run(version=version, user=user))
    content = page_of(logged_in, run, 0).content.decode()

    def linked(call: int) -> list[str]:
        item = content[content.index(f'id="turn-1-call-{call}"') :]
        return re.findall(r'href="#(turn-1-check-\d+)"', item[: item.index("</li>")])

    assert [linked(call) for call in (1, 2, 3)] == [[], ["turn-1-check-2"], ["turn-1-check-3"]]
    rome = content[content.index('id="turn-1-call-3"') :]
    assert "✗ checked" in rome[: rome.index("</li>")]  # the call that broke tool_not_called


def test_a_conversation_scoped_check_is_credited_to_an_earlier_turns_call_each_naming_the_others_turn(
    logged_in, user, fake_endpoint, fake_openai
):
    """Turn 2's `tool_called search (conversation)` passed on turn 1's search: that call says it was checked by
    turn 2's check, and the check names the call and the turn that made it, each linking to the other."""
    search = Reply(tool_calls=[{"name": "lookup", "arguments": {"q": "flights to Paris"}}])
    fake_openai.script("Find a flight", [search, "Found two.", "You are welcome."])
    tools = SUITE.replace("name: agent", "name: agent-conversation").split("evals:")[0]
    source = (
        tools
        + """evals:
  - id: trip
    turns:
      - input: Find a flight
      - input: Thanks
        checks:
          - contains: welcome
          - tool_called: {name: lookup, scope: conversation}
"""
    )
    version = suite_services.create_suite(owner=user, source=source).latest_version
    run = play(create_run(version=version, user=user))
    assert run.status == Status.PASSED, list(run.conversations.values_list("verdict", flat=True))
    content = page_of(logged_in, run, 0).content.decode()
    call = content[content.index('id="turn-1-call-1"') :]
    call = call[: call.index("</li>")]
    assert re.findall(r'href="#(turn-\d+-check-\d+)"', call) == ["turn-2-check-2"]
    assert "✓ checked" in call
    assert "tool_called lookup (conversation)</code> in turn 2</a>" in call
    check = content[content.index('id="turn-2-check-2"') :]
    check = check[: check.index("</li>")]
    assert re.findall(r'href="#(turn-\d+-call-\d+)"', check) == ["turn-1-call-1"]
    assert " ".join(html.unescape(re.sub(r"<[^>]+>", " ", check)).split()).endswith(
        "Calls it matched: lookup in turn 1"
    )


def test_a_call_without_a_function_name_is_named_so(logged_in, user):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = make_run(version, user, conversations=1)
    conversation = Conversation.objects.get(run=run, index=0)
    conversation.turns.all().delete()
    Conversation.objects.filter(pk=conversation.pk).update(turn_count=0)
    error = "the call names no function (offered: get_weather)"
    call = ToolCall(id="c1", name="", raw_arguments='{"city": "Nice"}', arguments={"city": "Nice"}, error=error,
                    mistake=True, result=f"Error: {error}", source="none")  # fmt: skip
    record = TurnRecord(
        turn=1, prompt="Weather in Nice?", response="Sunny.", tool_rounds=[ToolRound(calls=[call])]
    )
    store_turns(conversation, [record])
    shown = text(page_of(logged_in, run, 0))
    assert "(no function name)" in shown and f"Model's mistake: {error}" in shown


def test_a_transcript_with_tool_calls_costs_no_more_queries(logged_in, tool_run):
    def count(index: int) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert page_of(logged_in, tool_run, index).status_code == 200
        return len(queries)

    page_of(logged_in, tool_run, 4)  # warm the caches both pages share
    assert count(0) == count(4)  # the weather conversation called a tool, the chat none


# --- triage: "called X" --------------------------------------------------------------------------------------


def test_the_conversation_ends_with_the_tools_it_called_stored(tool_run):
    stored = dict(tool_run.conversations.values_list("eval_id", "tools_called"))
    assert stored["weather"] == "\nget_weather\n" and stored["chat"] == ""
    assert stored["mistake"] == "\ndelete_account\n"


def test_tools_called_keeps_the_order_and_one_name_per_line():
    calls = [ToolCall(id=str(i), name=name) for i, name in enumerate(["search", "book\nnow", "search"])]
    turn = TurnRecord(turn=1, prompt="p", response="r", tool_rounds=[ToolRound(calls=calls)])
    assert writes.tools_called([turn]) == "\nsearch\nbook now\nsearch\n"
    assert writes.tools_called([TurnRecord(turn=1, prompt="p", response="r")]) == ""


def test_the_run_page_filters_conversations_by_the_tool_called(logged_in, tool_run):
    url = reverse("runs:detail", args=[tool_run.pk])
    page = logged_in.get(url).content.decode()
    options = re.findall(r'<option value="([^"]*)"[^>]*>called ', page)
    assert options == ["bookings", "delete_account", "get_weather", "lookup"]
    filtered = logged_in.get(url, {"tool": "get_weather"}).content.decode()
    shown = re.findall(r'class="row-link mono" href="[^"]*/c/(\d+)/', filtered)
    assert set(shown) == {"0"}, shown
    assert (
        '<option value="get_weather"\n    selected' in filtered
        or 'value="get_weather" selected' in " ".join(filtered.split())
    )
    none = logged_in.get(url, {"tool": "get"}).content.decode()  # a name, not a part of one
    assert not re.findall(r'class="row-link mono" href="[^"]*/c/(\d+)/', none)


# --- compare ------------------------------------------------------------------------------------------------


@pytest.fixture
def second_run(user, tool_run, fake_openai):
    """The same suite again, but the weather question now calls `lookup` for Lyon."""
    fake_openai.reset()
    script_agent(fake_openai, weather_city="Lyon", weather_tool="lookup")
    return play(create_run(version=tool_run.suite_version, user=user))


def test_compare_says_which_tools_each_eval_called_differently(logged_in, tool_run, second_run):
    page = logged_in.get(reverse("runs:compare_with", args=[second_run.pk, tool_run.pk]))
    shown = text(page)
    assert "now calls lookup, no longer get_weather" in shown
    assert shown.count("🔧") == 1  # the evals that called the same tools say nothing


def test_compare_lines_up_one_evals_calls_side_by_side(logged_in, user, tool_run, second_run, fake_openai):
    page = logged_in.get(reverse("runs:compare_eval", args=[second_run.pk, tool_run.pk, "weather"]))
    shown = text(page)
    assert "Tool calls differ" in shown
    assert "get_weather" in shown and "lookup" in shown and "only before" in shown and "only after" in shown
    # The same tool with other arguments faces its counterpart.
    fake_openai.reset()
    script_agent(fake_openai, weather_city="Rome")
    third = play(create_run(version=tool_run.suite_version, user=user))
    shown = text(logged_in.get(reverse("runs:compare_eval", args=[third.pk, tool_run.pk, "weather"])))
    assert "arguments differ" in shown and '{"city": "Rome"}' in shown and '{"city": "Paris"}' in shown
    same = text(logged_in.get(reverse("runs:compare_eval", args=[third.pk, tool_run.pk, "chat"])))
    assert "Tool calls" not in same


# --- exports ------------------------------------------------------------------------------------------------


def test_results_json_records_the_calls(logged_in, tool_run):
    document = json.loads(body(logged_in.get(reverse("runs:json", args=[tool_run.pk]))))
    weather = next(item for item in document["evals"] if item["id"] == "weather")
    (round_,) = weather["turns"][0]["tool_rounds"]
    (call,) = round_["calls"]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Paris"}
    assert json.loads(call["result"]) == {"temperature": 21, "sky": "clear"} and call["source"] == "returns"


def test_the_turns_csv_has_a_row_per_call(logged_in, tool_run):
    rows = list(
        csv.DictReader(
            io.StringIO(body(logged_in.get(reverse("runs:export", args=[tool_run.pk, "turns.csv"]))).decode())
        )
    )
    weather = [row for row in rows if row["eval_id"] == "weather"]
    turn, call = weather
    assert turn["response"] == "It is 21." and turn["tool_name"] == ""
    assert call["turn"] == "1" and call["tool_round"] == "1" and call["tool_call"] == "1"
    assert call["tool_name"] == "get_weather" and json.loads(call["tool_arguments"]) == {"city": "Paris"}
    assert json.loads(call["tool_result"]) == {"temperature": 21, "sky": "clear"}
    assert call["tool_source"] == "returns" and call["prompt_tokens"] == "" and call["latency_ms"].isdigit()
    mistake = next(row for row in rows if row["tool_name"] == "delete_account")
    assert mistake["tool_mistake"] == "true" and mistake["tool_error"]
    assert [row["tool_name"] for row in rows if row["eval_id"] == "chat"] == [""]  # no call, no extra row


def test_junit_carries_the_calls_in_system_out(logged_in, tool_run):
    xml = body(logged_in.get(reverse("runs:export", args=[tool_run.pk, "junit"])))
    cases = {case.get("name"): case for case in ET.fromstring(xml).iter("testcase")}
    out = cases["weather"].find("system-out").text
    assert '[Assistant → tool call get_weather]:\n{"city": "Paris"}' in out
    assert re.search(r"\[Tool get_weather, \d+ ms\]:\n\{", out)
    assert out.index("[User]:") < out.index("tool call get_weather") < out.index("[Assistant]:\nIt is 21.")
    assert "the model's mistake" in cases["mistake"].find("system-out").text
    assert HOSTILE in cases["hostile"].find("system-out").text  # XML escapes it; the text is as sent


def test_the_tool_choices_are_read_once_for_a_settled_run(logged_in, tool_run):
    url = reverse("runs:detail", args=[tool_run.pk])

    def asked() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert logged_in.get(url).status_code == 200
        return sum("DISTINCT" in query["sql"] and "tools_called" in query["sql"] for query in queries)

    assert asked() == 1
    assert asked() == 0  # from the aggregates cache, as the run's other settled figures
