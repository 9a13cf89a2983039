"""In chromium: a conversation waiting to retry counts its seconds down on the run page (static/js/app.js,
under the Content-Security-Policy), and "Retry errored conversations" queues a finished run's errors again."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Status
from suites import services as suite_services
from tests.e2e.conftest import PASSWORD, PageWatch, log_in, screenshot
from tests.e2e.test_browser_csp import CspWatch
from tests.web.test_pages_runs import SUITE, make_run

pytestmark = [pytest.mark.browser]


def test_the_wait_counts_down_and_errored_conversations_are_retried(page, live_server, user):  # noqa: F811
    from playwright.sync_api import expect

    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    running = make_run(version, user, status=Status.RUNNING)
    watch, csp = PageWatch(page), CspWatch(page)
    log_in(page, user.username, PASSWORD)
    running.conversations.filter(index=1).update(
        status=Status.RUNNING,
        waiting_until=timezone.now() + timedelta(seconds=20),
        waiting_reason="waiting for rate limit",
    )

    page.goto(f"/runs/{running.pk}/")
    card = page.locator("#progress .progress-waiting")
    expect(card).to_contain_text(re.compile(r"1 conversation waiting for rate limit \(retry in \d+ s\)"))
    row = page.locator("#conversations tr.row-running")
    expect(row).to_contain_text("waiting for rate limit (retry in")
    first = int(re.search(r"retry in (\d+) s", card.inner_text()).group(1))
    time.sleep(2.2)
    later = int(re.search(r"retry in (\d+) s", card.inner_text()).group(1))
    assert later <= first - 2  # the countdown ticks without a reload
    screenshot(page, "retries-waiting.png")
    csp.collect("waiting")

    errored = make_run(version, user, status=Status.ERROR)
    page.goto(f"/runs/{errored.pk}/")
    button = page.get_by_role("button", name=re.compile("Retry errored conversations"))
    expect(button).to_be_visible()
    screenshot(page, "retries-button.png")
    button.click()
    expect(page.locator(".flash")).to_contain_text("Retrying 1 errored conversation")
    expect(page.locator("#run-header .badge-lg")).to_have_text("running")
    expect(page.get_by_role("button", name=re.compile("Retry errored conversations"))).to_have_count(0)
    screenshot(page, "retries-retried.png")
    csp.collect("retried")
    errored.refresh_from_db()
    assert errored.status == Status.RUNNING
    assert errored.conversations.get(index=2).status == Status.QUEUED
    csp.check()
    watch.check()
