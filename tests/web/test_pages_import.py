"""The import page (/suites/import/): upload or paste a vibecheck, Letta Evals or AgentV file, preview the
conversion with what it could not map, and create the suite with its files."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from engine.imports import convert
from engine.loader import load_suite
from suites.models import Suite, SuiteFile, SuiteVersion
from tests.engine.import_fixtures import CALIBRATE_TOML, folder, one

URL = "/suites/import/"


def uploads(files: dict[str, str]) -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(name, text.encode()) for name, text in files.items()]


def form_fields(page: str) -> tuple[str, list[tuple[str, str]], str]:
    """What the preview's create form would send back: the textarea, the carried files, the report."""
    form = page[page.index('id="import-create"') :]
    form = form[: form.index("</form>")]
    source = html.unescape(re.search(r"<textarea[^>]*>\n?(.*?)</textarea>", form, re.DOTALL).group(1))
    names = [html.unescape(v) for v in re.findall(r'name="file_name\[\]" value="([^"]*)"', form)]
    contents = [html.unescape(v) for v in re.findall(r'name="file_content\[\]" value="([^"]*)"', form)]
    report = html.unescape(re.search(r'name="report" value="([^"]*)"', form).group(1))
    return source, list(zip(names, contents, strict=True)), report


@pytest.mark.django_db
def test_import_page_requires_login(client):
    assert reverse("suites:import") == URL
    for response in (client.get(URL), client.post(URL)):
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_get_shows_the_upload_form(logged_in):
    page = logged_in.get(URL).content.decode()
    assert 'enctype="multipart/form-data"' in page and 'name="csrfmiddlewaretoken"' in page
    assert re.search(r'<input type="file" name="files" multiple', page)
    assert '<option value="" selected>Auto-detect</option>' in page
    for kind in ("vibecheck", "letta", "agentv", "promptfoo", "agtlantis", "calibrate"):
        assert f'<option value="{kind}"' in page
    accepted = re.search(r'name="files" multiple\s+accept="([^"]*)"', page).group(1).split(",")
    assert {".ts", ".js", ".af", ".py", ".md", ".toml", ".jsonl", ".zip"} <= set(accepted)  # graders, configs
    intro = page[page.index("<h1>") : page.index("</p>")]
    for tool in ("vibecheck", "Letta Evals", "AgentV", "promptfoo", "agtlantis", "calibrate", "Bolt Foundry"):
        assert tool in intro, tool


@pytest.mark.django_db
def test_post_previews_the_conversion_with_what_was_not_converted(logged_in):
    response = logged_in.post(URL, {"files": uploads(folder("letta-per-turn")), "kind": ""})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Detected: Letta Evals" in page
    unmapped = page[page.index('id="import-unmapped"') :]
    unmapped = unmapped[: unmapped.index("</section>")]
    assert "Not converted (6)" in unmapped
    assert "graders.remembers_name" in unmapped and "num_runs" not in unmapped
    assert "num_runs: 3 → iterations: 3" in page
    assert "graders.answer_check (tool contains, extractor last_assistant) → grader: contains" in page
    assert "Valid — 4 evals" in page
    source, files, _ = form_fields(page)
    assert source.startswith("# Imported from Letta Evals suite.yaml") and "grader: contains" in source
    assert [name for name, _ in files] == ["dataset.jsonl"]
    assert files[0][1] == convert(folder("letta-per-turn")).files["dataset.jsonl"]  # escaped and back
    assert not Suite.objects.exists()


@pytest.mark.django_db
def test_create_makes_the_suite_with_its_version_and_files(logged_in, user):
    page = logged_in.post(URL, {"files": uploads(folder("letta-multi-grader"))}).content.decode()
    source, files, report = form_fields(page)
    response = logged_in.post(
        URL,
        {
            "action": "create",
            "kind": "letta",
            "report": report,
            "source": source.replace("\n", "\r\n"),  # as browsers send textareas
            "file_name[]": [name for name, _ in files],
            "file_content[]": [content.replace("\n", "\r\n") for _, content in files],
        },
    )
    suite = Suite.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("suites:detail", args=[suite.public_id])
    assert (suite.name, suite.owner) == ("ascii-art-multi-grader", user)
    version = suite.latest_version
    assert version.number == 1 and version.note == "imported from Letta Evals"
    assert version.source == source
    # the dataset and the judge's rubric file (Letta's prompt_path), attached to the version
    assert version.file_map() == convert(folder("letta-multi-grader")).files
    assert set(SuiteFile.objects.filter(version=version).values_list("name", flat=True)) == {
        "dataset.jsonl",
        "quality.md",
    }
    loaded = load_suite(version.source, files=version.file_map())
    assert len(loaded.evals) == 3 and list(loaded.graders) == ["quality", "ascii_only"]
    followed = logged_in.get(response["Location"]).content.decode()
    assert "Imported “ascii-art-multi-grader” from Letta Evals" in followed


