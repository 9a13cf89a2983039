"""In the browser: the editor and the launch form say where models go, and warn as the user types."""

from __future__ import annotations

import pytest

from suites import services
from tests.e2e.conftest import PASSWORD, PageWatch, log_in, screenshot

pytestmark = [pytest.mark.browser]

SUITE = "name: routed\nmodel: fake/test-model\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"


def test_routes_and_warnings_follow_what_is_typed(page, user, fake_endpoint, monkeypatch):  # noqa: F811
    from playwright.sync_api import expect

    monkeypatch.setenv("OPENAI_API_KEY", "sk-set")
    suite = services.create_suite(owner=user, source=SUITE)
    watch = PageWatch(page)
    log_in(page, user.username, PASSWORD)
    page.goto(f"/suites/{suite.public_id}/")
    problems = page.locator("#problems")
    expect(problems.locator("[data-routes]")).to_contain_text(
        f"model fake/test-model → fake ({fake_endpoint.base_url})"
    )

    # A typo in the editor: a located warning, the suite still valid.
    editor = page.locator("textarea[name=source]")
    editor.fill(SUITE.replace("fake/", "faek/"))
    expect(problems).to_contain_text("no endpoint is named `faek` (did you mean `fake`?)")
    expect(problems.locator(".problems-ok")).to_be_visible()
    expect(problems.locator("a.problem", has_text="line 2, col 8")).to_be_visible()
    screenshot(page, "endpoint-warning-editor.png")

    # The launch form: typed by keyboard, the routes line follows.
    model = page.locator("#launch input[name=model]")
    model.focus()
    page.keyboard.type("faek/other")
    routes = page.locator("#launch-routes")
    expect(routes).to_contain_text("model faek/other → no endpoint named faek")
    expect(routes).to_contain_text("no endpoint is named `faek` (did you mean `fake`?)")
    expect(page.locator("#model-choices option[value='fake/']")).to_have_count(1)
    screenshot(page, "endpoint-warning-launch.png")
    model.fill("mock")
    expect(routes).to_contain_text("model mock → mock")
    expect(routes).not_to_contain_text("no endpoint")
    watch.check()
