"""The import page with several suites at once (suites/views/import_batch.py): a zip of a project or several
suite files, each suite's fate shown (losses first), and one Create all that saves every suite or none."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from engine.imports import convert
from engine.imports.tree import read_paths
from suites import services
from suites.models import Suite
from tests.engine.import_fixtures import CALIBRATE_TOML
from tests.engine.standalone import IMPORTS
from tests.engine.test_import_folders import BAD_VIBECHECK, project, zipped
from tests.web.test_pages_import import URL, uploads

pytestmark = pytest.mark.django_db


def project_zip(root: Path, extra: dict[str, str] | None = None) -> SimpleUploadedFile:
    """The project's files (as the CLI reads them), zipped with their folders under `proj/`."""
    tree = read_paths([project(root)])
    entries = {f"proj/{path}": text.encode() for path, text in tree.files.items()}
    entries.update({f"proj/{path}": text.encode() for path, text in (extra or {}).items()})
    entries["proj/logo.png"] = b"\x89PNG\0\0"
    return SimpleUploadedFile("proj.zip", zipped(entries), content_type="application/zip")


def carried(page: str) -> list[str]:
    form = page[page.index('id="import-create-all"') :]
    form = form[: form.index("</form>")]
    return [html.unescape(value) for value in re.findall(r'name="suite\[\]" value="([^"]*)"', form)]


def test_a_zip_of_a_project_shows_every_suite_and_creates_them_all_in_one_step(logged_in, user, tmp_path):
    page = logged_in.post(URL, {"files": [project_zip(tmp_path)]}).content.decode()
    assert "4 suites found" in page
    for origin in (
        "proj/multi-turn.yaml",
        "proj/evals/support-bot.eval.yaml",
        "proj/letta/per-turn/suite.yaml",
    ):
        assert f'<span class="mono">{origin}</span>' in page
    assert "Create all 4" in page and "disabled" not in page[page.index('id="import-create-all"') :][:2000]
    assert "Not read as a suite: proj/logo.png: binary, not read" in page
    assert not Suite.objects.exists()
    suites = carried(page)
    assert len(suites) == 4
    response = logged_in.post(URL, {"action": "create-all", "suite[]": suites})
    assert response.status_code == 302, response.content.decode()[:3000]
    names = set(Suite.objects.filter(owner=user).values_list("name", flat=True))
    assert names == {
        "tutor-multi-turn",
        "support-bot",
        "multiturn-per-turn-grading-test",
        "ascii-art-rubric-test",
    }
    agentv = Suite.objects.get(name="support-bot").latest_version
    assert agentv.note == "imported from AgentV (proj/evals/support-bot.eval.yaml)"
    assert set(agentv.file_map()) == {
        "support.instructions.md",
        "refund-judge.md",
        "order.txt",
        "check-policy.ts",
    }
    assert "Imported 4 suites" in logged_in.get(response["Location"]).content.decode()


def test_losses_are_shown_first_located_and_escaped(logged_in, tmp_path):
    extra = {"<b>bad</b>.yaml": BAD_VIBECHECK}
    page = logged_in.post(URL, {"files": [project_zip(tmp_path, extra)]}).content.decode()
    assert 'role="alert" id="import-lost-summary"' in page
    # the bad check here, and the Letta suite's grader of agent memory, which a chat model has not got
    assert "2 things that graded or drove a conversation could not be carried over" in page
    assert (
        "proj/&lt;b&gt;bad&lt;/b&gt;.yaml:4 evals[0].checks[0].max_tokens: expected a whole number of tokens"
        in page
    )
    assert "<b>bad</b>" not in page


def test_a_taken_name_saves_none_and_says_which(logged_in, user, tmp_path):
    page = logged_in.post(URL, {"files": [project_zip(tmp_path)]}).content.decode()
    suites = carried(page)
    multi_turn = (IMPORTS / "vibecheck" / "multi-turn.yaml").read_text()
    services.create_suite(owner=user, source=convert({"multi-turn.yaml": multi_turn}).source)
    response = logged_in.post(URL, {"action": "create-all", "suite[]": suites})
    assert response.status_code == 400
    text = html.unescape(response.content.decode())
    assert "Nothing was saved: 1 problem to fix." in text
    assert "proj/multi-turn.yaml: this project already has a suite named 'tutor-multi-turn'" in text
    assert Suite.objects.count() == 1


def test_two_suites_of_one_name_or_a_broken_one_save_none(logged_in, tmp_path):
    suites = carried(logged_in.post(URL, {"files": [project_zip(tmp_path)]}).content.decode())
    broken = json.dumps({**json.loads(suites[0]), "source": "name: broken\nevals: 3\n"})
    response = logged_in.post(URL, {"action": "create-all", "suite[]": [*suites[1:], broken, suites[1]]})
    assert response.status_code == 400
    text = html.unescape(response.content.decode())
    assert "as proj/evals/support-bot.eval.yaml is; suite names must differ" in text
    assert re.search(r"proj/multi-turn\.yaml: 2:\d+ evals: ", text)  # the broken one, located
    assert not Suite.objects.exists()
    garbage = logged_in.post(URL, {"action": "create-all", "suite[]": ["{not json"]})
    assert garbage.status_code == 400 and "did not come back whole" in garbage.content.decode()
    assert not Suite.objects.exists()


def test_several_suite_files_chosen_together_import_as_several(logged_in):
    files = {"a.yaml": BAD_VIBECHECK, "b.yaml": BAD_VIBECHECK.replace("hi", "hello")}
    page = logged_in.post(URL, {"files": uploads(files)}).content.decode()
    assert "2 suites found" in page and len(carried(page)) == 2


