"""In a real browser: a transcript with tool calls. Each call is folded under the model's reply; unfolded, its
arguments and result show pretty-printed, and the tool check that looked at it is a link to that check. A
hostile tool result stays text, and the calls fit a phone's width. Screenshots in test-artifacts/."""

from __future__ import annotations

import pytest
from django.urls import reverse

from engine.results import CheckResult, ToolCall, ToolRound, TurnRecord
from runs.models import Conversation, Status
from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.e2e.test_browser_a11y import PHONE, STICKING_OUT
from tests.factories import store_turns
from tests.web.test_pages_tools import HOSTILE, tool_run  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser]


def with_a_tool_check(run, index: int = 99, city: str = "Paris") -> int:
    """A conversation of `run` whose turn called two tools in two rounds, one of them checked by a tool check;
    its index."""
    conversation = Conversation.objects.create(
        run=run, index=index, eval_id="checked", prompt="Weather?", status=Status.PASSED, passed_on_turn=1
    )
    weather = ToolCall(id="call_1", name="get_weather", arguments={"city": city, "units": "metric"},
                       raw_arguments=f'{{"city": "{city}", "units": "metric"}}', result='{"temperature": 21, "sky": "clear"}',
                       source="returns", latency_ms=12)  # fmt: skip
    lookup = ToolCall(id="call_2", name="lookup", arguments={"q": "Paris"}, raw_arguments='{"q": "Paris"}',
                      result=HOSTILE, source="returns", latency_ms=3)  # fmt: skip
    wrong = ToolCall(id="call_3", name="delete_account", arguments={}, raw_arguments="{}", mistake=True,
                     error="unknown tool `delete_account`", result="Error: unknown tool `delete_account`")  # fmt: skip
    checks = [
        CheckResult(type="tool_called", label="tool_called get_weather", passed=True, reason="called once")
    ]
    record = TurnRecord(
        turn=1, prompt="Weather in Paris, and is it safe?", response="It is 21 °C and clear.", checks=checks,
        passed=True, tool_rounds=[ToolRound(text="Let me look.", calls=[weather, lookup], latency_ms=40),
                                  ToolRound(calls=[wrong], latency_ms=20)],
    )  # fmt: skip
    store_turns(conversation, [record])
    return conversation.index


def test_a_transcripts_tool_calls_unfold_and_link_their_check(page, watch, user, tool_run):  # noqa: F811
    from playwright.sync_api import expect

    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    index = with_a_tool_check(tool_run)
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:conversation", args=[tool_run.pk, index]))
    calls = page.locator(".tool-call")
    expect(calls).to_have_count(3)
    expect(page.locator(".tool-calls-head")).to_have_text("3 tool calls in 2 rounds")
    first = calls.first
    expect(first.locator("summary")).to_contain_text("get_weather")
    expect(first.locator(".tool-json").first).to_be_hidden()  # folded
    screenshot(page, "browser-tools-folded.png")
    first.locator("summary").click()
    expect(first.locator(".tool-json").first).to_be_visible()
    expect(first.locator(".tool-json").first).to_have_text('{\n  "city": "Paris",\n  "units": "metric"\n}')
    expect(first.locator(".tool-json").nth(1)).to_contain_text('"temperature": 21')
    calls.nth(1).locator("summary").click()
    expect(calls.nth(1).locator(".tool-json").nth(1)).to_have_text(HOSTILE)  # text, never markup
    expect(calls.nth(2).locator(".badge-tool-mistake")).to_have_text("model's mistake")
    screenshot(page, "browser-tools-unfolded.png")
    first.get_by_role("link", name="PASS tool_called get_weather").click()
    expect(page).to_have_url(f"{page.url.split('#')[0]}#turn-1-check-1")
    expect(page.locator("#turn-1-check-1")).to_contain_text("tool_called get_weather")
    page.set_viewport_size(PHONE)
    page.goto(reverse("runs:conversation", args=[tool_run.pk, index]))
    for call in calls.all():
        call.locator("summary").click()
    wide = page.evaluate(STICKING_OUT, PHONE["width"])
    screenshot(page, "browser-tools-phone.png")
    assert not wide, f"wider than a phone: {wide}"
    assert not dialogs  # the hostile result ran no script
    watch.check()
