"""In a real browser, by the keyboard: a zip of a project on the Import page, every suite in it shown with
what it lost first, and Create all saving them in one step. Screenshot in test-artifacts/."""

from __future__ import annotations

import re

import pytest

from engine.imports.tree import read_paths
from suites.models import Suite
from tests.e2e.conftest import PASSWORD, log_in, screenshot
from tests.engine.test_import_folders import BAD_VIBECHECK, project, zipped

pytestmark = [pytest.mark.browser]


def test_a_project_zip_imports_every_suite_from_the_keyboard(page, watch, user, tmp_path):
    from playwright.sync_api import expect

    tree = read_paths([project(tmp_path / "proj")])
    entries = {f"proj/{path}": text.encode() for path, text in tree.files.items()}
    entries["proj/checks/bad.yaml"] = BAD_VIBECHECK.encode()
    archive = tmp_path / "proj.zip"
    archive.write_bytes(zipped(entries))

    log_in(page, user.username, PASSWORD)
    page.goto("/suites/import/")
    page.locator("input[name=files]").first.set_input_files(str(archive))
    page.get_by_role("button", name="Convert").focus()
    page.keyboard.press("Enter")

    expect(page.locator("#import-batch h2")).to_have_text("5 suites found")
    alert = page.get_by_role("alert").filter(has_text="could not be carried over")
    expect(alert).to_contain_text(
        "2 things that graded or drove a conversation"
    )  # the bad check, the memory grader
    lost = page.locator(".import-lost li")
    expect(lost).to_have_count(2)
    expect(lost.filter(has_text="bad.yaml")).to_have_text(
        re.compile(r"^proj/checks/bad\.yaml:4 evals\[0\]\.checks\[0\]\.max_tokens: expected a whole number")
    )
    expect(page.get_by_role("heading", name="proj/evals/support-bot.eval.yaml — AgentV")).to_be_visible()
    # The details open from the keyboard too: what each suite became is there to read before saving.
    summary = page.locator("#import-suite-1 summary").filter(has_text="The suite YAML")
    summary.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#import-suite-1 pre")).to_contain_text("name:")
    screenshot(page, "import-project-zip.png")
    assert not Suite.objects.exists()

    create = page.get_by_role("button", name="Create all 5")
    create.focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("Suites")
    expect(page.locator(".flash")).to_contain_text("Imported 5 suites")
    assert Suite.objects.filter(owner=user).count() == 5
    watch.check()
