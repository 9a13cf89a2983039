"""In chromium: while the database is away the run page's poll is answered 503 (evalsite.middleware); the page
keeps what it showed, says "Database unavailable, retrying…", goes on polling, and drops the note once a poll
gets through (static/js/app.js).

The 503s are the browser's own answers to the poll (Playwright's routing), as the middleware gives them: the
live server's database is the test's, which the test cannot stop without stopping itself. The middleware's
own answers are tests/e2e/test_e2e_database_down.py's.
"""

from __future__ import annotations

import pytest

from runs.models import Status
from suites import services as suite_services
from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.web.test_pages_runs import SUITE, make_run

pytestmark = [pytest.mark.browser]


def test_the_run_page_says_the_database_is_away_and_polls_on(page, live_server, user):
    from playwright.sync_api import expect

    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = make_run(version, user, status=Status.RUNNING)
    log_in(page, user.username, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    progress = page.locator("#progress")
    expect(progress).to_be_visible()
    shown = progress.get_attribute("data-fingerprint")

    polls: list[int] = []

    def away(route):
        polls.append(1)
        route.fulfill(
            status=503,
            headers={"Retry-After": "5", "Content-Type": "text/html; charset=utf-8"},
            body="<h1>Database unavailable</h1>",
        )

    page.route(f"**/runs/{run.pk}/progress/**", away)
    note = page.locator("#database-away")
    expect(note).to_have_text("Database unavailable, retrying…")
    expect(note).to_have_attribute("role", "status")
    page.wait_for_timeout(2500)
    assert len(polls) >= 2  # it polls on
    assert progress.get_attribute("data-fingerprint") == shown  # and keeps what it showed
    assert page.locator("#database-away").count() == 1  # one note, however many 503s
    screenshot(page, "database-away.png")

    page.unroute(f"**/runs/{run.pk}/progress/**")
    expect(note).to_have_count(0)
    expect(progress).to_be_visible()
