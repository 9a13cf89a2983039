"""In chromium: `n` on the run page goes to the next failed or errored conversation, past the page on screen
to the page that has it, and says so when there is none left."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.models import Conversation, Status
from suites import services as suite_services
from tests.e2e.conftest import PASSWORD, PageWatch, log_in, screenshot
from tests.factories import mock_run

pytestmark = [pytest.mark.browser]

SUITE = "name: many\nmodel: mock\nevals:\n  - id: one\n    prompt: Say hi\n    checks: [{contains: hi}]\n"
# Conversations 1-250: failures on the first page, none on the second, two on the third.
FAILING = {3, 250 - 40, 250 - 1}


def test_n_crosses_pages_to_the_next_failure_and_says_when_there_is_none(page, live_server, user):
    from playwright.sync_api import expect

    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status=Status.FAILED)
    now = timezone.now()
    Conversation.objects.bulk_create(
        Conversation(run=run, index=index, eval_id=f"e{index}", prompt="Say hi", kind="single-turn",
                     status=Status.FAILED if index in FAILING else Status.PASSED, finished_at=now)
        for index in range(250)
    )  # fmt: skip
    failing = {c.index: c.pk for c in run.conversations.filter(index__in=FAILING)}
    watch = PageWatch(page)
    log_in(page, user.username, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    page.keyboard.press("n")
    expect(page.locator("tr.is-selected")).to_have_attribute("id", f"conv-{failing[3]}")
    # None below on this page, none on page 2: `n` opens page 3 on its first failure.
    page.keyboard.press("n")
    page.wait_for_url(f"**/runs/{run.pk}/?page=3#conv-{failing[210]}")
    expect(page.locator("tr.is-selected")).to_have_attribute("id", f"conv-{failing[210]}")
    page.keyboard.press("n")
    expect(page.locator("tr.is-selected")).to_have_attribute("id", f"conv-{failing[249]}")
    page.keyboard.press("n")
    expect(page.locator("#keynav-note")).to_have_text("No more failures.")
    screenshot(page, "next-failure-none-left.png")
    # Filtered to passed conversations, there is none to go to, on any page.
    page.goto(f"/runs/{run.pk}/?status=passed")
    page.keyboard.press("n")
    expect(page.locator("#keynav-note")).to_have_text("No more failures.")
    watch.check()