def test_a_suite_needing_files_blocks_create_all(logged_in):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.yaml", BAD_VIBECHECK)
        archive.writestr("evals/review.eval.yaml", (IMPORTS / "agentv" / "code-review.eval.yaml").read_text())
    upload = SimpleUploadedFile("p.zip", buffer.getvalue())
    page = logged_in.post(URL, {"files": [upload]}).content.decode()
    assert "Needs files:" in page and 'disabled aria-disabled="true">Create all 2' in page
    response = logged_in.post(URL, {"action": "create-all", "suite[]": carried(page)})
    assert response.status_code == 400 and "Nothing was saved" in response.content.decode()
    assert not Suite.objects.exists()


@pytest.mark.parametrize("name", ["../evil.yaml", "/abs.yaml"])
def test_a_zip_leading_outside_is_refused_on_the_page(logged_in, name):
    upload = SimpleUploadedFile("p.zip", zipped({"a.yaml": BAD_VIBECHECK.encode(), name: b"x: 1\n"}))
    response = logged_in.post(URL, {"files": [upload]})
    assert response.status_code == 400 and "leads outside the zip" in html.unescape(response.content.decode())


def test_suites_too_large_to_carry_are_uploaded_again(logged_in, settings, tmp_path):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 6500
    page = logged_in.post(URL, {"files": [project_zip(tmp_path / "a")]}).content.decode()
    assert carried(page) == [] and "Select the same files again" in page
    response = logged_in.post(URL, {"action": "create-all", "files": [project_zip(tmp_path / "b")]})
    assert response.status_code == 302 and Suite.objects.count() == 4


def test_the_create_all_form_carries_a_csrf_token(logged_in, tmp_path):
    page = logged_in.post(URL, {"files": [project_zip(tmp_path)]}).content.decode()
    form = page[page.index('id="import-create-all"') :]
    assert 'name="csrfmiddlewaretoken"' in form[: form.index("</form>")]


def test_a_calibrate_file_in_a_zip_becomes_a_calibration_set_with_the_others(logged_in, user):
    upload = SimpleUploadedFile(
        "p.zip", zipped({"judge/samples.toml": CALIBRATE_TOML.encode(), "chat.yaml": BAD_VIBECHECK.encode()})
    )
    page = logged_in.post(URL, {"files": [upload]}).content.decode()
    assert "2 suites found" in page and "judge/samples.toml</span> — calibrate" in page
    samples = CALIBRATE_TOML.count("[[samples]]")
    assert f"a calibration set of {samples} sample{'s' if samples > 1 else ''}" in page  # not "evals"
    response = logged_in.post(URL, {"action": "create-all", "suite[]": carried(page)})
    assert response.status_code == 302
    assert Suite.objects.filter(owner=user).count() == 2


def test_more_suites_than_a_page_saves_at_once_are_refused_whole(logged_in, monkeypatch):
    from suites.views import import_upload

    monkeypatch.setattr(import_upload, "MAX_SUITES", 2)
    files = {f"s{n}.yaml": BAD_VIBECHECK.encode() for n in range(3)}
    response = logged_in.post(URL, {"files": [SimpleUploadedFile("p.zip", zipped(files))]})
    assert (
        response.status_code == 400
        and "3 suites were found; at most 2 at a time" in response.content.decode()
    )
    posted = logged_in.post(URL, {"action": "create-all", "suite[]": ["{}"] * 3})
    assert posted.status_code == 400 and "at most 2 suites at a time" in posted.content.decode()
    assert not Suite.objects.exists()


def test_a_zip_of_an_agentv_folder_of_cases_imports_them_and_lists_its_typescript_eval(logged_in, user):
    root = IMPORTS / "agentv-directory"
    entries = {
        f"proj/{p.relative_to(root).as_posix()}": p.read_bytes() for p in root.rglob("*") if p.is_file()
    }
    upload = SimpleUploadedFile("proj.zip", zipped(entries), content_type="application/zip")
    page = logged_in.post(URL, {"files": [upload]}).content.decode()
    assert "1 suite found, 1 not converted" in page
    assert "proj/evals/greeting.eval.ts: an AgentV eval written in TypeScript" in html.unescape(page)
    response = logged_in.post(URL, {"action": "create-all", "suite[]": carried(page)})
    assert response.status_code == 302, response.content.decode()[:3000]
    suite = Suite.objects.get(owner=user, name="directory-discovery")
    source = suite.versions.latest("number").source
    assert [ev["id"] for ev in yaml.safe_load(source)["evals"]] == [
        "add-greeting",
        "fix-null-check",
        "rename-user-field",
    ]


def test_a_skills_evals_files_of_one_skill_are_created_side_by_side(logged_in, user):
    """Three Agent Skills evals files of one skill in a zip: each a suite of its own name, all created."""
    root = IMPORTS / "agentv-skills-twice"
    entries = {
        f"proj/{path.relative_to(root)}": path.read_bytes() for path in root.rglob("*") if path.is_file()
    }
    upload = SimpleUploadedFile("proj.zip", zipped(entries), content_type="application/zip")
    page = logged_in.post(URL, {"files": [upload]}).content.decode()
    assert "3 suites found" in page and "suite names must differ" not in page

    response = logged_in.post(URL, {"action": "create-all", "suite[]": carried(page)})

    assert response.status_code == 302, response.content.decode()[:3000]
    assert set(Suite.objects.filter(owner=user).values_list("name", flat=True)) == {
        "csv-analyzer (proj/evals.json)",
        "csv-analyzer (proj/csv-analyzer.evals.json)",
        "csv-analyzer (proj/legacy/evals.json)",
    }
