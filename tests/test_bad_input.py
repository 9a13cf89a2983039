"""Bad suites through the page, the upload and the API: a clear, located error, and nothing saved."""

from __future__ import annotations

import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from suites.models import Suite, SuiteVersion
from suites.services import create_suite

GOOD = "name: keep-me\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"


def _nested(depth: int) -> str:
    lines = [
        "name: keep-me",
        "model: mock",
        "evals:",
        "  - prompt: level 0",
        "    checks:",
        "      - match: '*x*'",
    ]
    indent = "      "
    for level in range(1, depth + 1):
        lines += [f"{indent}- prompt: level {level}", f"{indent}  checks:", f"{indent}    - match: '*x*'"]
        indent += "    "
    return "\n".join(lines) + "\n"


BAD_TEXT = {
    "invalid YAML": ("name: keep-me\nevals: [\n", "invalid YAML", "line 3, col 1"),
    "wrong types": (
        GOOD.replace("prompt: hi", "prompt: [1, 2]"),
        "expected a string; found a list",
        "evals[0].prompt",
    ),
    "unknown key": (GOOD.replace("checks:", "chekcs:"), "did you mean `checks`", "evals[0].chekcs"),
    "depth 6": (
        _nested(6),
        "this one is level 6",
        "evals[0].checks[1].checks[1].checks[1].checks[1].checks[1].checks[1].prompt",
    ),
    "anchors": ("name: &n keep-me\nmodel: mock\nevals: []\n", "anchor &n is not allowed", "line 1, col 7"),
    "aliases": (GOOD + "judge: *n\n", "alias *n is not allowed", "line 7, col 8"),
}
BAD_BYTES = {
    "over 1 MB": (GOOD.encode() + b"#" * 1_000_001, "larger than 1 MB"),
    "not UTF-8": (b"name: caf\xe9\nmodel: mock\n", "not UTF-8: byte 0xe9 at offset 9"),
}


@pytest.fixture
def existing(user):
    """A suite whose version 1 must survive every bad save."""
    return create_suite(owner=user, source=GOOD)


def _unchanged(existing) -> None:
    assert list(SuiteVersion.objects.values_list("number", flat=True)) == [1]
    assert existing.latest_version.source == GOOD
    assert Suite.objects.count() == 1


def test_depth_5_is_fine():
    from engine.loader import load_suite

    assert load_suite(_nested(5)).evals[0].checks[0].kind == "match"


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_TEXT)
def test_bad_text_saved_from_the_editor(client, user, existing, case):
    source, message, where = BAD_TEXT[case]
    client.force_login(user)
    response = client.post(reverse("suites:detail", args=[existing.public_id]), {"source": source})
    body = html.unescape(response.content.decode())
    assert response.status_code == 400
    assert "nothing was stored" in body and "v1 is unchanged" in body
    assert message in body
    assert where in body
    _unchanged(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_TEXT)
def test_bad_text_as_a_new_suite(client, user, existing, case):
    client.force_login(user)
    response = client.post(reverse("suites:new"), {"source": BAD_TEXT[case][0]})
    assert response.status_code == 400
    _unchanged(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("case", [*BAD_TEXT, *BAD_BYTES])
def test_bad_file_uploaded(client, user, existing, case):
    data, message = (BAD_TEXT[case][0].encode(), BAD_TEXT[case][1]) if case in BAD_TEXT else BAD_BYTES[case]
    client.force_login(user)
    upload = SimpleUploadedFile("suite.yaml", data, content_type="application/x-yaml")
    response = client.post(reverse("suites:upload"), {"file": upload, "suite": existing.public_id})
    assert response.status_code == 400
    assert message in html.unescape(response.content.decode())
    _unchanged(existing)


@pytest.mark.django_db
def test_good_file_upload_makes_the_next_version(client, user, existing):
    client.force_login(user)
    upload = SimpleUploadedFile("suite.yaml", GOOD.replace("hi", "hello").encode(), content_type="text/yaml")
    response = client.post(reverse("suites:upload"), {"file": upload, "suite": existing.public_id})
    assert response.status_code == 302
    assert existing.latest_version.number == 2 and "hello" in existing.latest_version.source
    assert existing.versions.get(number=1).source == GOOD


@pytest.mark.django_db
def test_api_validate_reports_located_problems(client, user):
    client.force_login(user)
    response = client.post(
        reverse("api:validate"),
        {"source": GOOD.replace("checks:", "chekcs:")},
        content_type="application/json",
    )
    body = response.json()
    assert body["valid"] is False
    assert {"line": 5, "column": 5, "path": "evals[0].chekcs"}.items() <= body["problems"][-1].items()


@pytest.mark.django_db
def test_json_schema_is_served_without_login(client):
    schema = client.get("/api/suites/schema.json").json()
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "evals" in schema["properties"]
    assert "or" in schema["$defs"]["Check"]["properties"]
