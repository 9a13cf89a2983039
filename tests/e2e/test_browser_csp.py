"""In chromium, every page runs under its Content-Security-Policy with no violation, and what needs JS
still works under it: the editor's live validation (htmx), the run page's polling, the share panel, key
hints and hotkeys.

A violation is caught twice: a `securitypolicyviolation` listener added before any page script runs, and
chromium's console line ("Refused to … because it violates the following Content Security Policy …").
"""

from __future__ import annotations

import re

import pytest

from runs.models import Run
from runs.services import create_run
from runs.worker.pump import execute
from tests.e2e.conftest import PageWatch, screenshot
from tests.web.test_csp import ROOT_PASSWORD, build_site

pytestmark = [pytest.mark.browser]

LISTEN = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__cspViolations.push(
    event.violatedDirective + " refused " + (event.blockedURI || "inline code") +
    " at " + event.sourceFile + ":" + event.lineNumber
  );
});
"""
# navigator.platform as a Mac reports it: key hints then read ⌘ instead of Ctrl (static/js/app.js).
AS_A_MAC = """
Object.defineProperty(Navigator.prototype, "platform", { get: function () { return "MacIntel"; } });
Object.defineProperty(Navigator.prototype, "userAgentData", { get: function () { return undefined; } });
"""


class CspWatch:
    def __init__(self, tab):
        self.tab = tab
        self.console: list[str] = []
        self.events: list[str] = []
        tab.add_init_script(LISTEN)
        tab.on("console", self._console)

    def _console(self, message):
        if "Content Security Policy" in message.text:
            self.console.append(message.text)

    def collect(self, where: str) -> None:
        """Call before leaving a page: the listener's list lives in the page."""
        found = self.tab.evaluate("window.__cspViolations || []")
        self.events += [f"{where}: {violation}" for violation in found]

    def check(self) -> None:
        assert not self.events, "CSP violations:\n" + "\n".join(self.events)
        assert not self.console, "CSP console errors:\n" + "\n".join(self.console)


def sign_in(tab, username: str, password: str) -> None:
    from playwright.sync_api import expect

    tab.goto("/accounts/login/")
    tab.fill("input[name=username]", username)
    tab.fill("input[name=password]", password)
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.locator("h1")).to_have_text("Suites")
    tab.wait_for_function("() => window.htmx !== undefined")


@pytest.fixture
def site(transactional_db, django_user_model):
    return build_site(django_user_model)


def test_every_page_runs_without_a_csp_violation(page, site):  # noqa: F811
    from playwright.sync_api import expect

    csp = CspWatch(page)
    watch = PageWatch(page)
    page.goto("/accounts/login/")
    expect(page.locator("h1")).to_have_text("Sign in to evalsite")
    csp.collect("login")
    sign_in(page, "root", ROOT_PASSWORD)
    for name, url in site.pages.items():
        if name == "not found":
            continue
        page.goto(url)
        page.wait_for_load_state("networkidle")
        if name == "api docs":
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("evalsite API")
            expect(page.locator(".opblock").first).to_be_visible()
        screenshot(page, f"csp-{name.replace(' ', '-')}.png")
        csp.collect(name)
    # A failed responses' page (404) and the lockout page (429), outside PageWatch's view.
    plain = page.context.new_page()
    plain_csp = CspWatch(plain)
    plain.goto("/no-such-page/")
    plain_csp.collect("not found")
    plain.context.clear_cookies()
    plain.goto("/accounts/login/")
    for attempt in range(5):
        plain.fill("input[name=username]", "root")
        plain.fill("input[name=password]", f"wrong-{attempt}")
        plain.get_by_role("button", name="Sign in").click()
    expect(plain.locator("h1")).to_have_text("Too many failed sign-ins")
    screenshot(plain, "csp-locked-out.png")
    plain_csp.collect("locked out")
    plain.close()
    watch.check()
    csp.check()
    plain_csp.check()


def test_interactive_features_work_under_the_policy(page, site):  # noqa: F811
    from playwright.sync_api import expect

    page.add_init_script(AS_A_MAC)
    csp = CspWatch(page)
    watch = PageWatch(page)
    sign_in(page, "root", ROOT_PASSWORD)

    # Key hints: app.js names the Mac's modifier.
    page.goto(site.pages["new suite"])
    expect(page.locator("button[data-save] kbd")).to_have_text("⌘S")
    # The editor's live validation: htmx posts as the user types, with the CSRF header from <body>.
    editor = page.locator("textarea[name=source]")
    editor.fill("name: broken\nmodel: mock\nevals:\n  - prompt: hi\n    chekcs: []\n")
    problems = page.locator("#problems")
    expect(problems.locator(".problems-bad")).to_be_visible()
    expect(problems).to_contain_text("unknown key `chekcs` (did you mean `checks`?)")
    expect(page.locator("[data-editor-gutter]")).to_contain_text("5")  # editor.js draws the line numbers
    screenshot(page, "csp-editor-live-validation.png")
    csp.collect("editor")

    # The share panel opens in place (app.js), and creating a link swaps the panel (htmx POST).
    page.goto(site.pages["run"])
    share = page.locator("#share")
    expect(share).to_be_hidden()
    page.locator("a[data-disclose=share][aria-expanded]").click()
    expect(share).to_be_visible()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))  # JS opened it, not the #share anchor
    before = share.locator(".share-row").count()
    share.get_by_role("button", name="Create link").click()
    expect(share.locator(".share-row")).to_have_count(before + 1)
    expect(page.locator("#share-count")).to_have_text(str(before + 1))
    # htmx puts the swapped panel's own classes back when it settles (~20 ms after the swap): an Escape before
    # that would be undone, as no person's would be. Wait for the swap to have settled.
    expect(page.locator(".htmx-settling, .htmx-swapping, .htmx-request")).to_have_count(0)
    page.keyboard.press("Escape")
    expect(share).to_be_hidden()
    csp.collect("share panel")

    # Hotkeys on a transcript: j goes to the next conversation.
    page.goto(site.pages["transcript"])
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(r"/c/1/$"))
    csp.collect("transcript hotkeys")

    # A live run's page polls its progress and stops once the run is over.
    live = create_run(version=site.run.suite_version, user=site.user)
    polls: list[str] = []
    page.on("request", lambda request: "/progress/" in request.url and polls.append(request.url))
    page.goto(f"/runs/{live.pk}/")
    progress = page.locator("#progress")
    expect(progress).to_contain_text("0 / 2")
    page.wait_for_function("() => document.querySelector('#progress .bar.is-live') !== null")
    for conversation_id in live.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    expect(page.locator("#run-header .badge-lg")).to_have_text("passed")
    expect(progress).to_contain_text("2 / 2")
    expect(progress.locator(".bar-seg.seg-passed")).to_have_class(re.compile(r"\bbar-w-100\b"))
    expect(progress).not_to_have_attribute("hx-get", re.compile(".*"))
    assert polls, "the run page never polled"
    assert Run.objects.get(pk=live.pk).status == "passed"
    screenshot(page, "csp-run-polled.png")
    csp.collect("run polling")

    watch.check()
    csp.check()
