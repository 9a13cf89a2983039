"""In a real browser: every page of the product, checked by axe-core (from npm, tests/e2e/axe/package.json) for
accessibility, and measured at a phone's width for horizontal overflow.

axe.min.js is injected by Playwright before the page's own scripts (an init script, which the site's CSP does
not govern). A critical or serious violation fails the test; the others are printed. `make test` installs
axe-core with `npm ci`; without node and npm the accessibility test skips and says so.

A page is one line of PAGES: a name, its URL from the runs the `world` fixture plays, who visits it, what to
do on it before it is checked, and the status it answers with.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from django.urls import reverse

from tests.conftest import ROOT
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, VIEWPORT, log_in, screenshot

pytestmark = [pytest.mark.browser]

AXE_DIR = ROOT / "tests" / "e2e" / "axe"
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("critical", "serious")
PHONE = {"width": 390, "height": 844}

BROKEN_SOURCE = "name: broken\nmodel: mock\nevals:\n  - id: one\n    prompt: Hi\n    chekcs: []\n"


def _show_problems(page) -> None:
    from playwright.sync_api import expect

    page.wait_for_load_state()  # htmx binds the editor's validation once the page has loaded
    page.locator("textarea[name=source]").fill(BROKEN_SOURCE)
    expect(page.locator("#problems .problems-bad")).to_be_visible()


def _unfold_calls(page) -> None:
    for call in page.locator(".tool-call summary").all():
        call.click()


@dataclass(frozen=True)
class Page:
    name: str
    url: Callable[[SimpleNamespace], str]
    # "user"; "other" (a user with nothing of their own); "viewer" (of the user's project); "lonely" (in no
    # project); or "anonymous".
    visitor: str = "user"
    then: Callable | None = None
    status: int = 200


# Every page of the product but the Django admin.
PAGES = [
    Page("suites list", lambda w: reverse("suites:list")),
    Page("new suite", lambda w: reverse("suites:new")),
    Page("editor with problems", lambda w: reverse("suites:detail", args=[w.suite.public_id]), then=_show_problems),
    Page("suite with a dataset", lambda w: reverse("suites:detail", args=[w.scripted.suite_version.suite.public_id])),
    Page("version", lambda w: reverse("suites:version", args=[w.suite.public_id, 1])),
    Page("version diff", lambda w: reverse("suites:version_diff", args=[w.suite.public_id, 3, 2])),
    Page("import", lambda w: reverse("suites:import")),
    Page("runs list", lambda w: reverse("runs:list")),
    Page("runs list, empty", lambda w: reverse("runs:list"), visitor="other"),
    Page("run, live", lambda w: reverse("runs:detail", args=[w.live.pk])),
    Page("run, finished with failures", lambda w: reverse("runs:detail", args=[w.tree.pk])),
    Page("run, repeated evals", lambda w: reverse("runs:detail", args=[w.simulated.pk])),
    Page("run, scripted", lambda w: reverse("runs:detail", args=[w.scripted.pk])),
    Page("run, calibration set", lambda w: reverse("runs:detail", args=[w.calibration.pk])),
    Page("transcript, tree", lambda w: reverse("runs:conversation", args=[w.tree.pk, w.failed_index])),
    Page("transcript, scripted", lambda w: reverse("runs:conversation", args=[w.scripted.pk, 0])),
    Page("transcript, simulated", lambda w: reverse("runs:conversation", args=[w.simulated.pk, 0])),
    Page("transcript, tool calls", lambda w: reverse("runs:conversation", args=[w.tools.pk, 0]), then=_unfold_calls),
    Page("compare, choosing a run", lambda w: reverse("runs:compare", args=[w.tree.pk])),
    Page("compare", lambda w: reverse("runs:compare_with", args=[w.tree.pk, w.before.pk])),
    Page("compare, one eval", lambda w: reverse("runs:compare_eval", args=[w.tree.pk, w.before.pk, "capital"])),
    Page("compare, tool calls", lambda w: reverse("runs:compare_eval", args=[w.tools_after.pk, w.tools.pk, "checked"])),
    Page("calibration figures", lambda w: reverse("runs:calibration", args=[w.calibration.pk])),
    Page("review queue", lambda w: reverse("runs:review", args=[w.tree.pk])),
    Page("tokens", lambda w: reverse("tokens")),
    Page("projects", lambda w: reverse("projects:list")),
    Page("members", lambda w: reverse("projects:members", args=[w.suite.project.slug])),
    Page("audit log", lambda w: reverse("projects:audit", args=[w.suite.project.slug])),
    Page("delete a run", lambda w: reverse("runs:delete", args=[w.tree.pk])),
    Page("delete a suite", lambda w: reverse("suites:delete", args=[w.suite.public_id])),
    Page("share link", lambda w: reverse("share:run", args=[w.share_token]), visitor="anonymous"),
    Page("share link, transcript", lambda w: reverse("share:conversation", args=[w.share_token, w.failed_index]), visitor="anonymous"),
    Page("share link, revoked", lambda w: reverse("share:run", args=[w.revoked_token]), visitor="anonymous", status=404),
    Page("a role too low", lambda w: reverse("runs:delete", args=[w.tree.pk]), visitor="viewer", status=403),
    Page("in no project yet", lambda w: reverse("suites:list"), visitor="lonely"),
    Page("login", lambda w: reverse("login"), visitor="anonymous"),
    Page("not found", lambda w: "/no-such-page/", status=404),
]  # fmt: skip


@pytest.fixture
def world(user):
    """One of each kind of run, played in this process on the built-in mock model."""
    from django.contrib.auth import get_user_model

    from runs import services
    from runs.models import Run, Status
    from runs.tokens import create_token
    from suites.services import create_suite, save_version
    from tests.e2e.test_browser_tools import with_a_tool_check  # it imports this module
    from tests.factories import join, mock_run, play

    def suite_of(example: str, files: tuple[str, ...] = ()):
        # The mock's latency shows a run in progress to a person; here it only slows the test.
        source = re.sub(r"latency_ms: \d+", "latency_ms: 0", (ROOT / "examples" / example).read_text())
        attached = {name: (ROOT / "examples" / name).read_text() for name in files}
        return create_suite(owner=user, source=source, files=attached)

    def run_of(suite):
        return play(services.create_run(version=suite.latest_version, user=user))

    demo = suite_of("demo-mock.yaml")
    source = demo.latest_version.source
    # A first version whose capital question passes: the second one's failure is a regression to compare.
    save_version(suite=demo, source=source.replace("is Sydney.", "is Canberra."), user=user)
    before = run_of(demo)
    save_version(suite=demo, source=source, user=user)
    tree = run_of(demo)
    # Live: its last conversation still being played.
    live = run_of(demo)
    live.conversations.filter(index=2).update(status=Status.RUNNING)
    Run.objects.filter(pk=live.pk).update(status=Status.RUNNING, finished_at=None)
    create_token(user, "ci")  # the tokens page lists one
    revoked = services.create_share_link(tree, user)
    services.revoke_share_link(revoked)
    tools = mock_run(demo.latest_version, user)  # a transcript whose turn called tools, checked by one
    with_a_tool_check(tools, index=0)
    tools_after = mock_run(demo.latest_version, user)  # the same, with other arguments, to compare
    with_a_tool_check(tools_after, index=0, city="Lyon")
    people = get_user_model().objects
    viewer = people.create_user("vera", password=PASSWORD)
    join(viewer, demo.project, role="viewer")
    return SimpleNamespace(
        viewer=viewer,
        lonely=people.create_user("lonely", password=PASSWORD),
        suite=demo,
        before=before,
        tree=tree,
        failed_index=tree.conversations.get(status=Status.FAILED).index,
        live=live,
        scripted=run_of(suite_of("capitals-per-turn.yaml", ("capitals.jsonl",))),
        simulated=run_of(suite_of("booking-simulated.yaml")),
        calibration=run_of(suite_of("calibration-politeness.yaml")),
        tools=tools,
        tools_after=tools_after,
        share_token=services.create_share_link(tree, user).token,
        revoked_token=revoked.token,
    )


def _visit(browser, live_server, world, user, other_user):
    """Each page of PAGES in turn, opened as its visitor; yields (page definition, Playwright page)."""
    contexts = {}
    for entry in PAGES:
        if entry.visitor not in contexts:
            context = browser.new_context(base_url=live_server.url)
            if AXE_JS.exists():
                context.add_init_script(path=str(AXE_JS))
            tab = context.new_page()
            tab.set_default_timeout(TIMEOUT_MS)
            if entry.visitor != "anonymous":
                who, password = {
                    "user": (user, PASSWORD),
                    "other": (other_user, "pw-mallory-123"),
                    "viewer": (world.viewer, PASSWORD),
                    "lonely": (world.lonely, PASSWORD),
                }[entry.visitor]
                log_in(tab, who.username, password)
            contexts[entry.visitor] = (context, tab)
        tab = contexts[entry.visitor][1]
        yield entry, tab
    for context, _ in contexts.values():
        context.close()


def _open(tab, entry, world, viewport) -> None:
    tab.set_viewport_size(viewport)
    response = tab.goto(entry.url(world))
    assert response.status == entry.status, f"{entry.name}: {response.status} {response.url}"
    tab.wait_for_load_state()
    if entry.then is not None:
        entry.then(tab)


def _axe(tab) -> list[dict]:
    return tab.evaluate(
        """async () => {
            const results = await axe.run(document, {resultTypes: ["violations"]});
            return results.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(" "), summary: n.failureSummary})),
                count: v.nodes.length,
            }));
        }"""
    )


def _file_name(entry: Page) -> str:
    return entry.name.replace(",", "").replace(" ", "-") + ".png"


def _describe(name: str, violation: dict) -> str:
    lines = [f"[{name}] {violation['impact']}: {violation['id']} ({violation['count']}×) {violation['help']}"]
    for node in violation["nodes"]:
        lines.append(f"    {node['target']}: {' '.join(node['summary'].split())}")
    return "\n".join(lines)


def _axe_or_skip() -> None:
    if AXE_JS.exists():
        return
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed: axe-core comes from npm (tests/e2e/axe/package.json)")
    pytest.fail(f"{AXE_JS} is missing: `npm ci --prefix {AXE_DIR.relative_to(ROOT)}` (make test does it)")


class Findings:
    """axe-core's violations over the pages: critical and serious ones fail the test, the others are printed."""

    def __init__(self):
        self.failing: list[str] = []
        self.other: list[str] = []

    def check(self, tab, name: str) -> None:
        for violation in _axe(tab):
            described = _describe(name, violation)
            (self.failing if violation["impact"] in FAILING_IMPACTS else self.other).append(described)

    def assert_none_failing(self) -> None:
        if self.other:
            print("axe-core, minor and moderate:\n" + "\n".join(self.other))
        assert not self.failing, "axe-core, critical and serious:\n" + "\n".join(self.failing)


