"""In the browser: the launch form's concurrency field says what the chosen model's endpoint allows, and follows
the model as it is typed, keeping the number typed; a number above the cap is not sent."""

from __future__ import annotations

import re

import pytest

from endpoints.models import Endpoint
from suites import services
from tests.e2e.conftest import PASSWORD, PageWatch, log_in

pytestmark = [pytest.mark.browser]

SUITE = "name: capped\nmodel: fake/test-model\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"


def test_the_concurrency_field_follows_the_endpoint_chosen(page, user, fake_endpoint):
    from playwright.sync_api import expect

    from runs.models import Run

    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=20)
    suite = services.create_suite(owner=user, source=SUITE)
    watch = PageWatch(page)
    log_in(page, user.username, PASSWORD)
    page.goto(f"/suites/{suite.public_id}/")
    page.wait_for_load_state()
    field = page.locator("#launch input[name=concurrency]")
    hint = page.locator("#launch-concurrency-cap")
    expect(hint).to_have_text("fake allows up to 20 at once")
    expect(field).to_have_attribute("max", "20")
    expect(field).to_have_value("10")

    field.fill("40")
    model = page.locator("#launch input[name=model]")
    model.fill("mock")  # no endpoint limits the mock: the run's own limit is the field's
    expect(page.locator("#launch-routes")).to_contain_text("model mock → mock")
    expect(field).to_have_attribute("max", "100")
    expect(hint).to_have_count(0)
    expect(field).to_have_value("40")

    model.fill("fake/other")
    expect(hint).to_have_text("fake allows up to 20 at once")
    expect(field).to_have_value("40")
    page.locator("#launch").get_by_role("button", name="Launch").click()
    assert field.evaluate("input => input.validity.rangeOverflow")  # the browser keeps it from being sent
    expect(page).to_have_url(re.compile(rf"/suites/{suite.public_id}/$"))
    assert not Run.objects.exists()
    watch.check()
