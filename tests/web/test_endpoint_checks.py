"""A mistyped endpoint or an unset key is said before a run, not found out after it; endpoints can be tested.

Where each model reference goes (model, judge, a check's judge, a stop condition's judge, a simulated
user, a named grader's judge, a model playing a tool), warnings for a `name/` prefix that names no endpoint and for an unset key variable — in the editor,
the launch form, the API and the run page after a launch — and the admin's "Test connection", all against
the real fake server.
"""

from __future__ import annotations

import html
import socket

from django.contrib.messages import get_messages
from django.urls import reverse

from endpoints.models import Endpoint
from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.endpoint_checks import locator, no_endpoint, routes, warnings
from engine.loader import load_suite
from runs.models import Run
from suites import services
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

TYPO = """\
name: typo
model: faek/gpt-test
evals:
  - prompt: hi
    checks:
      - match: "*"
"""

EVERY_REF = """\
name: every-ref
model: fake/test-model
judge: fake/judge-model
evals:
  - prompt: hi
    checks:
      - llm_judge: {criteria: polite, model: mock/strict}
  - prompt: book a table
    checks:
      - contains: booked
    simulate:
      persona: A hurried diner.
      model: fake/user-model
      stop_when:
        natural_language: {prompt: Is it booked?, model: fkae/judge-2}
"""


def registry(**named: str) -> EndpointRegistry:
    return EndpointRegistry(
        default=EndpointConfig(name=DEFAULT, base_url="https://api.openai.com/v1"),
        named={name: EndpointConfig(name=name, base_url=url, api_key_env=f"{name.upper()}_KEY") for name, url in named.items()},
    )  # fmt: skip


# --- the engine's plain functions ---------------------------------------------------------------------------


def test_an_unknown_prefix_is_a_located_warning_naming_where_the_model_goes():
    suite = load_suite(TYPO)  # valid: a warning, not an error
    found = warnings(
        suite, registry(fake="http://127.0.0.1:9/v1"), environ={"OPENAI_API_KEY": "k"}, locate=locator(TYPO)
    )
    assert [(w.line, w.column, w.path) for w in found] == [(2, 8, "model")]
    assert found[0].message == (
        "no endpoint is named `faek` (did you mean `fake`?): a run of `faek/gpt-test` is refused; "
        "`default/faek/gpt-test` sends it whole to the default endpoint"
    )


def test_on_openrouter_as_the_default_endpoint_a_provider_id_goes_whole_with_a_warning_and_no_refusal():
    """OpenRouter as the default endpoint names its models `provider/model` (vibecheck's suites use them): such
    an id goes there whole, as written, and only the editor's warning says no endpoint is named so."""
    gateway = EndpointRegistry(default=EndpointConfig(name=DEFAULT, base_url="https://openrouter.ai/api/v1"))
    suite = load_suite(TYPO.replace("faek/gpt-test", "anthropic/claude-3.5-sonnet"))
    [model, _judge] = routes(suite, gateway)
    assert (model.route.endpoint, model.route.model) == (DEFAULT, "anthropic/claude-3.5-sonnet")
    assert no_endpoint(gateway, "anthropic/claude-3.5-sonnet") is None
    [warning] = warnings(suite, gateway, environ={"OPENAI_API_KEY": "k"})
    assert warning.message.startswith(
        "`anthropic/claude-3.5-sonnet` goes to the default endpoint (https://openrouter.ai/api/v1) as model "
        "`anthropic/claude-3.5-sonnet`: no endpoint is named `anthropic`"
    )
    assert no_endpoint(registry(), "anthropic/claude-3.5-sonnet") is not None  # OpenAI's own API: refused
    local = EndpointRegistry(default=EndpointConfig(name=DEFAULT, base_url="http://127.0.0.1:4000/v1"))
    assert no_endpoint(local, "anthropic/claude-3.5-sonnet") is not None  # a local server: `default/` says it


def test_a_provider_id_validates_and_goes_whole_to_the_default_endpoint_once_written_after_default():
    suite = load_suite(TYPO.replace("faek/gpt-test", "anthropic/claude-3.5-sonnet"))
    [model, judge] = routes(suite, registry())
    assert str(model) == "model `anthropic/claude-3.5-sonnet` → no endpoint named `anthropic`"
    [warning] = warnings(suite, registry(), environ={"OPENAI_API_KEY": "k"})
    assert "no endpoint is named `anthropic` (named endpoints are added in the admin" in warning.message
    written = load_suite(TYPO.replace("faek/gpt-test", "default/anthropic/claude-3.5-sonnet"))
    [model, judge] = routes(written, registry())
    assert (model.route.endpoint, model.route.model) == (DEFAULT, "anthropic/claude-3.5-sonnet")
    assert not warnings(written, registry(), environ={"OPENAI_API_KEY": "k"})


