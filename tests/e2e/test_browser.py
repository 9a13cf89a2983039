"""In a real browser (Debian's chromium through Playwright), against the live server and a real Celery worker.

One user journey end to end: sign in, write a broken suite and watch the live validation locate the
problem, fix it, save, launch, watch the progress bar fill and its polling stop, and read the transcript.
Screenshots land in test-artifacts/; with UPDATE_DOCS_SCREENSHOT=1 the finished run page also replaces
docs/screenshot.png, which the README shows (a test run otherwise leaves the checkout as it found it).

Chromium is never downloaded: CI installs Debian's `chromium` package, and a missing binary fails loudly.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.conftest import ARTIFACTS, ROOT
from tests.e2e.conftest import PASSWORD, VIEWPORT, log_in, screenshot
from tests.factories import ADD_EVAL, CAPITAL_THINK_AGAIN_EVAL, MULTIPLY_EVAL, demo_suite

pytestmark = [pytest.mark.browser]

DOCS_SCREENSHOT = ROOT / "docs" / "screenshot.png"

SUITE = demo_suite(
    "name: arithmetic\ndescription: A calculator that sometimes needs a second try.\nmodel: fake/test-model\n"
    "system: You are a calculator. Answer with the number only.\n",
    (MULTIPLY_EVAL, ADD_EVAL, CAPITAL_THINK_AGAIN_EVAL),
)
# The same suite with a typo in a key: the validator must name the line, the column and the path.
BROKEN_SUITE = SUITE.replace("What is 15 * 7?\n    checks:", "What is 15 * 7?\n    chekcs:")


def test_write_launch_and_read_a_run(page, watch, user, fake_endpoint, fake_openai, start_worker):
    from playwright.sync_api import expect

    from runs.models import Run

    fake_openai.latency = 0.3  # slow enough to see the run in progress
    fake_openai.script("What is 15 * 7?", ["100", "105"])
    fake_openai.script("What is 2 + 2?", ["4"])
    fake_openai.script("What is the capital of Australia?", ["Canberra."])
    start_worker()

    log_in(page, user.username, PASSWORD)
    page.locator("a.btn", has_text="New suite").click()
    expect(page).to_have_url(re.compile(r"/suites/new/$"))
    # htmx binds the editor once the page has loaded; text filled in before that sends no validation.
    page.wait_for_load_state()

    # A broken suite: the problems panel names line, column and path as the user types.
    editor = page.locator("textarea[name=source]")
    problems = page.locator("#problems")
    editor.fill(BROKEN_SUITE)
    typo_line = BROKEN_SUITE.split("\n").index("    chekcs:") + 1
    expect(problems.locator(".problems-bad")).to_be_visible()
    expect(problems).to_contain_text(f"line {typo_line}, col 5")
    expect(problems).to_contain_text("evals[0].chekcs")
    expect(problems).to_contain_text("unknown key `chekcs` (did you mean `checks`?)")
    expect(page.locator("[data-editor-gutter]")).to_contain_text(str(typo_line))
    screenshot(page, "browser-editor-error.png")

    # Clicking the problem puts the caret on the typo.
    problems.locator("a.problem", has_text="chekcs").click()
    expect(page.locator("[data-editor-pos]")).to_contain_text(f"Ln {typo_line}, Col 5")

    # Fixed: valid, and saving creates the suite.
    editor.fill(SUITE)
    expect(problems.locator(".problems-ok")).to_contain_text("Valid — 3 evals")
    expect(problems).to_contain_text("fake/test-model")
    page.locator("button[data-save]").click()
    expect(page).to_have_url(re.compile(r"/suites/[0-9a-f-]{36}/$"))
    expect(page.locator(".flashes")).to_contain_text("Created “arithmetic” — v1 saved.")

    # Launch from the side panel, and count the progress polls from here on.
    polls: list[float] = []
    page.on("request", lambda request: "/progress/" in request.url and polls.append(time.monotonic()))
    page.locator("#launch").get_by_role("button", name="Launch").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    run = Run.objects.get()
    assert run.model == "fake/test-model" and run.endpoint_name == "fake"

    # The progress partial updates itself until the run is over; then the header says passed.
    header_badge = page.locator("#run-header .badge-lg")
    progress = page.locator("#progress")
    bar = progress.locator(".bar")
    expect(header_badge).to_have_text("passed")
    expect(progress).to_contain_text("3 / 3")
    expect(progress).to_contain_text("conversations done · 100%")
    expect(progress.locator(".status-counts")).to_contain_text("3 passed")
    expect(bar).to_have_attribute("aria-valuenow", "3")
    expect(bar).not_to_have_class(re.compile(r"\bis-live\b"))
    expect(bar.locator(".bar-seg")).to_have_count(1)
    expect(bar.locator(".bar-seg.seg-passed")).to_have_class(re.compile(r"\bbar-w-100\b"))
    expect(progress).not_to_have_attribute("hx-get", re.compile(".*"))
    rows = page.locator("#conversations tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("passed on turn 2")
    expect(page.locator("#run-header")).to_contain_text("Run again")
    run.refresh_from_db()
    assert run.status == "passed"

    # The page was live (it polled at least once), and polling stopped once the run was shown as finished.
    assert polls, "the run page never polled /progress/: was the run over before the page loaded?"
    polls_when_done = len(polls)
    page.wait_for_timeout(2_500)
    assert len(polls) == polls_when_done, f"{len(polls) - polls_when_done} progress polls after the run ended"
    screenshot(page, "browser-run-finished.png")
    # For the README: as tall as the content, without the empty viewport below it.
    page.set_viewport_size({"width": VIEWPORT["width"], "height": 600})
    target = DOCS_SCREENSHOT if os.environ.get("UPDATE_DOCS_SCREENSHOT") else ARTIFACTS / "readme-run.png"
    target.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(target), full_page=True)
    page.set_viewport_size(VIEWPORT)

    # The transcript: the wrong answer, its failed check, the follow-up and why, the right answer.
    rows.nth(0).locator("a.row-link", has_text="multiply").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/c/0/$"))
    expect(page.locator("#verdict")).to_contain_text("Passed on turn 2")
    turns = page.locator("#turns li.turn")
    expect(turns).to_have_count(2)
    expect(page.locator(".bubble-user")).to_have_text(
        ["What is 15 * 7?", "That answer is incorrect. Please recalculate 15 multiplied by 7."]
    )
    expect(page.locator(".bubble-assistant")).to_have_text(["100", "105"])
    expect(turns.nth(0).locator(".check-badge").first).to_have_text("✗ FAIL")
    expect(turns.nth(1).locator(".check-badge").first).to_have_text("✓ PASS")
    expect(turns.nth(1).locator(".followup-note")).to_contain_text(
        'Follow-up sent because match "*105*" failed on turn 1'
    )
    expect(page.locator("#turn-poller")).to_have_count(0)
    screenshot(page, "browser-transcript.png")

    watch.check()


def test_ctrl_s_in_the_editor_saves_a_new_version(page, watch, user):
    from playwright.sync_api import expect

    from suites.services import create_suite

    suite = create_suite(owner=user, source=SUITE)
    log_in(page, user.username, PASSWORD)
    page.goto(f"/suites/{suite.public_id}/")
    expect(page.locator("h1")).to_contain_text("v1")

    editor = page.locator("textarea[name=source]")
    editor.fill(SUITE.replace("What is 2 + 2?", "What is 3 + 3?").replace('"*4*"', '"*6*"'))
    expect(page.locator("[data-editor-pos]")).to_contain_text("unsaved")
    expect(page.locator("#problems .problems-ok")).to_contain_text("Valid — 3 evals")
    editor.press("Control+s")

    expect(page.locator(".flashes")).to_contain_text("Saved v2.")
    expect(page.locator("h1")).to_contain_text("v2")
    expect(page.locator("[data-editor-pos]")).not_to_contain_text("unsaved")
    assert sorted(suite.versions.values_list("number", flat=True)) == [1, 2]
    assert "What is 3 + 3?" in suite.versions.get(number=2).source
    watch.check()


PER_TURN_SUITE = """\
name: capitals-per-turn
model: mock
grader: contains
gates:
  - metric: avg
    op: ">="
    value: 0.6
