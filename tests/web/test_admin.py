"""The Django admin manages suites, versions, runs and endpoints; versions stay immutable there too."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.forms.models import model_to_dict
from django.test import Client, RequestFactory
from django.urls import reverse

from endpoints.models import Endpoint
from runs.models import Conversation, Run, Status, Turn
from runs.reviews import save_label
from runs.services import create_run, create_share_link
from runs.worker.claims import heartbeat
from runs.worker.pump import execute
from suites.models import SuiteVersion
from suites.services import create_suite

GOOD = "name: admin-suite\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_of_each(admin_client, fake_endpoint):
    """A real object of every registered model, each made the way the product makes it."""
    suite = create_suite(owner=admin_client.admin, source=GOOD)
    run = create_run(version=suite.latest_version, user=admin_client.admin)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    heartbeat.stop()  # the in-process heartbeat thread must not hold the test database while it is torn down
    run.refresh_from_db()
    assert run.status == Status.PASSED and Turn.objects.filter(conversation__run=run).exists()
    create_share_link(run, admin_client.admin)
    save_label(run.conversations.first(), admin_client.admin, score=2, scale="-3..3", reason="fine")
    Group.objects.create(name="reviewers")
    # Sign-in records (django-axes): a failed attempt, and a success of someone else.
    sign_in = Client()
    assert sign_in.post(reverse("login"), {"username": "nobody", "password": "guess"}).status_code == 200
    assert sign_in.post(reverse("login"), {"username": "root", "password": "pw-root-123"}).status_code == 302
    return run


def registered():
    return sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def add_form_data(page, obj) -> dict:
    """The add form filled in with an existing object's values, inline formsets empty."""
    form = page.context["adminform"].form
    data = {}
    for field, value in model_to_dict(obj, fields=list(form.fields)).items():
        if isinstance(value, list):
            data[field] = [getattr(item, "pk", item) for item in value]
        elif value is not None:
            data[field] = value
    for inline in page.context["inline_admin_formsets"]:
        prefix = inline.formset.prefix
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    return data


def test_no_admin_page_fails(admin_client, one_of_each):
    """Every registered model's changelist, add and change page renders (or refuses add with 403)."""
    assert (
        len(registered()) >= 8
    )  # suites, versions, runs, conversations, endpoints, share links, users, groups
    as_admin = RequestFactory().get("/")
    as_admin.user = admin_client.admin
    for model, model_admin in registered():
        opts = model._meta
        name = f"admin:{opts.app_label}_{opts.model_name}"
        where = opts.label
        assert admin_client.get(reverse(f"{name}_changelist")).status_code == 200, where
        obj = model._default_manager.first()
        assert obj is not None, f"make a {where} in one_of_each so its change page is opened"
        add = admin_client.get(reverse(f"{name}_add"))
        if not model_admin.has_add_permission(as_admin):
            assert add.status_code == 403, where
        else:
            assert add.status_code == 200, where
            # Sent back filled in like an existing row: saved, or refused with a message; never a 500.
            posted = admin_client.post(reverse(f"{name}_add"), add_form_data(add, obj))
            assert posted.status_code in (200, 302), where
        change = admin_client.get(reverse(f"{name}_change", args=[obj.pk]))
        assert change.status_code == 200, where


def test_runs_and_conversations_are_made_by_launching_not_in_the_admin(admin_client, one_of_each):
    run = one_of_each
    for model in ("runs_run", "runs_conversation"):
        assert admin_client.get(reverse(f"admin:{model}_add")).status_code == 403
    assert admin_client.post(reverse("admin:runs_run_add"), {"model": "mock"}).status_code == 403
    page = admin_client.get(reverse("admin:runs_run_change", args=[run.pk])).content.decode()
    assert 'name="_save"' not in page and run.model in page  # a view page, not a form
    edited = admin_client.post(reverse("admin:runs_run_change", args=[run.pk]), {"model": "other"})
    assert edited.status_code == 403
    run.refresh_from_db()
    assert run.model == "mock"
    conversation = run.conversations.first()
    gone = admin_client.post(
        reverse("admin:runs_conversation_delete", args=[conversation.pk]), {"post": "yes"}
    )
    assert gone.status_code == 403 and run.conversations.count() == 1


def test_a_finished_run_can_be_deleted_an_active_one_cannot(admin_client, one_of_each):
    finished = one_of_each
    active = create_run(version=finished.suite_version, user=admin_client.admin)
    url = reverse("admin:runs_run_changelist")
    kept = admin_client.post(
        url, {"action": "delete_selected", "_selected_action": [finished.pk, active.pk], "post": "yes"},
        follow=True,
    )  # fmt: skip
    assert "still active" in kept.content.decode()
    assert Run.objects.filter(pk__in=[finished.pk, active.pk]).count() == 2
    assert admin_client.get(reverse("admin:runs_run_delete", args=[active.pk])).status_code == 403
    confirm = admin_client.get(reverse("admin:runs_run_delete", args=[finished.pk]))
    assert confirm.status_code == 200 and "Are you sure" in confirm.content.decode()
    done = admin_client.post(
        url, {"action": "delete_selected", "_selected_action": [finished.pk], "post": "yes"}
    )
    assert done.status_code == 302
    assert not Run.objects.filter(pk=finished.pk).exists()
    assert not Conversation.objects.filter(run_id=finished.pk).exists()


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
        reverse("admin:endpoints_endpoint_add"),
        {"name": "router", "base_url": "https://openrouter.ai/api/v1", "api_key_env": "OPENROUTER_API_KEY",
         "max_concurrency": 5, "price_input": "0.15", "price_output": "0.60", "timeout": 30},
    )  # fmt: skip
    assert response.status_code == 302
    endpoint = Endpoint.objects.get(name="router")
    assert endpoint.to_config().api_key_env == "OPENROUTER_API_KEY"
    assert "api_key" not in {field.name for field in Endpoint._meta.fields}
    reserved = admin_client.post(
        reverse("admin:endpoints_endpoint_add"),
        {"name": "mock", "base_url": "https://x.test/v1", "api_key_env": "K", "max_concurrency": 1,
         "price_input": "0", "price_output": "0", "timeout": 30},
    )  # fmt: skip
    assert reserved.status_code == 200 and not Endpoint.objects.filter(name="mock").exists()


def test_an_endpoint_url_typed_without_a_scheme_means_https(admin_client):
    response = admin_client.post(
        reverse("admin:endpoints_endpoint_add"),
        {"name": "router", "base_url": "openrouter.ai/api/v1", "api_key_env": "OPENROUTER_API_KEY",
         "max_concurrency": 5, "price_input": "0", "price_output": "0", "timeout": 30},
    )  # fmt: skip
    assert response.status_code == 302
    assert Endpoint.objects.get(name="router").base_url == "https://openrouter.ai/api/v1"
