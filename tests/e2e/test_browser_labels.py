"""In a real browser: the review queue is driven by the keyboard (a number key scores, r opens the reason,
Enter saves and moves on, k goes back). Screenshot in test-artifacts/."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runs.models import Label
from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.web.test_labels import played  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser]


def test_the_review_queue_is_driven_by_the_keyboard(page, watch, user, played):  # noqa: F811 (fixture)
    from playwright.sync_api import expect

    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:detail", args=[played.pk]))
    page.get_by_role("link", name="Label").click()
    expect(page.locator("h1")).to_contain_text("1 of 3")
    page.keyboard.press("7")  # the seventh score on -3..3: 3
    expect(page.locator("input[name=score][value='3']")).to_be_checked()
    page.keyboard.press("r")
    expect(page.locator("textarea[name=reason]")).to_be_focused()
    page.keyboard.type("Right and kind")
    screenshot(page, "browser-review.png")
    page.locator("textarea[name=reason]").blur()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("2 of 3")
    label = Label.objects.get()
    assert (label.score, label.reason, label.conversation.index) == (3.0, "Right and kind", 0)
    page.keyboard.press("k")
    expect(page.locator("h1")).to_contain_text("1 of 3")
    expect(page.locator("input[name=score][value='3']")).to_be_checked()  # the saved label, shown again
    expect(page).to_have_url(re.compile(r"/review/\?c=\d+$"))
    watch.check()
