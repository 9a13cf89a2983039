"""An endpoint's prices have one meaning for "not known": empty (or 0 for both), which the admin's form offers
and says, the endpoints' list shows as "no prices", and the runs on it read as an unknown cost, not $0."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from endpoints.models import Endpoint

pytestmark = pytest.mark.django_db

FORM = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "", "max_concurrency": 5, "timeout": 30}


def test_the_form_takes_empty_prices_as_not_known_and_says_so(admin_client):
    page = admin_client.get(reverse("admin:endpoints_endpoint_add")).content.decode()
    (field,) = re.findall(r'<input[^>]*name="price_input"[^>]*>', page)
    assert "required" not in field and 'value="' not in field  # empty to begin with, and may stay so
    assert "Leave both prices empty when they are not known" in html.unescape(page)
    added = admin_client.post(
        reverse("admin:endpoints_endpoint_add"),
        {**FORM, "name": "local", "price_input": "", "price_output": ""},
    )
    assert added.status_code == 302
    local = Endpoint.objects.get(name="local")
    assert (local.price_input, local.price_output) == (None, None)
    assert not local.to_config().priced and local.to_config().price_input == 0.0


def test_the_list_says_no_prices_rather_than_zeros(admin_client):
    Endpoint.objects.create(name="local", base_url="http://127.0.0.1:9/v1")
    Endpoint.objects.create(name="zeros", base_url="http://127.0.0.1:9/v1", price_input=0, price_output=0)
    Endpoint.objects.create(
        name="router", base_url="http://127.0.0.1:9/v1", price_input="0.15", price_output="0.6"
    )
    page = html.unescape(admin_client.get(reverse("admin:endpoints_endpoint_changelist")).content.decode())
    cells = dict(
        re.findall(
            r'<th class="field-name"><a [^>]*>(\w+)</a></th>.*?<td class="field-prices">([^<]*)</td>',
            page,
            re.S,
        )
    )
    assert cells == {"local": "no prices", "zeros": "no prices", "router": "$0.15 / $0.60 per M"}


@pytest.mark.django_db(transaction=True)
def test_endpoints_whose_prices_were_both_zero_are_stored_empty():
    before, after = [("endpoints", "0002_endpoint_project")], [("endpoints", "0003_endpoint_prices_unknown")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("endpoints", "Endpoint")
    old.objects.create(name="local", base_url="http://x/v1", price_input=0, price_output=0)
    old.objects.create(name="half", base_url="http://x/v1", price_input=0, price_output=2)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        new = executor.loader.project_state(after).apps.get_model("endpoints", "Endpoint")
        prices = {row.name: (row.price_input, row.price_output) for row in new.objects.all()}
        assert prices["local"] == (None, None)
        assert prices["half"][0] == 0 and prices["half"][1] == 2  # a free side beside a price stays 0
    finally:  # back to the latest schema, for the tests after this one
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
