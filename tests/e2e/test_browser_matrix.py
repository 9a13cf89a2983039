"""In a real browser, with a real worker: launch a matrix of two models from the launch form, watch its grid
fill in, open a cell's transcript, tick two cells to see them side by side; axe-core checks the page.
Screenshots in test-artifacts/; with UPDATE_DOCS_SCREENSHOT=1 the grid also replaces docs/matrix.png, which the
README shows."""

from __future__ import annotations

import os
import re

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
    launch.get_by_label("Compare with").fill("fake/bad")
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