@pytest.mark.django_db
def test_create_from_agentv_attaches_the_uploaded_files(logged_in):
    page = logged_in.post(URL, {"files": uploads(folder("agentv")), "kind": "agentv"}).content.decode()
    source, files, report = form_fields(page)
    response = logged_in.post(
        URL,
        {
            "action": "create",
            "kind": "agentv",
            "report": report,
            "source": source,
            "file_name[]": [n for n, _ in files],
            "file_content[]": [c for _, c in files],
        },
    )
    assert response.status_code == 302
    version = Suite.objects.get().latest_version
    assert version.file_map() == convert(folder("agentv")).files


@pytest.mark.django_db
def test_todays_agentv_file_imports_on_the_page_with_its_named_graders(logged_in):
    """Issue 14: today's AgentV format (tests / input / assertions) was refused; now it previews as valid
    and creates a suite whose rubric file and attachments are attached."""
    page = logged_in.post(URL, {"files": uploads(folder("agentv-today"))}).content.decode()
    assert "Detected: AgentV" in page and "Valid — 4 evals" in page
    assert "policy_script (code-grader) → a `code` check running `bun run check-policy.ts`" in html.unescape(
        page
    )
    source, files, report = form_fields(page)
    assert "rubric_file: refund-judge.md" in source
    response = logged_in.post(
        URL,
        {
            "action": "create",
            "kind": "",
            "report": report,
            "source": source,
            "file_name[]": [n for n, _ in files],
            "file_content[]": [c for _, c in files],
        },
    )
    assert response.status_code == 302
    version = Suite.objects.get().latest_version
    assert version.file_map() == convert(folder("agentv-today")).files
    loaded = load_suite(version.source, files=version.file_map())
    assert list(loaded.evals[0].graders) == [
        "refund_quality",
        "follows_policy",
        "mentions-window",
        "order-id",
        "policy_script",
    ]


