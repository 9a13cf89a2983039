"""Every surface lists a suite's problems in line order: the API, the editor, an upload and evalvalidate."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.engine.test_engine_problems import IN_LINE_ORDER, OUT_OF_ORDER


@pytest.mark.django_db
def test_the_api_lists_problems_in_line_order(client, user):
    client.force_login(user)
    response = client.post(reverse("api:validate"), {"source": OUT_OF_ORDER}, content_type="application/json")
    problems = response.json()["problems"]
    assert [(p["line"], p["column"], p["path"]) for p in problems] == IN_LINE_ORDER


@pytest.mark.django_db
def test_the_editor_lists_problems_in_line_order(client, user):
    client.force_login(user)
    body = client.post(reverse("suites:validate"), {"source": OUT_OF_ORDER}, HTTP_HX_REQUEST="true")
    text = body.content.decode()
    shown = [text.index(f'data-line="{line}" data-column="{column}"') for line, column, _ in IN_LINE_ORDER]
    assert shown == sorted(shown)


@pytest.mark.django_db
def test_an_upload_lists_problems_in_line_order(client, user):
    client.force_login(user)
    upload = SimpleUploadedFile("suite.yaml", OUT_OF_ORDER.encode(), content_type="application/x-yaml")
    text = client.post(reverse("suites:upload"), {"file": upload}).content.decode()
    shown = [text.index(f'data-line="{line}" data-column="{column}"') for line, column, _ in IN_LINE_ORDER]
    assert shown == sorted(shown)


@pytest.mark.django_db
def test_the_cli_lists_problems_in_line_order(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(OUT_OF_ORDER)
    stderr = io.StringIO()
    with pytest.raises((CommandError, SystemExit)):
        call_command("evalvalidate", str(path), stderr=stderr, stdout=io.StringIO())
    lines = [line for line in stderr.getvalue().splitlines() if line.startswith(f"{path}:")]
    assert [line.split(" ")[1].rstrip(":") for line in lines] == [path for _, _, path in IN_LINE_ORDER]