def test_no_page_has_a_critical_or_serious_accessibility_violation(
    browser, live_server, world, user, other_user
):
    _axe_or_skip()
    findings = Findings()
    for entry, tab in _visit(browser, live_server, world, user, other_user):
        _open(tab, entry, world, VIEWPORT)
        screenshot(tab, f"a11y-{_file_name(entry)}")
        findings.check(tab, entry.name)
    findings.assert_none_failing()


# The innermost elements whose right edge passes the screen's: what to fix when a page is too wide.
STICKING_OUT = """width => {
    const right = e => e.getBoundingClientRect().right + window.scrollX;
    const out = [...document.querySelectorAll("body *")].filter(e => right(e) > width + 1);
    const innermost = out.filter(e => !out.some(other => other !== e && e.contains(other)));
    return innermost.slice(0, 4).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join(".")}`);
}"""


def test_every_page_fits_a_phone(browser, live_server, world, user, other_user):
    """At 390 px a page fits the screen's width (a wide table scrolls inside its own box instead), and what
    shows or hides at that width passes axe-core too."""
    wide = []
    findings = Findings()
    for entry, tab in _visit(browser, live_server, world, user, other_user):
        _open(tab, entry, world, PHONE)
        width = tab.evaluate("() => document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide.append(f"{entry.name}: {width} px, from {tab.evaluate(STICKING_OUT, PHONE['width'])}")
        screenshot(tab, f"phone-{_file_name(entry)}")
        if AXE_JS.exists():
            findings.check(tab, f"{entry.name}, {PHONE['width']} px")
    assert not wide, f"wider than {PHONE['width']} px: {wide}"
    _axe_or_skip()
    findings.assert_none_failing()
