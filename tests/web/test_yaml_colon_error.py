"""A plain YAML value containing ": " (`prompt: Hint: …`) is PyYAML's "mapping values are not allowed here";
the validate API and the editor's problems panel say the fix instead, at the value, with the key's path."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

SOURCE = """\
name: hints
model: mock
evals:
  - id: multiply
    prompt: Hint: 15 * 7 = 10*7 + 5*7. What is the answer?
    checks: [{contains: "105"}]
"""
MESSAGE = 'a value containing ": " must be quoted, e.g. prompt: "Hint: 15 * 7 = 10*7 + 5*7. What is the…"'

pytestmark = pytest.mark.django_db


def test_the_validate_api_names_the_fix_for_an_unquoted_colon(logged_in):
    answer = logged_in.post(
        reverse("api:validate"), {"source": SOURCE}, content_type="application/json"
    ).json()
    assert answer["valid"] is False
    [problem] = answer["problems"]
    assert (problem["line"], problem["column"], problem["path"]) == (5, 13, "evals[0].prompt")
    assert problem["message"] == MESSAGE


def test_the_editors_problems_panel_names_the_fix_for_an_unquoted_colon(logged_in):
    body = logged_in.post(
        reverse("suites:validate"), {"source": SOURCE}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'data-line="5" data-column="13"' in body
    assert MESSAGE in html.unescape(body)
    assert "mapping values are not allowed" not in body
