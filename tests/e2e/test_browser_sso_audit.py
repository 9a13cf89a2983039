"""In a real browser: "Sign in with …" goes through the fake OpenID Connect provider and lands signed in; the
audit log and the delete confirmation read as they should. Screenshots in test-artifacts/."""

from __future__ import annotations

import pytest
from django.urls import reverse

from projects.models import Project
from runs.services import create_run, pin_baseline
from suites.services import create_suite
from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.factories import play
from tests.web.test_oidc import configured, provider, site  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]

SUITE = "name: audited\nmodel: mock\nevals:\n  - {id: hi, prompt: hi, checks: [{match: '*'}]}\n"


def test_signing_in_with_the_provider(page, watch, configured, transactional_db):  # noqa: F811 (fixture)
    from playwright.sync_api import expect

    with site(configured):
        page.goto("/")
        link = page.get_by_role("link", name="Sign in with Acme SSO")
        expect(link).to_be_visible()
        expect(page.locator("input[name=password]")).to_be_visible()  # the password form stays
        screenshot(page, "browser-sso-login.png")
        link.click()
        # Signed in, and in no project until an admin adds them (no EVALSITE_OIDC_DEFAULT_ROLE here).
        expect(page.locator("h1")).to_have_text("You are not in a project yet")
        expect(page.locator(".topbar-user")).to_contain_text("ada")
    watch.check()


def test_the_audit_log_and_a_delete_confirmation(page, watch, user):
    from playwright.sync_api import expect

    project = Project.default()  # the user fixture is its admin
    suite = create_suite(owner=user, source=SUITE)
    run = play(create_run(version=suite.latest_version, user=user))
    pin_baseline(run, by=user)
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("projects:audit", args=[project.slug]))
    expect(page.locator("h1")).to_have_text("Audit log")
    rows = page.locator("table.audit-log tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("pinned as baseline")
    expect(rows.first.get_by_role("link")).to_have_attribute("href", f"/runs/{run.pk}/")
    screenshot(page, "browser-audit-log.png")

    page.goto(reverse("runs:detail", args=[run.pk]))
    page.get_by_role("link", name="Delete run").click()
    expect(page.locator("h1")).to_have_text("Delete this run?")
    screenshot(page, "browser-delete-run.png")
    page.get_by_role("button", name="Delete the run").click()
    expect(page.locator("h1")).to_have_text("Runs")
    page.goto(reverse("projects:audit", args=[project.slug]))
    expect(rows.first).to_contain_text("deleted")
    expect(rows.first.get_by_role("link")).to_have_count(0)  # gone: named, no longer linked
    watch.check()
