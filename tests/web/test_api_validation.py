"""A request the API cannot read (a field of the wrong type, a key it does not know) is refused with 422 as its
other refusals are, `detail` and `problems`, each problem at the path of the field the user sent: not ninja's
location, which says "body" twice and names the union members and classes it tried."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.tokens import create_token
from tests.factories import bearer

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user):
    _, token = create_token(user, "ci")
    return lambda method, url, body=None: getattr(Client(), method)(
        url, body, content_type="application/json", **bearer(token)
    )


@pytest.mark.parametrize(
    ("body", "paths", "detail"),
    [
        ({"model": 5}, ["model"], "model: Input should be a valid string"),
        (
            {"suite": "s", "options": {"model_settings": {"temperature": "hot"}}},
            ["options.model_settings.temperature"],
            "options.model_settings.temperature: Input should be a valid number, unable to parse string as a number",
        ),
        # `stop` is a string or a list of strings: the list sent is the member to blame, item by item.
        ({"options": {"model_settings": {"stop": ["ok", 1]}}}, ["options.model_settings.stop[1]"], None),
        ({"options": {"cache": "x"}}, ["options.cache"], "options.cache: Input should be a valid dictionary"),
        ({"concurrency": "x", "vars": {"a": 1}}, ["concurrency", "vars.a"], None),
    ],
)
def test_a_launch_that_does_not_validate_says_where_in_what_was_sent(api, body, paths, detail):
    refused = api("post", "/api/runs", body)
    assert refused.status_code == 422
    answer = refused.json()
    assert [problem["path"] for problem in answer["problems"]] == paths
    first = answer["problems"][0]
    assert answer["detail"].startswith(f"{first['path']}: {first['message']}")
    if detail is not None:
        assert answer["detail"] == detail
    if len(paths) > 1:
        assert answer["detail"].endswith(f" (and {len(paths) - 1} more)")


def test_a_matrix_variant_is_located_in_the_list_sent(api):
    refused = api("post", "/api/matrices", {"suite": "s", "variants": ["mock", {"label": "no model"}]})
    assert refused.status_code == 422
    assert [problem["path"] for problem in refused.json()["problems"]] == ["variants[1].model"]
    assert refused.json()["detail"] == "variants[1].model: Field required"


def test_a_query_parameter_is_named_as_sent(api):
    refused = api("get", "/api/runs?limit=many")
    assert refused.status_code == 422 and refused.json()["problems"][0]["path"] == "limit"
