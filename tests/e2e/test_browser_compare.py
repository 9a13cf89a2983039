"""In a real browser: comparing two runs (the table, a change tab, one eval side by side) and making an API
token (shown once). Screenshots in test-artifacts/."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.web.test_pages_compare import pair  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser]


def test_compare_two_runs_and_open_one_eval_side_by_side(page, watch, user, pair):  # noqa: F811 (fixture)
    from playwright.sync_api import expect

    before, after = pair
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:detail", args=[before.pk]))
    page.get_by_role("button", name="Pin as baseline").click()
    page.goto(reverse("runs:detail", args=[after.pk]))
    page.get_by_role("link", name="Compare with baseline").click()
    expect(page.locator("h1")).to_have_text("Compare runs")
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("capital")
    expect(rows.first).to_contain_text("regressed")
    screenshot(page, "browser-compare.png")
    page.get_by_role("link", name=re.compile(r"^regressed")).click()
    expect(rows).to_have_count(1)
    expect(page).to_have_url(re.compile(r"change=regression"))
    page.goto(reverse("runs:compare_with", args=[after.pk, before.pk]))
    page.get_by_role("link", name="multiply").click()
    expect(page.locator(".compare-turn")).to_have_count(2)
    expect(page.locator(".flips").first).to_contain_text('contains "105"')
    expect(page.locator(".diff ins").first).to_be_visible()
    screenshot(page, "browser-compare-eval.png")
    watch.check()


def test_an_api_token_is_shown_once(page, watch, user):
    from playwright.sync_api import expect

    log_in(page, user.username, PASSWORD)
    page.get_by_role("link", name="API tokens").click()
    expect(page.locator(".empty")).to_contain_text("No tokens yet")
    page.fill("#token-name", "ci")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token-value").input_value()
    assert token.startswith("evs_")
    screenshot(page, "browser-tokens.png")
    page.goto(reverse("tokens"))
    expect(page.locator("body")).not_to_contain_text(token)
    expect(page.locator("table")).to_contain_text(token[:10])
    page.get_by_role("button", name="Revoke the token ci").click()
    expect(page.locator("table")).to_contain_text("revoked")
    watch.check()
