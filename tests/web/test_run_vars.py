"""Suite variables on the server: the launch form's one field per variable, `vars` in POST /api/runs, the
values stored with the run and played by the worker; secrets read from the worker's environment, never
stored."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run, Turn
from runs.tokens import create_token
from suites import services
from tests.factories import bearer, body, play

# sql: the claim that carries the run's variables to the worker is database-specific SQL.
pytestmark = [pytest.mark.django_db, pytest.mark.sql]

SECRET = "web-vars-secret-5502-qrst"
SUITE = """\
name: tracker
model: fake/agent
vars:
  project: null
  tone: brief
system: "Be {{var:tone}}. Tracker token: {{secret:WEB_VARS_TOKEN}}."
evals:
  - id: issues
    prompt: "List the issues of {{var:project}}."
    checks:
      - regex: "{{var:project}}-[0-9]+"
"""


@pytest.fixture(autouse=True)
def lent(settings):
    """This server lends the suite's secret to suites (EVALSITE_SUITE_SECRETS); by default it lends none."""
    settings.EVALSITE_SUITE_SECRETS = ["WEB_VARS_TOKEN"]


@pytest.fixture
def suite(user):
    return services.create_suite(owner=user, source=SUITE)


def test_a_secret_the_server_does_not_lend_refuses_the_launch_and_is_never_filled(
    logged_in, suite, fake_endpoint, fake_openai, settings, monkeypatch
):
    """A suite anyone may edit must not send the server's own keys: a secret not listed in
    EVALSITE_SUITE_SECRETS refuses the launch, on the form and the API; and a worker, told what it lends,
    fills no other (a run launched before the list changed)."""
    from engine import suitevars

    monkeypatch.setenv("DATABASE_PASSWORD", "the-servers-own")
    settings.EVALSITE_SUITE_SECRETS = []
    form = {"concurrency": "2", "var-project": "OPS"}
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), form)
    page = response.content.decode()
    assert response.status_code == 400 and "WEB_VARS_TOKEN" in page and "EVALSITE_SUITE_SECRETS" in page
    headers = '{"extra_headers": {"X-Leak": "{{secret:DATABASE_PASSWORD}}"}}'
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {**form, "model_settings": headers}
    )
    assert response.status_code == 400 and "DATABASE_PASSWORD" in response.content.decode()
    assert not Run.objects.exists() and fake_openai.chat_requests() == []
    monkeypatch.setattr(suitevars, "_lent", None)
    suitevars.lend_only(["WEB_VARS_TOKEN"])
    with pytest.raises(suitevars.SecretNotLent, match="EVALSITE_SUITE_SECRETS"):
        suitevars.fill_secrets("key {{secret:DATABASE_PASSWORD}}")
    assert suitevars.fill_secrets("{{secret:WEB_VARS_TOKEN}}", {"WEB_VARS_TOKEN": "x"}) == (
        "x",
        ["WEB_VARS_TOKEN"],
    )


def test_the_launch_form_has_a_field_per_variable_prefilled_with_its_default(logged_in, suite):
    page = logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    assert 'name="var-project" value="" class="mono"' in page
    assert 'project <span class="muted">(required)</span>' in page
    assert 'name="var-tone" value="brief"' in page


def test_a_web_launch_sends_the_values_and_stores_them_with_the_run(
    logged_in, suite, fake_endpoint, fake_openai, monkeypatch
):
    monkeypatch.setenv("WEB_VARS_TOKEN", SECRET)
    fake_openai.script("List the issues of OPS.", [f"OPS-1 is open ({SECRET})"])
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]),
        {"concurrency": "2", "var-project": "OPS", "var-tone": ""},  # blank: the default
    )
    run = Run.objects.get()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert run.vars == {"project": "OPS", "tone": "brief"}
    conversation = run.conversations.get()
    assert conversation.prompt == "List the issues of OPS."
    assert conversation.system == "Be brief. Tracker token: {{secret:WEB_VARS_TOKEN}}."
    run = play(run)
    assert run.status == "passed"
    sent = fake_openai.chat_requests("List the issues of OPS.")[0]["messages"]
    assert sent[0]["content"] == f"Be brief. Tracker token: {SECRET}."
    stored = json.dumps([turn.record for turn in Turn.objects.all()])
    assert "OPS-1 is open" in stored and SECRET not in stored
    results = body(logged_in.get(f"/api/runs/{run.pk}/results"))
    assert SECRET.encode() not in results and json.loads(results)["vars"] == {
        "project": "OPS",
        "tone": "brief",
    }


def test_a_web_launch_without_a_required_value_names_it_and_starts_nothing(logged_in, suite, fake_endpoint):
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": "2"})
    assert response.status_code == 400
    assert "no value for the suite&#x27;s variable project" in response.content.decode()
    assert not Run.objects.exists()


def test_an_unset_secret_ends_the_conversation_as_an_error_naming_it(suite, user, fake_endpoint, monkeypatch):
    from runs.services import create_run

    monkeypatch.delenv("WEB_VARS_TOKEN", raising=False)
    run = play(create_run(version=suite.latest_version, user=user, vars={"project": "OPS"}))
    conversation = run.conversations.get()
    assert conversation.status == "error"
    assert "environment variable WEB_VARS_TOKEN" in conversation.error


def test_the_api_takes_vars_and_refuses_a_missing_or_unknown_one(
    user, fake_endpoint, fake_openai, monkeypatch
):
    monkeypatch.setenv("WEB_VARS_TOKEN", SECRET)
    _, token = create_token(user, "ci")
    api = Client(enforce_csrf_checks=True)

    def post(payload):
        return api.post("/api/runs", payload, content_type="application/json", **bearer(token))

    missing = post({"yaml": SUITE})
    assert (
        missing.status_code == 422 and "no value for the suite's variable project" in missing.json()["detail"]
    )
    unknown = post({"yaml": SUITE, "vars": {"project": "A", "projet": "B"}})
    assert unknown.status_code == 422 and "declares no variable projet" in unknown.json()["detail"]
    bad = post({"yaml": SUITE, "vars": {"project": "(unclosed"}})
    assert bad.status_code == 422 and "regex" in bad.json()["detail"]
    assert not Run.objects.exists()

    fake_openai.script("List the issues of CORE.", ["CORE-9"])
    launched = post({"yaml": SUITE, "vars": {"project": "CORE"}})
    assert launched.status_code == 201, launched.content
    assert launched.json()["vars"] == {"project": "CORE", "tone": "brief"}
    assert play(launched.json()["id"]).status == "passed"


def test_the_run_page_shows_the_values_and_run_again_and_regrade_reuse_them(
    logged_in, suite, user, fake_endpoint, fake_openai, monkeypatch
):
    from runs.services import create_run, regrade

    monkeypatch.setenv("WEB_VARS_TOKEN", SECRET)
    fake_openai.script("List the issues of OPS.", ["OPS-3"])
    run = play(create_run(version=suite.latest_version, user=user, vars={"project": "OPS"}))
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "<code>project=OPS</code> <code>tone=brief</code>" in page
    assert '<input type="hidden" name="var-project" value="OPS">' in page
    assert SECRET not in page
    again = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]),
        {"version": "1", "concurrency": "2", "var-project": "OPS", "var-tone": "brief"},
    )
    assert again.status_code == 302
    assert Run.objects.exclude(pk=run.pk).get().vars == {"project": "OPS", "tone": "brief"}
    assert regrade(run, version=suite.latest_version, user=user).vars == run.vars