@pytest.mark.django_db
def test_a_broken_edit_saves_nothing_and_shows_the_problems(logged_in):
    page = logged_in.post(URL, {"files": uploads(one("vibecheck/multi-turn.yaml"))}).content.decode()
    source, files, report = form_fields(page)
    broken = source.replace("      - match: '*105*'\n", "      - mach: '*105*'\n", 1)
    response = logged_in.post(
        URL, {"action": "create", "kind": "vibecheck", "report": report, "source": broken}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Not created: 1 problem to fix, nothing was saved." in page
    assert "unknown key `mach` (did you mean `match`?)" in page
    assert "mach: &#x27;*105*&#x27;" in page  # the user's text is kept, escaped
    assert "metadata.threads (4)" in page  # the report is still shown
    assert not Suite.objects.exists() and not SuiteVersion.objects.exists()


@pytest.mark.django_db
def test_missing_files_block_creating(logged_in):
    page = logged_in.post(URL, {"files": uploads(one("agentv/code-review.eval.yaml"))}).content.decode()
    needs = page[page.index('id="import-needs"') :]
    assert "calculate_total.js" in needs and "code-correctness-judge.md" in needs
    assert re.search(r'<button type="submit" class="btn btn-primary" disabled', page)
    source, _, report = form_fields(page)
    response = logged_in.post(URL, {"action": "create", "kind": "agentv", "report": report, "source": source})
    assert response.status_code == 400 and "upload the missing files" in response.content.decode()
    assert not Suite.objects.exists()


@pytest.mark.django_db
def test_bad_uploads_show_a_clear_message_not_a_traceback(logged_in):
    for files, message in [
        ({}, "paste the suite, or choose its files"),
        ({"notes.yaml": "title: Meeting notes\n"}, "this is not a format Import knows"),
        ({"suite.yaml": "metadata: [oops\n"}, "suite.yaml is not valid YAML"),
    ]:
        response = logged_in.post(URL, {"files": uploads(files)})
        assert response.status_code == 400
        assert message in html.unescape(response.content.decode())
    latin1 = SimpleUploadedFile("suite.yaml", "name: café\n".encode("latin-1"))
    response = logged_in.post(URL, {"files": [latin1]})
    assert (
        response.status_code == 400 and "is not UTF-8 text (byte 0xe9 on line 1)" in response.content.decode()
    )
    response = logged_in.post(URL, {"files": uploads(one("vibecheck/multi-turn.yaml")), "kind": "letta"})
    assert (
        response.status_code == 400
        and "is a vibecheck file, not a Letta Evals one" in response.content.decode()
    )


@pytest.mark.django_db
def test_everything_from_the_file_is_escaped(logged_in):
    hostile = (
        'metadata:\n  name: "<script>alert(\'name\')</script>"\n  model: mock\n  threads: "<img src=x onerror=alert(1)>"\n'
        'evals:\n  - prompt: "</textarea><script>alert(2)</script>"\n    checks: [{match: "*"}]\n'
    )
    page = logged_in.post(URL, {"files": uploads({"x.yaml": hostile})}).content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page and "</textarea><script>" not in page
    assert "&lt;script&gt;alert(" in page


@pytest.mark.django_db
def test_the_import_reports_a_taken_name(logged_in, user):
    from suites import services

    services.create_suite(owner=user, source=convert(one("vibecheck/multi-turn.yaml")).source)
    page = logged_in.post(URL, {"files": uploads(one("vibecheck/multi-turn.yaml"))}).content.decode()
    source, _, report = form_fields(page)
    response = logged_in.post(URL, {"action": "create", "report": report, "source": source})
    assert response.status_code == 400
    assert "this project already has a suite named" in html.unescape(response.content.decode())
    assert Suite.objects.count() == 1


@pytest.mark.django_db
def test_every_form_posts_with_a_csrf_token(user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get(URL).content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 2  # the upload form and the log-out form
    refused = client.post(URL, {"files": uploads(one("vibecheck/multi-turn.yaml"))})
    assert refused.status_code == 403


@pytest.mark.django_db
def test_files_too_large_to_carry_are_uploaded_again_to_create(logged_in, settings):
    # The YAML (7 KB) and the report (3 KB) fit in a request; with the dataset (1 KB) as well they are over
    # the share of it the page carries (0.8).
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 12000
    page = logged_in.post(URL, {"files": uploads(folder("letta-rubric"))}).content.decode()
    source, files, report = form_fields(page)
    assert files == [] and "Select the same files again" in page
    response = logged_in.post(
        URL,
        {
            "action": "create",
            "kind": "letta",
            "report": report,
            "source": source,
            "files": uploads(folder("letta-rubric")),
        },
    )
    assert response.status_code == 302
    assert Suite.objects.get().latest_version.file_map() == convert(folder("letta-rubric")).files


# --- pasting instead of uploading ----------------------------------------------------------------------------


def test_get_offers_a_paste_box(logged_in):
    page = logged_in.get(URL).content.decode()
    assert re.search(r'<textarea name="pasted"', page)
    assert not re.search(r'<input type="file" name="files"[^>]*required', page)  # either one will do


@pytest.mark.django_db
def test_a_pasted_suite_converts_like_the_uploaded_file(logged_in):
    text = one("vibecheck/multi-turn.yaml")["multi-turn.yaml"]
    uploaded = logged_in.post(URL, {"files": uploads(one("vibecheck/multi-turn.yaml"))}).content.decode()
    response = logged_in.post(URL, {"pasted": text.replace("\n", "\r\n"), "kind": ""})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Detected: vibecheck" in page and "Valid — " in page

    def report(page: str) -> dict:
        return json.loads(form_fields(page)[2])

    assert report(page) == report(uploaded)  # the same converter: the same mapped and unmapped lines
    assert form_fields(page)[0].split("\n", 1)[1] == form_fields(uploaded)[0].split("\n", 1)[1]
    source, files, carried = form_fields(page)
    created = logged_in.post(
        URL, {"action": "create", "kind": "vibecheck", "source": source, "report": carried}
    )
    assert created.status_code == 302 and Suite.objects.count() == 1


@pytest.mark.django_db
def test_a_pasted_letta_suite_says_its_dataset_file_must_be_uploaded(logged_in):
    suite_yaml = folder("letta-per-turn")["suite.yaml"]
    response = logged_in.post(URL, {"pasted": suite_yaml, "kind": ""})
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "The pasted suite names the dataset `dataset.jsonl`, which was not uploaded" in page
    assert "Choose it under “Files it needs” below and convert again" in page
    assert suite_yaml.strip() in page  # the pasted text is still in the box
    assert not Suite.objects.exists()
    # Pasted again with the dataset chosen: converted, with the dataset attached.
    dataset = {"dataset.jsonl": folder("letta-per-turn")["dataset.jsonl"]}
    both = logged_in.post(URL, {"pasted": suite_yaml, "files": uploads(dataset)})
    assert both.status_code == 200
    page = both.content.decode()
    assert "Detected: Letta Evals" in page and "Valid — 4 evals" in page
    assert [name for name, _ in form_fields(page)[1]] == ["dataset.jsonl"]


@pytest.mark.django_db
def test_nothing_pasted_or_chosen_is_a_clear_message(logged_in):
    response = logged_in.post(URL, {"pasted": "  \n", "kind": ""})
    assert response.status_code == 400
    assert "paste the suite, or choose its files" in response.content.decode()


@pytest.mark.django_db
def test_a_pasted_calibrate_file_converts_in_the_web(logged_in):
    response = logged_in.post(URL, {"pasted": CALIBRATE_TOML, "kind": ""})
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "Detected: calibrate" in page and "Valid — " in page


NAN_TOKENS = "evals:\n  - prompt: hi\n    checks: [{max_tokens: .nan}, {match: '*hi*'}]\n"


@pytest.mark.django_db
def test_hostile_values_are_a_listed_loss_or_a_located_error_never_a_500(logged_in):
    response = logged_in.post(URL, {"files": uploads({"nan.yaml": NAN_TOKENS})})
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "evals[0].checks[0].max_tokens: expected a whole number of tokens, got NaN; left out" in page
    letta = folder("letta-per-turn")
    letta["suite.yaml"] = letta["suite.yaml"].replace("function: contains", "function: [contains]")
    letta["suite.yaml"] = letta["suite.yaml"].replace("extractor: memory_block", "extractor: {}")
    response = logged_in.post(URL, {"files": uploads(letta)})
    assert response.status_code == 400
    assert "suite.yaml: no grader of this suite has an evalsite equivalent" in html.unescape(
        response.content.decode()
    )


@pytest.mark.django_db
def test_a_loss_is_shown_first_at_its_line_and_kept_through_a_failed_create(logged_in):
    lossy = "evals:\n  - prompt: hi\n    checks:\n      - max_tokens: .nan\n      - match: '*hi*'\n"
    page = logged_in.post(URL, {"files": uploads({"lossy.yaml": lossy})}).content.decode()
    lost = page[page.index('id="import-lost"') :]
    lost = lost[: lost.index("</section>")]
    assert 'role="alert"' in lost and "Lost (1)" in lost
    assert "lossy.yaml:4 evals[0].checks[0].max_tokens: expected a whole number of tokens" in lost
    assert page.index('id="import-lost"') < page.index('id="import-unmapped"')
    _, _, report = form_fields(page)
    failed = logged_in.post(URL, {"action": "create", "report": report, "source": "name: [\n"})
    assert (
        failed.status_code == 400 and "lossy.yaml:4 evals[0].checks[0].max_tokens" in failed.content.decode()
    )


@pytest.mark.django_db
def test_a_bolt_foundry_deck_folder_becomes_a_calibration_set_with_its_samples_attached(logged_in):
    """The page sends file names without their folders; the deck still finds its card and samples, and the
    saved set reads its samples from the attached file, as the server runs it."""
    from tests.engine.test_imports_boltfoundry import DECK_TEXT, fixture_files

    flat = {path.rsplit("/", 1)[-1]: text for path, text in fixture_files().items()}
    page = logged_in.post(URL, {"files": uploads(flat)}).content.decode()
    assert "Detected: calibrate" in html.unescape(page) and "Valid — " in html.unescape(page)
    source, files, report = form_fields(page)
    response = logged_in.post(
        URL,
        {
            "action": "create",
            "kind": "",
            "report": report,
            "source": source,
            "file_name[]": [n for n, _ in files],
            "file_content[]": [c for _, c in files],
        },
    )
    assert response.status_code == 302
    version = Suite.objects.get().latest_version
    assert list(version.file_map()) == ["support-tone.samples.jsonl"]
    loaded = load_suite(version.source, files=version.file_map())
    assert loaded.calibration.spec.judge.criteria == DECK_TEXT
    assert len(loaded.calibration.samples) == 6


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "given", "detected"),
    [
        (
            "agtlantis",
            {
                "booking.eval.yaml": "agtlantis/booking.eval.yaml",
                "agent-eval.config.ts": "agtlantis/agent-eval.config.ts",
            },
            "Detected: agtlantis",
        ),
        ("calibrate", None, "Detected: calibrate (Bolt Foundry)"),
    ],
)
def test_the_tools_added_to_written_for_convert_when_chosen(logged_in, kind, given, detected):
    from tests.engine.import_fixtures import FIXTURES

    if given is None:
        data = {"pasted": CALIBRATE_TOML, "kind": kind}
    else:
        files = {name: (FIXTURES / path).read_text() for name, path in given.items()}
        data = {"files": uploads(files), "kind": kind}
    response = logged_in.post(URL, data)
    page = html.unescape(response.content.decode())
    assert response.status_code == 200, page
    assert detected in page and "Valid — " in page
