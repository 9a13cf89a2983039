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
    expect(page.locator(".empty")).to_contain_text("No tokens in Default yet")
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


def test_triage_a_run_then_override_a_verdict(page, watch, user, pair):  # noqa: F811 (fixture)
    """The after run: capital failed (it says Lyon). Filter to failures, jump to one with `n`, open it, and
    overturn its check with a note; the verdict, the run page's counts and the compare page follow."""
    from playwright.sync_api import expect

    before, after = pair
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:detail", args=[after.pk]))
    page.select_option("#triage-status", "failed")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"status=failed"))
    rows = page.locator("#conversations table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("capital")
    page.keyboard.press("n")
    expect(rows.first).to_have_class(re.compile("is-selected"))
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("capital")

    page.get_by_text("Override contains").click()
    note = page.get_by_label("Why (kept with the override)")
    note.fill("Lyon is wrong, but the question was about <b>markup</b>: kept for the test")
    page.get_by_role("button", name="Mark as passed").click()
    expect(page.locator(".verdict")).to_contain_text("overridden")
    expect(page.locator(".verdict")).to_contain_text("The run said failed")
    expect(page.locator(".override-note")).to_contain_text("<b>markup</b>")  # escaped, shown as typed
    expect(page.locator(".check .badge-override")).to_have_count(1)
    screenshot(page, "browser-override.png")

    page.goto(reverse("runs:detail", args=[after.pk]))
    expect(page.locator(".status-counts")).to_contain_text("1 overridden")
    page.goto(reverse("runs:compare_with", args=[after.pk, before.pk]))
    expect(page.locator("table tbody tr", has_text="capital")).to_contain_text("overridden")
    watch.check()
