"""In a real browser: a calibration run's result page, with its figures, the confusion heatmap, the sample
table worst first, a sample's conversation one click away, and the filters. The run is played in this process
(runs.worker.pump.execute) against the fake OpenAI server. Screenshot in test-artifacts/."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runs.services import create_run
from runs.worker.pump import execute
from suites.services import create_suite
from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.e2e.test_e2e_calibration import ANSWERS, SET

pytestmark = [pytest.mark.browser]


def test_the_calibration_page_shows_figures_heatmap_and_filters(
    page,  # noqa: F811
    watch,  # noqa: F811
    user,
    fake_endpoint,
    fake_openai,
):
    from playwright.sync_api import expect

    for model, answers in ANSWERS.items():
        for reply, score in answers.items():
            fake_openai.rule(
                reply, f'{{"score": {score}, "reason": "{model} says {score}"}}', where="any", model=model
            )
    run = create_run(version=create_suite(owner=user, source=SET).latest_version, user=user)
    for conversation in run.conversations.order_by("index", "iteration"):
        execute(conversation.pk)

    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:detail", args=[run.pk]))
    page.get_by_role("link", name="Calibration figures").click()
    careful, sloppy = page.locator(".cal-judge").all()
    expect(careful.locator(".cal-metrics div").first.locator("dd")).to_have_text("75%")
    # The heatmap: careful put "Whatever." (expected -1) at -2 twice, the rest on the diagonal.
    heat = careful.locator("table.heatmap")
    expect(heat.locator("tbody tr").nth(2).locator("td").nth(1)).to_have_text("2")  # row -1, column -2
    expect(heat.locator("td.is-diagonal.heat-10")).to_have_count(3)  # 3, -2 and 2: twice each, the most
    # Worst first: sloppy's first row is "Whatever.", off by 4; its conversation opens on click.
    first = sloppy.locator(".cal-samples tbody tr").first
    expect(first.locator("td").first).to_contain_text("samples[3]")
    expect(first.locator(".bubble").first).to_be_hidden()
    first.locator("summary").click()
    expect(first.locator(".bubble-assistant")).to_have_text("Whatever.")
    screenshot(page, "browser-calibration.png")

    page.get_by_label("Disagreements only").check()
    page.get_by_role("combobox", name="Tag").select_option("math")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"only=disagreements&tag=math"))  # the filters live in the URL
    rows = page.locator(".cal-judge").nth(1).locator(".cal-samples tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("samples[1]")
    watch.check()