evals:
  - id: europe
    input: ["What is the capital of France?", "And of Germany?", "And of Italy?"]
    ground_truth: [Paris, Berlin, Rome]
"""


def test_per_turn_grades_in_the_transcript(page, watch, user):
    """A finished scripted run, built from rows: the run page's strip and gate, then the transcript's
    2/3 ✓✓✗ summary, each turn's grade, a mark that jumps to its turn, and Copy as text."""
    from django.utils import timezone
    from playwright.sync_api import expect

    from engine.results import TurnGrade, TurnRecord, Usage
    from runs.models import Conversation, Run, Turn
    from suites.services import create_suite

    version = create_suite(owner=user, source=PER_TURN_SUITE).latest_version
    run = Run.objects.create(
        suite_version=version, created_by=user, model="mock", endpoint_name="mock", is_mock=True,
        status="passed", started_at=timezone.now(), finished_at=timezone.now(),
    )  # fmt: skip
    conversation = Conversation.objects.create(
        run=run, index=0, eval_id="europe", prompt="What is the capital of France?", kind="multi-turn",
        style="scripted", status="failed", turn_count=3, turns_passed=2, turns_total=3, score=2 / 3,
        verdict="2 of 3 turns passed, score 0.67 < 1.00", prompt_tokens=96, completion_tokens=21,
    )  # fmt: skip
    answers = [
        ("What is the capital of France?", "The capital of France is Paris.", "Paris"),
        ("And of Germany?", "Berlin is the capital of Germany.", "Berlin"),
        ("And of Italy?", "I believe it is Madrid.", "Rome"),
    ]
    for number, (prompt, reply, truth) in enumerate(answers, start=1):
        passed = truth in reply
        record = TurnRecord(
            turn=number, node=f"evals[0].input[{number - 1}]", prompt=prompt, response=reply,
            usage=Usage(prompt_tokens=32, completion_tokens=7), latency_ms=250, passed=passed,
            grade=TurnGrade(
                turn=number, score=float(passed), passed=passed, submission=reply, ground_truth=truth,
                grader="contains", rationale=f"{truth!r} {'found' if passed else 'not found'} in the reply",
            ),
        )  # fmt: skip
        Turn.objects.create(
            conversation=conversation, position=number, record=record.model_dump(mode="json"), passed=passed
        )
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])

    log_in(page, user.username, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("#gates")).to_contain_text("avg >= 0.6 — actual 0.667 ✓")
    row = page.locator("#conversations tbody tr").first
    expect(row).to_contain_text("2 of 3 turns passed, score 0.67 < 1.00")
    expect(row.locator(".strip")).to_have_text("2/3 ✓✓✗")

    row.locator("a.row-link").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/c/0/$"))
    expect(page.locator("#verdict .turn-strip")).to_contain_text("2/3 ✓✓✗")
    turns = page.locator("#turns li.turn")
    expect(turns).to_have_count(3)
    expect(turns.nth(0).locator(".grade .check-line")).to_have_text(re.compile(r"✓ PASS\s+contains\s+1\.00"))
    third = turns.nth(2).locator(".grade")
    expect(third.locator(".check-line")).to_have_text(re.compile(r"✗ FAIL\s+contains\s+0\.00"))
    expect(third).to_contain_text("I believe it is Madrid.")
    expect(third).to_contain_text("Ground truth")
    expect(third).to_contain_text("Rome")
    expect(third).to_contain_text("'Rome' not found in the reply")

    # The ✗ mark jumps to the turn that failed.
    page.locator("#verdict .mark-fail").click()
    expect(page).to_have_url(re.compile(r"#turn-3$"))

    # Copy as text puts the whole conversation on the clipboard in the [Role]: format.
    page.get_by_role("button", name="Copy as text").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith(
        "[User]:\nWhat is the capital of France?\n\n[Assistant]:\nThe capital of France is Paris."
    )
    assert copied.endswith("[User]:\nAnd of Italy?\n\n[Assistant]:\nI believe it is Madrid.")

    expect(page.get_by_role("button", name="Copy as text")).to_be_visible()  # the label comes back
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "browser-per-turn.png")
    watch.check()


