"""Attached files obey one set of rules (engine.attached) whichever way they come in: POST /api/runs with
`files` refuses what the editor refuses (a name with a folder or `..`, a file over 20 MB, too many files),
with the same words, and stores nothing. A name that would break a page can no longer be stored, and the
migration renames any stored before."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.test import Client
from django.urls import reverse

from engine.attached import MAX_FILE_BYTES, MAX_FILES, NAME_RULE, read_suite_files
from engine.source import SuiteError
from runs.tokens import create_token
from suites.models import Suite, SuiteFile, content_hash
from suites.services import create_suite, save_version
from tests.factories import bearer

pytestmark = pytest.mark.django_db

SUITE = """\
name: with-files
model: mock
mock: {rules: [{when: "*", reply: "fine"}]}
evals:
  - {id: one, prompt: hi, checks: [{match: "*"}]}
"""
# Names a client can put in a JSON object: folders, traversal, hidden files, characters an address or a
# shell reads, control characters, other scripts, the empty name and one past the length.
HOSTILE_NAMES = [
    "../../etc/passwd",
    "a/../b.jsonl",
    "/etc/passwd",
    "..",
    ".",
    ".env",
    "dir/x.md",
    "a\\b.md",
    "C:\\x.md",
    "x.md\x00",
    "a\nb.md",
    "space name.md",
    "%2e%2e%2fpasswd",
    "<script>.md",
    "what?.md",
    "#x.md",
    "-rf",
    "r\u00e9sum\u00e9.md",
    "\u202etxt.md",
    "",
    "x" * 201,
]


@pytest.fixture
def api(user):
    _, token = create_token(user, "ci")
    return Client(enforce_csrf_checks=True), token


def launch(api, files: dict[str, str]):
    client, token = api
    body = {"yaml": SUITE, "files": files}
    return client.post("/api/runs", body, content_type="application/json", **bearer(token))


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_the_api_refuses_a_file_name_the_editor_refuses(api, name):
    response = launch(api, {name: "x", "ok.md": "fine"})
    assert response.status_code == 422, response.content
    problems = response.json()["problems"]
    assert {"line": 0, "column": 0, "path": "", "message": NAME_RULE, "file": name} in problems
    assert not Suite.objects.exists() and not SuiteFile.objects.exists()


def test_the_api_refuses_a_file_over_20_mb(api):
    response = launch(api, {"big.jsonl": "x" * (MAX_FILE_BYTES + 1)})
    assert response.status_code == 422
    assert response.json()["problems"][0] == {
        "line": 0, "column": 0, "path": "", "message": "larger than 20 MB", "file": "big.jsonl"
    }  # fmt: skip
    assert not SuiteFile.objects.exists()


def test_a_25_mb_file_is_refused_by_the_file_rule_even_where_requests_may_be_larger(api, settings):
    settings.EVALSITE_MAX_UPLOAD_BYTES = 60_000_000
    response = launch(api, {"big.jsonl": "x" * 25_000_000})
    assert response.status_code == 422
    assert "larger than 20 MB" in [problem["message"] for problem in response.json()["problems"]]
    assert not SuiteFile.objects.exists()


def test_the_api_refuses_more_files_than_a_suite_may_have(api):
    response = launch(api, {f"part{n}.md": "x" for n in range(MAX_FILES + 1)})
    assert response.status_code == 422
    assert (
        response.json()["problems"][-1]["message"]
        == f"{MAX_FILES + 1} attached files; a suite has at most {MAX_FILES}"
    )
    assert not SuiteFile.objects.exists()


def test_the_api_still_stores_good_files(api):
    response = launch(api, {"notes.md": "fine", "rows_2.v1-final.jsonl": "{}"})
    assert response.status_code == 201, response.content
    assert sorted(SuiteFile.objects.values_list("name", flat=True)) == ["notes.md", "rows_2.v1-final.jsonl"]


@pytest.mark.parametrize("name", ["../notes.md", "sub/notes.md", "my notes.md", ".notes.md", "n\u00f6tes.md"])
def test_every_way_in_gives_the_same_problem(api, user, tmp_path, name):
    """The API, a save (the editor, Import) and the CLI (which reads the suite's folder, and sends what it
    read to the API with --server) refuse the name with the same words."""
    suite_file = tmp_path / "suite.yaml"
    source = SUITE.replace(
        "{id: one, prompt: hi,",
        f"{{id: one, messages: [{{role: user, content: [{{type: file, value: {name!r}}}]}}],",
    )
    suite_file.write_text(source)
    with pytest.raises(SuiteError) as cli:
        read_suite_files(suite_file, source)
    with pytest.raises(SuiteError) as saved:
        create_suite(owner=user, source=source, files={name: "text"})
    client, token = api
    response = client.post(
        "/api/runs",
        {"yaml": source, "files": {name: "text"}},
        content_type="application/json",
        **bearer(token),
    )
    api_problems = [f"{p['file']}: {p['message']}" for p in response.json()["problems"]]
    expected = f"{name}: {NAME_RULE}"
    assert (
        [str(p) for p in cli.value.problems]
        == [str(p) for p in saved.value.problems]
        == api_problems
        == [expected]
    )


def test_the_migration_renames_stored_names_that_break_pages(logged_in, user):
    suite = create_suite(owner=user, source=SUITE)
    version = save_version(suite=suite, source=SUITE + "# v2\n", user=user, files={"passwd": "kept"})
    # As the API stored them before it applied the rules.
    SuiteFile.objects.bulk_create(
        SuiteFile(version=version, name=name, content="x", size=1)
        for name in ("../../etc/passwd", "a/../b.jsonl", "my file.md")
    )
    page = reverse("suites:version", args=[suite.public_id, version.number])
    broken = Client(raise_request_exception=False)
    broken.force_login(user)
    assert broken.get(page).status_code == 500  # NoReverseMatch: the download link's name has a '/'

    migration = importlib.import_module("suites.migrations.0004_safe_file_names")
    migration.rename_unsafe(apps, None)

    names = {file.name: file.content for file in SuiteFile.objects.filter(version=version)}
    assert names == {"passwd": "kept", "passwd-2": "x", "b.jsonl": "x", "my-file.md": "x"}
    response = logged_in.get(page)
    assert response.status_code == 200
    for name in names:
        assert (
            reverse("suites:version_file", args=[suite.public_id, version.number, name])
            in response.content.decode()
        )
    version.refresh_from_db()
    assert version.sha256 == content_hash(version.source, version.file_map())
    assert version.source == SUITE + "# v2\n"  # the YAML is the record of what was saved: left as it was
