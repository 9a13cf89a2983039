"""In a real browser: ticking the launch form's "Use the response cache" asks for the estimate again, which then
says the cache may answer some of the calls it counts; unticking takes the note away."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.e2e.conftest import PASSWORD, log_in

pytestmark = [pytest.mark.browser]

SUITE = """\
name: priced
model: paid/gpt-x
evals:
  - {id: hello, prompt: Say hello, checks: [{contains: hello}]}
"""
NOTE = "every call counted, though the response cache may answer some for nothing"


def test_the_cache_box_changes_the_estimate(page, watch, user):
    from playwright.sync_api import expect

    from endpoints.models import Endpoint
    from suites.services import create_suite

    Endpoint.objects.create(
        name="paid", base_url="http://paid.invalid/v1", api_key_env="PAID_KEY", price_input=1, price_output=2
    )
    suite = create_suite(owner=user, source=SUITE)
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("suites:detail", args=[suite.public_id]))
    page.wait_for_load_state()
    cost = page.locator("#launch-cost")
    expect(cost).to_contain_text("≈ $")
    expect(cost).not_to_contain_text(NOTE)

    box = page.get_by_label("Use the response cache")
    box.check()
    expect(cost).to_contain_text(NOTE)
    box.uncheck()
    expect(cost).not_to_contain_text(NOTE)
    expect(cost).to_contain_text("≈ $")
    watch.check()