def test_iterations_strip_stats_and_transcript(page, watch, user):
    """A finished run of a 5-iteration suite, built from rows: the Iterations section's strip and statistics,
    the Flaky only filter (htmx, URL pushed), and a strip mark opening that iteration's transcript."""
    from playwright.sync_api import expect

    from suites.services import create_suite
    from tests.web.iterated_runs import SUITE as ITERATED_SUITE
    from tests.web.iterated_runs import make_run

    run = make_run(create_suite(owner=user, source=ITERATED_SUITE).latest_version, user)
    log_in(page, user.username, PASSWORD)
    page.goto(f"/runs/{run.pk}/")

    section = page.locator("#iterations")
    rows = section.locator("tbody tr")
    expect(rows).to_have_count(3)
    booking = rows.nth(0)
    expect(booking.locator(".iter-strip .imark")).to_have_text(["✓", "✗", "✓", "✓", "!"])
    expect(booking.locator(".imark.is-rep")).to_have_count(1)
    expect(booking.locator(".badge-flaky")).to_have_text("FLAKY")
    expect(booking).to_contain_text("75% 3/4")
    expect(booking).to_contain_text("95% CI 30%–95%")
    expect(booking).to_contain_text("0.75 ± 0.43")
    expect(booking).to_contain_text("passed")
    expect(rows.nth(2)).to_contain_text("0% < 50% needed")
    screenshot(page, "browser-iterations.png")

    # Flaky only: both sections narrow to the flaky eval, and the address says so.
    section.get_by_role("link", name=re.compile("Flaky only")).click()
    expect(page).to_have_url(re.compile(r"\?flaky=1"))
    expect(page.locator("#iterations tbody tr")).to_have_count(1)
    expect(page.locator("#conversations tbody tr")).to_have_count(5)

    # The ✗ mark opens that iteration's transcript, with its ending and the switcher.
    page.locator("#iterations a.imark-failed").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/c/0/\?iteration=1$"))
    expect(page.locator("h1")).to_contain_text("iteration 2 of 5")
    expect(page.locator("#verdict .ending")).to_have_text(re.compile(r"Ended:\s+max turns \(10\)"))
    expect(page.locator("#iteration-switcher .imark.is-current")).to_have_text("✗")
    page.keyboard.press("]")
    expect(page).to_have_url(re.compile(r"\?iteration=2$"))
    expect(page.locator(".msg-simulated").first).to_contain_text("simulated user")
    screenshot(page, "browser-iteration-transcript.png")
    watch.check()


