"""In a real browser: a simulated transcript's stop-condition lines, the judge's reason and the simulated user's
prompt one click away. Screenshots land in test-artifacts/.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.web.test_pages_stop_when import QUESTION, asked, make_conversation, records

pytestmark = [pytest.mark.browser]


def test_stop_conditions_and_the_simulated_users_prompt_open_on_click(page, watch, user):  # noqa: F811
    from playwright.sync_api import expect

    run = make_conversation(
        user,
        records(
            [
                asked(0.1, "Nothing is booked yet.", '{"score": 0.1, "reason": "Nothing is booked yet."}'),
                asked(0.35, "The agent still needs a name.", '{"score": 0.35}'),
                asked(0.91, "The agent confirmed the booking.", '{"score": 0.91}'),
            ]
        ),
    )
    log_in(page, user.username, PASSWORD)
    page.goto(reverse("runs:conversation", args=[run.pk, 0]))
    second = page.locator("#turn-2")
    expect(second.locator(".condition-line")).to_have_text(
        f"stop_when · {QUESTION} → no (0.35 < 0.70)", use_inner_text=True
    )
    reason = second.locator(".conditions details")
    expect(reason.locator(".condition-reason")).to_be_hidden()
    reason.locator("summary").click()
    expect(reason.locator(".condition-reason")).to_have_text("The agent still needs a name.")

    call = second.locator(".sim-call")
    expect(call.locator("pre").first).to_be_hidden()
    call.locator("summary").click()
    expect(call.locator("pre").last).to_have_text('You: "<em>At 8pm</em>, turn 2"')
    expect(page.locator("#turn-3 .condition-line")).to_contain_text("→ yes (0.91 ≥ 0.70) — stopped")
    screenshot(page, "browser-stop-when.png")
    watch.check()
