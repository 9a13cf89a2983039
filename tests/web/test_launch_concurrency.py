"""A launch on the server asks its concurrency of the model's endpoint: more than the endpoint allows (its max
concurrency in the admin, or EVALSITE_DEFAULT_CONCURRENCY for the default endpoint) is refused before anything
is stored, in one line naming the endpoint, its cap and where it is set, from the launch form (beside the
field), the API (422 naming `concurrency`) and a matrix; a matrix's variants on one endpoint share its slots and
say so; a run whose endpoint's cap was lowered under it says what it plays at. Never quietly held.

Runs are played in this process as a worker plays them (runs.worker.pump.execute) against the fake endpoint;
tests/e2e/test_e2e_concurrency.py launches from the terminal through a real worker."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse

from endpoints.models import Endpoint
from runs import services
from runs.models import Run, RunMatrix
from runs.tokens import create_token
from suites.models import Suite
from suites.services import create_suite
from tests.factories import bearer, play

pytestmark = pytest.mark.django_db

WHERE_FAKE = "Endpoints → Endpoints → fake"


def source(name: str = "capped", model: str = "fake/test-model", evals: int = 3) -> str:
    lines = [f"name: {name}", f"model: {model}", "evals:"]
    lines += [f"  - {{id: e{n}, prompt: 'Say OK {n}', checks: [{{match: '*OK*'}}]}}" for n in range(evals)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def fake(fake_endpoint, fake_openai):
    """The fake endpoint, its cap set to 20 in the admin; it answers OK."""
    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=20)
    fake_openai.rule("Say OK", "OK")
    return fake_openai


@pytest.fixture
def api(user):
    _, token = create_token(user, "ci")
    client = Client(enforce_csrf_checks=True)

    def post(path: str, body: dict):
        return client.post(path, body, content_type="application/json", **bearer(token))

    return post


def concurrency_field(html: str) -> str:
    """The launch form's concurrency field as its label holds it: the input, its hint and its errors."""
    start = html.index('<span id="launch-concurrency"')
    return html[start : html.index("</label>", start)]


# --- the launch form ------------------------------------------------------------------------------------------


def test_the_form_refuses_more_than_a_named_endpoint_allows_beside_the_field_keeping_the_input(
    logged_in, user, fake
):
    suite = create_suite(owner=user, source=source())
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": "40"})
    assert response.status_code == 400
    [error] = response.context["launch_form"].errors["concurrency"]
    assert error.startswith("concurrency 40: the endpoint fake allows 20 at once") and WHERE_FAKE in error
    assert "nothing was started" in error
    field = unescape(concurrency_field(response.content.decode()))
    assert 'value="40"' in field and f'<span class="field-error">{error}</span>' in field
    assert response.context["launch_error"] is None  # said beside the field, not at the top of the form
    assert not Run.objects.exists() and fake.chat_requests() == []


@override_settings(EVALSITE_DEFAULT_CONCURRENCY=10)
def test_the_form_refuses_more_than_the_default_endpoint_allows_naming_its_setting(logged_in, user):
    suite = create_suite(owner=user, source=source(model="gpt-test"))
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": "50"})
    assert response.status_code == 400
    [error] = response.context["launch_form"].errors["concurrency"]
    assert error.startswith("concurrency 50: the default endpoint allows 10 at once")
    assert "EVALSITE_DEFAULT_CONCURRENCY" in error
    assert not Run.objects.exists()


def test_the_form_runs_at_the_concurrency_asked_within_the_cap(logged_in, user, fake):
    suite = create_suite(owner=user, source=source())
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": "20"})
    run = Run.objects.get()
    assert response.status_code == 302 and run.concurrency == 20
    assert play(run).status == "passed" and len(fake.chat_requests()) == 3


def test_the_form_says_what_the_endpoint_allows_and_follows_the_model_chosen(logged_in, user, fake):
    suite = create_suite(owner=user, source=source())
    field = concurrency_field(
        logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    )
    assert 'max="20"' in field and "fake allows up to 20 at once" in field
    assert 'value="10"' in field  # the default, within the cap

    routes = reverse("suites:launch_routes", args=[suite.public_id])
    # The model typed goes to the mock: no endpoint limits it but the run's own limit, the typed value kept.
    mock = logged_in.get(
        routes, {"model": "mock", "concurrency": "40"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    swapped = mock[mock.index('<span id="launch-concurrency"') :]
    assert 'hx-swap-oob="true"' in swapped and 'value="40"' in swapped and 'max="100"' in swapped
    assert "allows up to" not in swapped
    # Two variants on the fake: each may ask for its 20, and they share them.
    both = logged_in.get(routes, {"model": "fake/a", "compare": "fake/b"}).content.decode()
    assert "fake allows up to 20 at once, shared by the 2 variants on it" in both


def test_a_launch_that_asks_no_concurrency_plays_the_default_held_to_the_cap(logged_in, user, fake):
    """The Run button of a version sends none: a default is no demand, so it is held to the endpoint's cap,
    and the run says the concurrency it plays at."""
    Endpoint.objects.filter(name="fake").update(max_concurrency=4)
    suite = create_suite(owner=user, source=source())
    version_page = logged_in.get(reverse("suites:version", args=[suite.public_id, 1])).content.decode()
    assert 'name="concurrency"' not in version_page
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"version": "1"})
    assert response.status_code == 302
    assert Run.objects.get().concurrency == 4
    assert 'value="4"' in concurrency_field(
        logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    )