def test_every_model_reference_is_routed_and_each_typo_located():
    suite = load_suite(EVERY_REF)
    lines = [str(line) for line in routes(suite, registry(fake="http://127.0.0.1:9/v1"))]
    assert lines == [
        "model `fake/test-model` → fake (http://127.0.0.1:9/v1)",
        "judge `fake/judge-model` → fake (http://127.0.0.1:9/v1)",
        "check judge `mock/strict` → mock",
        "simulated user `fake/user-model` → fake (http://127.0.0.1:9/v1)",
        "stop condition judge `fkae/judge-2` → no endpoint named `fkae`",
    ]
    env = {"FAKE_KEY": "k", "OPENAI_API_KEY": "k"}
    [typo] = warnings(suite, registry(fake="http://127.0.0.1:9/v1"), environ=env, locate=locator(EVERY_REF))
    assert typo.path == "evals[1].simulate.stop_when.natural_language.model"
    line = EVERY_REF.split("\n")[typo.line - 1]
    assert line.index("fkae/judge-2") == typo.column - 1 and "natural_language" in line
    assert "(did you mean `fake`?)" in typo.message


GRADED_AND_TOOLED = """\
name: graded
model: mock
graders:
  quality: {kind: llm_judge, rubric: "Rate {submission}", model: fake/grader-model}
tools:
  - name: book
    description: Books a table
    parameters: {type: object}
    llm: {model: fake/tool-model}
evals:
  - input: Book a table.
    graders:
      own: {kind: llm_judge, rubric: "Rate it", model: fkae/own-grader}
"""


def test_graders_and_tools_with_a_model_of_their_own_are_routed_and_located():
    suite = load_suite(GRADED_AND_TOOLED)
    lines = [str(line) for line in routes(suite, registry(fake="http://127.0.0.1:9/v1"))]
    assert lines == [
        "model `mock` → mock",
        "judge `mock` → mock",
        "grader judge `fake/grader-model` → fake (http://127.0.0.1:9/v1)",
        "tool model `fake/tool-model` → fake (http://127.0.0.1:9/v1)",
        "grader judge `fkae/own-grader` → no endpoint named `fkae`",
    ]
    env = {"FAKE_KEY": "k", "OPENAI_API_KEY": "k"}
    found = warnings(
        suite, registry(fake="http://127.0.0.1:9/v1"), environ=env, locate=locator(GRADED_AND_TOOLED)
    )
    [typo] = [w for w in found if "no endpoint is named" in w.message]
    assert typo.path == "evals[0].graders.own.model" and typo.line == 13


def test_an_unset_key_variable_is_a_warning_except_where_no_key_is_needed():
    suite = load_suite(EVERY_REF)
    named = registry(fake="http://127.0.0.1:9/v1")
    # A reference to no endpoint (`fkae/judge-2`) is refused at launch: no key of the default's to warn about.
    on_default = EVERY_REF.replace("fkae/judge-2", "gpt-4o-mini")
    found = warnings(load_suite(on_default), named, environ={}, locate=locator(on_default))
    keys = [w for w in found if "is not set" in w.message]
    assert [(w.path, w.message) for w in keys] == [
        ("model", "FAKE_KEY is not set in this server's environment (the workers' is most likely the same): "
                  "runs on `fake` send no key, and fail with 401 if it needs one"),
        ("evals[1].simulate.stop_when.natural_language.model",
         "OPENAI_API_KEY is not set in this server's environment (the workers' is most likely the same): "
         "runs on `default` send no key, and fail with 401 if it needs one"),
    ]  # fmt: skip
    found = warnings(suite, named, environ={}, locate=locator(EVERY_REF))
    assert not [w for w in found if "OPENAI_API_KEY" in w.message]
    assert not warnings(load_suite(TYPO.replace("faek/gpt-test", "mock")), named, environ={})
    keyless = EndpointRegistry(
        default=named.default, named={"local": EndpointConfig("local", "http://x/v1", "")}
    )
    assert not warnings(load_suite(TYPO.replace("faek/gpt-test", "local/llama")), keyless, environ={})


# --- the pages ----------------------------------------------------------------------------------------------