def test_share_panel_opens_under_the_header_of_a_long_run(page, watch, user):
    """The Share button sits in the run header; its panel opens right under it, in view, even on a run long
    enough to scroll; a link made there shows at once, and the button counts it."""
    from django.utils import timezone
    from playwright.sync_api import expect

    from runs.models import Conversation, Run
    from suites.services import create_suite

    version = create_suite(owner=user, source=PER_TURN_SUITE).latest_version
    run = Run.objects.create(
        suite_version=version, created_by=user, model="mock", endpoint_name="mock", is_mock=True,
        status="failed", started_at=timezone.now(), finished_at=timezone.now(),
    )  # fmt: skip
    Conversation.objects.bulk_create(
        Conversation(run=run, index=i, eval_id=f"europe-{i}", prompt="What is the capital of France?",
                     status="failed" if i % 3 else "passed", score=0.0 if i % 3 else 1.0, verdict="—", turn_count=1)
        for i in range(60)
    )  # fmt: skip
    log_in(page, user.username, PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    head = page.locator("#run-header")
    expect(head).to_contain_text("gate avg ≥ 0.6 failed: 0.333")  # 20 of 60 scored 1
    panel = page.locator("#share")
    expect(panel).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollHeight") > 2 * VIEWPORT["height"]  # a long page

    head.get_by_role("link", name="Share").click()
    expect(panel).to_be_visible()
    expect(head.get_by_role("link", name="Share")).to_have_attribute("aria-expanded", "true")
    header_box, panel_box = head.bounding_box(), panel.bounding_box()
    assert 0 <= panel_box["y"] - (header_box["y"] + header_box["height"]) < 40  # right under the header
    assert panel_box["y"] + panel_box["height"] < VIEWPORT["height"]  # in view without scrolling

    panel.get_by_role("button", name="Create link").click()
    link = panel.locator("input[aria-label='Share link']")
    expect(link).to_have_value(re.compile(r"/s/[\w-]+/$"))
    expect(link).to_be_in_viewport()
    expect(head.locator("#share-count")).to_have_text("1")
    screenshot(page, "run-share-panel.png")
    page.screenshot(path=str(ARTIFACTS / "run-share-panel-viewport.png"))  # what the user sees
    page.keyboard.press("Escape")  # focus is in the panel: Escape closes it
    expect(panel).to_be_hidden()
    expect(head.get_by_role("link", name="Share")).to_have_attribute("aria-expanded", "false")
    watch.check()


MAC = """
Object.defineProperty(Navigator.prototype, "platform", {get: () => "MacIntel"});
Object.defineProperty(Navigator.prototype, "userAgentData", {get: () => ({platform: "macOS"})});
"""


@pytest.mark.parametrize(
    ("platform", "save", "run"), [("linux", "Ctrl+S", "Ctrl+Enter"), ("mac", "⌘S", "⌘↵")]
)
def test_key_hints_name_the_platforms_modifier(browser, live_server, user, platform, save, run):
    """Ctrl on Linux and Windows, ⌘ on macOS, told apart by the browser's platform."""
    from playwright.sync_api import expect

    from suites.services import create_suite

    suite = create_suite(owner=user, source=SUITE)
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    if platform == "mac":
        context.add_init_script(MAC)
    page = context.new_page()
    try:
        log_in(page, user.username, PASSWORD)
        page.goto(f"/suites/{suite.public_id}/")
        expect(page.locator("button[data-save] kbd")).to_have_text(save)
        expect(page.locator("button[data-save-launch] kbd")).to_have_text(run)
        hints = page.locator("[data-keys]").all_inner_texts()
        assert hints and all(("⌘" in hint) == (platform == "mac") for hint in hints), hints
        assert all(("Ctrl" in hint) == (platform != "mac") for hint in hints), hints
    finally:
        context.close()