# --- the API --------------------------------------------------------------------------------------------------


def test_the_api_refuses_more_than_the_endpoint_allows_with_a_422_naming_the_field(api, fake):
    answer = api("/api/runs", {"yaml": source(), "concurrency": 40})
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert isinstance(detail, str) and detail.startswith(
        "concurrency 40: the endpoint fake allows 20 at once"
    )
    assert WHERE_FAKE in detail
    assert not Run.objects.exists() and not Suite.objects.exists()  # nothing stored, not even the YAML


@override_settings(EVALSITE_DEFAULT_CONCURRENCY=10)
def test_the_api_refuses_more_than_the_default_endpoint_allows(api):
    answer = api("/api/runs", {"yaml": source(model="gpt-test"), "concurrency": 50})
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert detail.startswith("concurrency 50: the default endpoint allows 10 at once")
    assert "EVALSITE_DEFAULT_CONCURRENCY" in detail


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        (500, "at most 100 conversations in flight on this server (EVALSITE_MAX_RUN_CONCURRENCY"),
        (0, "give 1"),
    ],
)
def test_the_api_refuses_a_concurrency_no_run_may_have(api, asked, said):
    answer = api("/api/runs", {"yaml": source(model="mock"), "concurrency": asked})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(f"concurrency {asked}: ") and said in answer.json()["detail"]
    assert not Run.objects.exists()


def test_the_api_runs_what_it_asks_within_the_cap_and_the_default_held_to_it(api, fake):
    asked = api("/api/runs", {"yaml": source(), "concurrency": 20})
    assert asked.status_code == 201 and asked.json()["concurrency"] == 20
    assert play(asked.json()["id"]).status == "passed"
    Endpoint.objects.filter(name="fake").update(max_concurrency=4)
    default = api("/api/runs", {"yaml": source()})
    assert default.status_code == 201 and default.json()["concurrency"] == 4


# --- matrices -------------------------------------------------------------------------------------------------


def test_a_matrix_whose_variants_each_fit_shares_the_endpoints_slots_and_says_so(api, logged_in, fake):
    answer = api("/api/matrices", {"yaml": source(), "variants": ["fake/a", "fake/b"], "concurrency": 15})
    assert answer.status_code == 201
    shared = answer.json()["shared_slots"]
    assert shared == [
        {
            "endpoint": "fake",
            "allows": 20,
            "variants": 2,
            "text": "fake allows 20 at once, shared by its 2 variants",
        }
    ]
    assert [variant["run"]["concurrency"] for variant in answer.json()["variants"]] == [15, 15]
    page = logged_in.get(reverse("matrices:detail", args=[answer.json()["id"]])).content.decode()
    assert "fake allows 20 at once, shared by its 2 variants" in page

    within = api("/api/matrices", {"yaml": source(), "variants": ["fake/a", "mock"], "concurrency": 15})
    assert within.status_code == 201 and within.json()["shared_slots"] == []  # one variant a endpoint


def test_a_matrix_asking_more_than_an_endpoint_allows_one_variant_is_refused_whole(
    api, logged_in, user, fake
):
    answer = api("/api/matrices", {"yaml": source(), "variants": ["mock", "fake/b"], "concurrency": 25})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("fake/b: concurrency 25: the endpoint fake allows 20 at once")
    assert not RunMatrix.objects.exists() and not Run.objects.exists()

    suite = create_suite(owner=user, source=source(name="form matrix"))
    form = {"model": "mock", "compare": "fake/b", "concurrency": "25"}
    response = logged_in.post(reverse("suites:launch", args=[suite.public_id]), form)
    assert response.status_code == 400
    [error] = response.context["launch_form"].errors["concurrency"]
    assert error.startswith("fake/b: concurrency 25: the endpoint fake allows 20 at once")
    assert not RunMatrix.objects.exists()


# --- the run page ---------------------------------------------------------------------------------------------


def test_the_run_page_says_what_holds_a_run_whose_endpoint_cap_was_lowered(logged_in, user, fake):
    suite = create_suite(owner=user, source=source())
    run = services.create_run(version=suite.latest_version, user=user, concurrency=20)
    meta = run_meta(logged_in, run)
    assert "concurrency 20" in meta and "held" not in meta

    Endpoint.objects.filter(name="fake").update(max_concurrency=5)  # the admin lowers it as the run plays
    assert "concurrency 20 (held to 5 by endpoint fake)" in run_meta(logged_in, run)
    poll = logged_in.get(reverse("runs:progress", args=[run.pk])).content.decode()
    assert "held to 5 by endpoint fake" in poll

    play(run)  # once it has ended, nothing holds it
    assert "held" not in run_meta(logged_in, run)


def test_a_regrade_keeps_its_sources_concurrency_held_to_the_cap_as_it_is_now(user, fake):
    suite = create_suite(owner=user, source=source())
    run = play(services.create_run(version=suite.latest_version, user=user, concurrency=20))
    Endpoint.objects.filter(name="fake").update(max_concurrency=5)
    regraded = services.regrade(run, version=suite.latest_version, user=user)
    assert regraded.concurrency == 5


def run_meta(client, run: Run) -> str:
    html = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    found = re.search(r'<p class="run-meta muted">(.*?)</p>', html, re.S)
    assert found is not None
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())
