"""The Django admin manages suites, versions, runs and endpoints; versions stay immutable there too."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs.models import Endpoint
from suites.models import SuiteVersion
from suites.services import create_suite

GOOD = "name: admin-suite\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client.force_login(admin)
    client.admin = admin
    return client


@pytest.mark.parametrize(
    "model",
    [
        "suites_suite",
        "suites_suiteversion",
        "runs_run",
        "runs_conversation",
        "runs_endpoint",
        "runs_sharelink",
    ],
)
def test_changelists_render(admin_client, model):
    assert admin_client.get(reverse(f"admin:{model}_changelist")).status_code == 200


def test_version_added_in_admin_is_validated_and_numbered(admin_client):
    suite = create_suite(owner=admin_client.admin, source=GOOD)
    url = reverse("admin:suites_suiteversion_add")
    bad = admin_client.post(url, {"suite": suite.pk, "source": GOOD.replace("checks", "chekcs"), "note": ""})
    assert bad.status_code == 200 and "unknown key" in bad.content.decode()
    assert suite.versions.count() == 1
    good = admin_client.post(
        url, {"suite": suite.pk, "source": GOOD.replace("hi", "hello"), "note": "from admin"}
    )
    assert good.status_code == 302
    assert list(suite.versions.values_list("number", "note")) == [(2, "from admin"), (1, "created")]


def test_versions_cannot_be_edited(admin_client):
    suite = create_suite(owner=admin_client.admin, source=GOOD)
    version = suite.latest_version
    url = reverse("admin:suites_suiteversion_change", args=[version.pk])
    admin_client.post(url, {"source": "name: changed", "note": "sneaky"})
    version.refresh_from_db()
    assert version.source == GOOD and version.note == "created"
    with pytest.raises(ValueError, match="immutable"):
        version.source = "x"
        version.save()
    assert SuiteVersion.objects.get(pk=version.pk).source == GOOD


def test_endpoint_stores_the_key_variable_name_not_a_key(admin_client):
    response = admin_client.post(
        reverse("admin:runs_endpoint_add"),
        {"name": "router", "base_url": "https://openrouter.ai/api/v1", "api_key_env": "OPENROUTER_API_KEY",
         "max_concurrency": 5, "price_input": "0.15", "price_output": "0.60", "timeout": 30},
    )  # fmt: skip
    assert response.status_code == 302
    endpoint = Endpoint.objects.get(name="router")
    assert endpoint.to_config().api_key_env == "OPENROUTER_API_KEY"
    assert "api_key" not in {field.name for field in Endpoint._meta.fields}
    reserved = admin_client.post(
        reverse("admin:runs_endpoint_add"),
        {"name": "mock", "base_url": "https://x.test/v1", "api_key_env": "K", "max_concurrency": 1,
         "price_input": "0", "price_output": "0", "timeout": 30},
    )  # fmt: skip
    assert reserved.status_code == 200 and not Endpoint.objects.filter(name="mock").exists()
