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
    expect(page).to_have_url(re.compile(r"/review/\?c=\d+&scale=-3..3$"))  # the queue keeps its scale
    watch.check()


def test_keys_label_on_the_scale_chosen_for_the_whole_queue(page, watch, user, played):  # noqa: F811 (fixture)
    from playwright.sync_api import expect

    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:review", args=[played.pk]))
    page.get_by_label("Queue scale").select_option("0-1")
    expect(page).to_have_url(re.compile(r"scale=0-1"))
    page.locator("[data-review]").focus()
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("2 of 3")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("3 of 3")
    stored = [
        (label.conversation.index, label.scale, label.score)
        for label in Label.objects.order_by("conversation__index")
    ]
    assert stored == [(0, "0-1", 0.0), (1, "0-1", 1.0)]
    watch.check()


def test_the_reason_box_keys_type_save_and_hand_back_to_the_queue(page, watch, user, played):  # noqa: F811
    from playwright.sync_api import expect

    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:review", args=[played.pk]))
    reason = page.locator("textarea[name=reason]")
    page.keyboard.press("7")
    page.keyboard.press("r")
    expect(reason).to_be_focused()
    page.keyboard.type("Kind.")
    page.keyboard.press("Shift+Enter")  # a new line, not a save
    page.keyboard.type("Scores 2 and 3")  # number keys type in the box and never label
    expect(reason).to_have_value("Kind.\nScores 2 and 3")
    expect(page.locator("input[name=score][value='3']")).to_be_checked()
    expect(page.locator("h1")).to_contain_text("1 of 3")
    page.keyboard.press("Escape")  # out of the box: the number keys label again
    expect(reason).not_to_be_focused()
    expect(page.locator("[data-review]")).to_be_focused()
    page.keyboard.press("1")
    expect(page.locator("input[name=score][value='-3']")).to_be_checked()
    expect(reason).to_have_value("Kind.\nScores 2 and 3")
    page.keyboard.press("r")
    page.keyboard.press("Enter")  # Enter in the box saves
    expect(page.locator("h1")).to_contain_text("2 of 3")
    first = Label.objects.get(conversation__index=0)
    assert (first.score, first.reason) == (-3.0, "Kind.\nScores 2 and 3")
    page.keyboard.press("5")
    page.keyboard.press("r")
    page.keyboard.type("Fine")
    page.keyboard.press("Control+Enter")  # Ctrl+Enter saves from the box
    expect(page.locator("h1")).to_contain_text("3 of 3")
    assert Label.objects.get(conversation__index=1).reason == "Fine"
    page.keyboard.press("4")
    page.keyboard.press("Control+Enter")  # and from outside it
    expect(page.locator(".label-actions")).to_contain_text("saved")
    assert Label.objects.get(conversation__index=2).score == 0.0
    screenshot(page, "browser-review-keys.png")
    watch.check()
