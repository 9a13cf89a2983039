"""In a real browser, with a real worker: launch a matrix of two models from the launch form, watch its grid
fill in, open a cell's transcript, tick two cells to see them side by side; axe-core checks the page.
Screenshots in test-artifacts/; with UPDATE_DOCS_SCREENSHOT=1 the grid also replaces docs/matrix.png, which the
README shows."""

from __future__ import annotations

import os
import re
import time

import pytest
from django.urls import reverse

from tests.conftest import ROOT
from tests.e2e.conftest import ARTIFACTS, PASSWORD, log_in, screenshot
from tests.e2e.test_browser_a11y import AXE_JS, FAILING_IMPACTS, _axe, _axe_or_skip

pytestmark = [pytest.mark.browser]

SUITE = """\
name: capitals
model: fake/good
evals:
  - {id: australia, prompt: What is the capital of Australia?, checks: [{contains: Canberra}]}
  - {id: france, prompt: What is the capital of France?, checks: [{contains: Paris}]}
  - {id: narnia, prompt: What is the capital of Narnia?, checks: [{contains: Cair Paravel}]}
"""


def test_launch_a_matrix_read_its_grid_and_compare_two_cells(
    page, watch, user, fake_endpoint, fake_openai, start_worker
):
    from playwright.sync_api import expect

    from runs.models import RunMatrix
    from suites.services import create_suite

    _axe_or_skip()
    fake_openai.latency = 0.2  # slow enough that the grid is seen filling in
    fake_openai.rule("Australia", "Canberra.", model="good")
    fake_openai.rule("Australia", "Sydney.", model="bad")
    fake_openai.rule("France", "Paris.")
    suite = create_suite(owner=user, source=SUITE)
    start_worker()
    page.context.add_init_script(path=str(AXE_JS))

    log_in(page, user.username, PASSWORD)
    page.goto(reverse("suites:detail", args=[suite.public_id]))
    launch = page.locator("#launch")
    expect(launch.locator("#launch-limit-each")).to_be_empty()  # one run: its limit is its own
    launch.get_by_label("Compare with").fill("fake/bad")
    # A run per variant, each with the cost limit of its own: said beside the field once a variant is named.
    expect(launch.locator("#launch-limit-each")).to_have_text(
        "With 2 variants, each variant's run has this limit of its own: together they may spend 2 times it."
    )
    launch.screenshot(path=str(ARTIFACTS / "browser-matrix-launch.png"))
    launch.get_by_role("button", name="Launch").click()
    expect(page).to_have_url(re.compile(r"/matrices/[0-9a-f-]{36}/$"))
    matrix = RunMatrix.objects.get()
    assert [run.model for run in matrix.runs.order_by("created_at")] == ["fake/good", "fake/bad"]

    # The grid follows the runs until both have ended, then stops polling.
    expect(page.locator(".matrix-progress")).to_contain_text("6 of 6 conversations ended")
    expect(page.locator("#matrix-body")).not_to_have_attribute("hx-get", re.compile(".*"))
    rows = page.locator(".matrix-grid tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("australia")  # the one eval the models disagree on comes first
    expect(rows.first).to_contain_text("differs")
    expect(page.locator(".matrix-summary")).to_contain_text("67% [21%–94%]")
    expect(page.locator(".matrix-summary")).to_contain_text("33% [6%–79%]")
    screenshot(page, "browser-matrix.png")
    if os.environ.get("UPDATE_DOCS_SCREENSHOT"):  # the README's picture of a matrix
        page.screenshot(path=str(ROOT / "docs" / "matrix.png"))
    failing = [v for v in _axe(page) if v["impact"] in FAILING_IMPACTS]
    assert not failing, failing

    # A cell opens its transcript.
    rows.first.get_by_role("link", name="FAIL").click()
    expect(page.locator("h1")).to_contain_text("australia")
    expect(page.locator("body")).to_contain_text("Sydney.")
    page.go_back()

    # Two cells of one eval, side by side: the good model's reply on the left.
    page.get_by_label("choose australia on fake/good").check()
    page.get_by_label("choose australia on fake/bad").check()
    page.get_by_role("button", name="Compare the two chosen cells").click()
    expect(page).to_have_url(re.compile(r"/compare/.+/e/australia/$"))
    expect(page.locator(".compare-turn")).to_have_count(1)
    expect(page.locator("body")).to_contain_text("Canberra.")
    screenshot(page, "browser-matrix-compare.png")
    watch.check()


def test_a_live_matrix_keeps_the_ticked_cells_the_chosen_runs_and_the_keyboards_place_as_it_refreshes(
    page, watch, user, fake_endpoint, fake_openai, start_worker
):
    """The grid of a running matrix is redrawn every 2 s; what the user has chosen meanwhile, and the control
    the keyboard is on, are kept."""
    from playwright.sync_api import expect

    from engine.matrix import parse_variants
    from runs.matrix import create_matrix
    from suites.services import create_suite

    fake_openai.latency = 1.0  # one conversation at a time, 10 a variant: the matrix runs for 10 s
    more = "".join(
        f"  - {{id: city{n}, prompt: Name a city ({n}), checks: [{{contains: a}}]}}\n" for n in range(7)
    )
    suite = create_suite(owner=user, source=SUITE + more)
    matrix = create_matrix(
        version=suite.latest_version,
        user=user,
        variants=parse_variants(["fake/good,fake/bad"]),
        concurrency=1,
    )
    start_worker(concurrency=1)
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("matrices:detail", args=[matrix.pk]))
    expect(page.locator("#matrix-body[hx-get]")).to_have_count(1)
    page.evaluate(  # the grid it replaces is gone after each swap: counted before, on the body
        "window.swaps = 0; document.body.addEventListener('htmx:beforeSwap', () => { window.swaps += 1 })"
    )
    first, second = (page.get_by_label(f"choose narnia on fake/{model}") for model in ("good", "bad"))
    first.check()
    second.check()
    page.locator("#matrix-compare-a").select_option(label="fake/bad")
    second.focus()
    deadline = time.monotonic() + 15  # the page's CSP has no unsafe-eval, which wait_for_function needs
    while page.evaluate("window.swaps") < 2 and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert page.evaluate("window.swaps") >= 2
    page.wait_for_timeout(300)  # the second refresh swapped in
    expect(page.locator("#matrix-body[hx-get]")).to_have_count(1)  # still live: these were refreshes
    expect(first).to_be_checked()
    expect(second).to_be_checked()
    expect(page.locator("#matrix-compare-a")).to_have_value(str(matrix.runs.order_by("created_at")[1].pk))
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "choose narnia on fake/bad"
    watch.check()