def test_the_editor_says_where_models_go_and_warns_as_you_type(logged_in, fake_endpoint, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set")
    body = logged_in.post(
        reverse("suites:validate"), {"source": TYPO}, HTTP_HX_REQUEST="true"
    ).content.decode()
    body = html.unescape(body)
    assert "Valid — 1 eval" in body
    assert (
        '<code>faek/gpt-test</code> → <strong class="mono">no endpoint named <code>faek</code></strong>'
        in body
    )
    assert (
        'data-line="2" data-column="8"' in body
        and "no endpoint is named `faek` (did you mean `fake`?)" in body
    )
    fixed = TYPO.replace("faek/", "fake/")
    body = logged_in.post(
        reverse("suites:validate"), {"source": fixed}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert (
        f'<strong class="mono">fake</strong> <span class="muted mono">({fake_endpoint.base_url})</span>'
        in body
    )
    assert "no endpoint is named" not in body and "is not set" not in body
    monkeypatch.delenv(FAKE_KEY_ENV)
    body = logged_in.post(
        reverse("suites:validate"), {"source": fixed}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f"{FAKE_KEY_ENV} is not set in this server&#x27;s environment" in body


def test_an_uploaded_suite_with_a_typo_is_saved_and_the_editor_warns(logged_in, fake_endpoint, monkeypatch):
    from django.core.files.uploadedfile import SimpleUploadedFile

    monkeypatch.setenv("OPENAI_API_KEY", "sk-set")
    upload = SimpleUploadedFile("typo.yaml", TYPO.encode())
    page = logged_in.post(reverse("suites:upload"), {"file": upload}, follow=True).content.decode()
    assert "Saved typo.yaml as v1" in page
    assert "no endpoint is named `faek` (did you mean `fake`?)" in html.unescape(page)


def test_the_launch_form_offers_endpoints_and_models_and_warns_at_launch(
    logged_in, user, fake_endpoint, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite = services.create_suite(owner=user, source=TYPO.replace("faek/", "fake/"))
    Run.objects.create(suite_version=suite.latest_version, created_by=user, model="fake/earlier-model",
                       endpoint_name="fake", status="passed")  # fmt: skip
    page = html.unescape(logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode())
    assert 'list="model-choices"' in page
    datalist = page[page.index('<datalist id="model-choices">') : page.index("</datalist>")]
    values = [part.split('"')[0] for part in datalist.split('value="')[1:]]
    assert values == ["mock", "fake/gpt-test", "fake/", "fake/earlier-model"]
    assert '<code>fake/gpt-test</code> → <strong class="mono">fake</strong>' in page  # the launch panel

    # The line follows what is typed in the model field.
    url = reverse("suites:launch_routes", args=[suite.public_id])
    partial = html.unescape(logged_in.get(url, {"model": "faek/x", "version": "1"}).content.decode())
    assert (
        '<code>faek/x</code> → <strong class="mono">no endpoint named <code>faek</code></strong>' in partial
    )
    assert "no endpoint is named `faek` (did you mean `fake`?)" in partial
    partial = html.unescape(logged_in.get(url, {"model": "gpt-4o", "version": "1"}).content.decode())
    assert "OPENAI_API_KEY is not set" in partial

    # Launching it anyway is refused on the form, in one line naming the endpoint written and those there are.
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "faek/x", "concurrency": "2"}
    )
    assert response.status_code == 400
    alert = html.unescape(response.content.decode()).split('<div class="flash flash-error" role="alert">')[1]
    assert alert.split("</div>")[0] == (
        "model `faek/x`: this project has no endpoint named `faek` (did you mean `fake`?); it may use `fake`, "
        "`mock`, `default` (`default/faek/x` sends `faek/x` whole to the default endpoint)"
    )
    assert not Run.objects.filter(model="faek/x").exists()

    # A model on the default endpoint launches, and the run page repeats the warnings.
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "gpt-4o", "concurrency": "2"}
    )
    assert response.status_code == 302
    assert Run.objects.get(model="gpt-4o").endpoint_name == DEFAULT
    shown = [str(message) for message in get_messages(response.wsgi_request)]
    assert any("OPENAI_API_KEY is not set" in message for message in shown)


