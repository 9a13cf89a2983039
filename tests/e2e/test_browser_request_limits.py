"""In the editor, a request too large for the server is said where the request was aimed: the 413's line
appears in the problems panel as you type (htmx drops 4xx answers unless the page's config takes them), and
the panel keeps working once the text is small again."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import PASSWORD, log_in

pytestmark = [pytest.mark.browser]

SMALL = "name: small\nmodel: mock\nevals:\n  - prompt: hi\n    chekcs: []\n"


def test_a_refused_validation_is_shown_in_the_problems_panel(page, watch, user, settings):
    from playwright.sync_api import expect

    settings.EVALSITE_MAX_REQUEST_BYTES = settings.EVALSITE_MAX_UPLOAD_BYTES = 3000
    log_in(page, user.username, PASSWORD)
    page.goto("/suites/new/")
    problems = page.locator("#problems")
    page.locator("textarea[name=source]").fill(SMALL + "# " + "x" * 4000 + "\n")
    expect(problems).to_contain_text(
        re.compile(r"This request's body is 4,\d{3} bytes; this server accepts at most 3,000 bytes")
    )
    expect(problems).to_contain_text("Nothing was read or stored.")
    # The panel is still there for the next check.
    page.locator("textarea[name=source]").fill(SMALL)
    expect(problems).to_contain_text("unknown key `chekcs`")
    assert watch.failed == ["413 POST " + page.url.split("/suites/")[0] + "/suites/validate/"]
    assert not watch.errors
