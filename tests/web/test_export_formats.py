"""Every export format in engine.exports.FORMATS is served by the run page, its share link, the API and
`evalsite run`: a format added to the table is served everywhere, or these fail."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
from django.test import Client
from django.urls import reverse

from engine.exports import FORMATS, RunExport
from engine.results import RunReport
from evalsite import terminal
from evalsite.cli import main
from runs.services import create_run, create_share_link
from runs.tokens import create_token
from suites.services import create_suite
from tests.factories import MOCK_CI_SUITE, bearer, body, play

pytestmark = pytest.mark.django_db

SUITE = MOCK_CI_SUITE.format(name="exported")


@pytest.fixture
def run(user):
    return play(create_run(version=create_suite(owner=user, source=SUITE).latest_version, user=user))


def test_each_format_is_asked_for_on_the_command_line_or_written_beside_one_that_is():
    for entry in FORMATS.values():
        assert (entry.cli is None) != (entry.beside is None), entry.key
        if entry.beside:
            assert FORMATS[entry.beside].cli is not None, entry.key
    flags = [entry.cli.flag for entry in FORMATS.values() if entry.cli]
    assert len(set(flags)) == len(flags)
    assert len({entry.suffix for entry in FORMATS.values()}) == len(FORMATS)


@pytest.mark.parametrize("key", list(FORMATS))
def test_the_run_page_its_share_link_and_the_api_serve_each_format(key, client, user, run):
    entry = FORMATS[key]
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    url = reverse("runs:export", args=[run.pk, key])
    assert url in page and entry.label in page
    downloaded = client.get(url)
    assert downloaded.status_code == 200 and downloaded["Content-Type"] == entry.media_type
    assert downloaded["Content-Disposition"].endswith(f'.{entry.suffix}"')
    text = body(downloaded)
    assert text

    shared = client.get(reverse("share:export", args=[create_share_link(run, user).token, key]))
    assert shared.status_code == 200 and shared["Content-Type"] == entry.media_type and body(shared)

    _, token = create_token(user, "ci")
    served = Client().get(f"/api/runs/{run.pk}/results.{entry.suffix}", **bearer(token))
    assert served.status_code == 200 and served["Content-Type"] == entry.media_type
    assert body(served) == text  # the same text as the page's download


@pytest.mark.parametrize("key", list(FORMATS))
def test_evalsite_run_writes_each_format(key, tmp_path, monkeypatch):
    monkeypatch.setattr(terminal, "active", terminal.active)  # the command sets it; put it back after
    entry = FORMATS[key]
    asked = FORMATS[entry.beside] if entry.beside else entry
    target = tmp_path / f"export.{asked.suffix}"
    written = target.with_name(f"{target.stem}.{entry.suffix}") if entry.beside else target
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    results = tmp_path / "results.json"
    argv = ["run", str(suite), "--json", str(results), asked.cli.flag, str(target)]
    with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    named = {
        "junit": "JUnit XML report",
        "csv": "CSV of evals",
        "turns.csv": "CSV of turns",
        "md": "Markdown summary",
    }
    assert f"Wrote the {named[key]} to {written}\n" in out.getvalue()
    report = RunReport.model_validate(json.loads(results.read_text()))
    assert written.read_text(encoding="utf-8") == entry.text(RunExport.of_report(report))