def test_the_api_validate_reports_routes_and_warnings(logged_in, fake_endpoint, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set")
    answer = logged_in.post("/api/suites/validate", {"source": TYPO}, content_type="application/json").json()
    assert answer["valid"] is True
    assert answer["routes"][0] == "model `faek/gpt-test` → no endpoint named `faek`"
    assert [(w["line"], w["column"], w["path"]) for w in answer["warnings"]] == [(2, 8, "model")]


# --- the admin's "Test connection" --------------------------------------------------------------------------


def test_connection(admin_client, endpoint: Endpoint) -> list[tuple[str, str]]:
    response = admin_client.post(
        reverse("admin:endpoints_endpoint_changelist"),
        {"action": "test_connection", "_selected_action": [endpoint.pk]},
        follow=True,
    )
    assert response.redirect_chain[-1] == (reverse("admin:endpoints_endpoint_changelist"), 302)
    return [(message.level_tag, str(message)) for message in response.context["messages"]]


test_connection.__test__ = False  # a helper, not a test


def test_test_connection_lists_the_models(admin_client, fake_endpoint, fake_openai):
    assert test_connection(admin_client, fake_endpoint) == [
        ("success", "Endpoint fake: OK: 1 model, e.g. fake-model")
    ]
    assert fake_openai.requests[-1]["path"] == "/v1/models"
    assert fake_openai.requests[-1]["headers"]["authorization"] == f"Bearer {FAKE_KEY}"


def test_test_connection_shows_a_refused_key_without_the_key(admin_client, fake_endpoint, monkeypatch):
    monkeypatch.setenv(FAKE_KEY_ENV, "sk-wrong-secret")
    [(level, message)] = test_connection(admin_client, fake_endpoint)
    assert level == "error" and message.startswith(
        f"Endpoint fake: HTTP 401 from {fake_endpoint.base_url}: Incorrect API key"
    )
    assert "sk-wrong-secret" not in message
    monkeypatch.delenv(FAKE_KEY_ENV)
    [(level, message)] = test_connection(admin_client, fake_endpoint)
    assert level == "error" and f"({FAKE_KEY_ENV} is not set in this server's environment)" in message


def test_test_connection_shows_an_unreachable_endpoint(admin_client, fake_endpoint):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake_endpoint.base_url = f"http://127.0.0.1:{port}/v1"
    fake_endpoint.save()
    [(level, message)] = test_connection(admin_client, fake_endpoint)
    assert level == "error" and message.startswith(f"Endpoint fake: cannot reach http://127.0.0.1:{port}/v1")


def test_without_models_it_tries_a_one_token_completion(admin_client, user, fake_endpoint, fake_openai):
    fake_openai.fail_models(404)
    [(level, message)] = test_connection(admin_client, fake_endpoint)
    assert level == "error" and "/models is not served, and no run has used a model on `fake`" in message
    suite = services.create_suite(owner=user, source=TYPO.replace("faek/", "fake/"))
    Run.objects.create(suite_version=suite.latest_version, created_by=user, model="fake/test-model",
                       endpoint_name="fake")  # fmt: skip
    fake_openai.rule("Say OK.", "OK")
    [(level, message)] = test_connection(admin_client, fake_endpoint)
    assert (level, message) == (
        "success",
        "Endpoint fake: OK: /models is not served; a one-token completion from `test-model` answered “OK”",
    )
    assert fake_openai.chat_requests()[-1]["max_tokens"] == 1


def test_the_change_page_has_a_test_connection_button(admin_client, fake_endpoint):
    url = reverse("admin:endpoints_endpoint_change", args=[fake_endpoint.pk])
    page = admin_client.get(url).content.decode()
    button = reverse("admin:endpoints_endpoint_test_connection", args=[fake_endpoint.pk])
    assert f'action="{button}"' in page and "Test connection" in page
    assert admin_client.get(button).status_code == 405  # it makes a request out: POST only, with CSRF
    response = admin_client.post(button, follow=True)
    assert response.redirect_chain[-1][0] == url
    assert "Endpoint fake: OK: 1 model, e.g. fake-model" in response.content.decode()


def test_an_endpoint_that_needs_no_key_is_added_without_a_variable(admin_client, fake_openai):
    response = admin_client.post(
        reverse("admin:endpoints_endpoint_add"),
        {"name": "local", "base_url": fake_openai.base_url, "api_key_env": "", "max_concurrency": 2,
         "price_input": "0", "price_output": "0", "timeout": 5},
    )  # fmt: skip
    assert response.status_code == 302
    suite = load_suite(TYPO.replace("faek/", "local/"))
    from endpoints.routes import suite_routes

    assert not suite_routes(suite).warnings  # no key variable, so no key to miss
