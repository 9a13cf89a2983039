"""The launch form and money: the estimate it shows (engine.cost, from the endpoints' prices in the admin) follows
the model chosen, and its cost limit field reaches the run's options."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from endpoints.models import Endpoint
from runs.models import Run
from runs.tokens import create_token
from suites import services
from tests.factories import bearer

pytestmark = pytest.mark.django_db

SUITE = """\
name: priced
model: mock
evals:
""" + "".join(f"  - id: e{n}\n    input: {'x' * 40}\n    checks: [{{contains: OK}}]\n" for n in range(10))


def text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture
def priced(user):
    Endpoint.objects.create(
        name="paid",
        base_url="http://paid.invalid/v1",
        api_key_env="PAID_KEY",
        price_input=1000,
        price_output=2000,
    )
    Endpoint.objects.create(name="free", base_url="http://free.invalid/v1", api_key_env="FREE_KEY")
    return services.create_suite(owner=user, source=SUITE)


def test_the_estimate_follows_the_model_chosen(logged_in, priced):
    page = text(logged_in.get(reverse("suites:detail", args=[priced.public_id])).content.decode())
    assert "Cost: no cost: the mock endpoint (10 conversations × 1 turn)" in page

    url = reverse("suites:launch_routes", args=[priced.public_id])
    # 10 calls of 10 prompt tokens and 200 completion tokens (800 at most) at $1000 / $2000 per million.
    paid = text(logged_in.get(url, {"model": "paid/gpt-x", "version": "1"}).content.decode())
    assert (
        "Cost: ≈ $4.10 (up to $16.10): 10 conversations × 1 turn, ~10 prompt + 200 completion tokens a call "
        "at $1000.00/$2000.00 per M"
    ) in paid
    free = text(logged_in.get(url, {"model": "free/gpt-x", "version": "1"}).content.decode())
    assert "Cost: no prices set for endpoint free: cost unknown" in free


def test_the_estimate_follows_the_settings_typed(logged_in, priced):
    url = reverse("suites:launch_routes", args=[priced.public_id])
    # max_tokens 50 caps each reply: 10 calls of 10 prompt and 50 completion tokens, at most as at least.
    capped = text(
        logged_in.get(
            url, {"model": "paid/gpt-x", "version": "1", "model_settings": "max_tokens: 50"}
        ).content.decode()
    )
    assert (
        "Cost: ≈ $1.10 (up to $1.10): 10 conversations × 1 turn, ~10 prompt + 50 completion tokens" in capped
    )
    # Settings typed half-way (not YAML yet) leave the suite's.
    typing = text(
        logged_in.get(
            url, {"model": "paid/gpt-x", "version": "1", "model_settings": "{max_tok"}
        ).content.decode()
    )
    assert "Cost: ≈ $4.10 (up to $16.10)" in typing


CACHE_NOTE = "every call counted, though the response cache may answer some for nothing"


def test_the_estimate_follows_the_response_cache_box(logged_in, priced):
    url = reverse("suites:launch_routes", args=[priced.public_id])
    chosen = {"model": "paid/gpt-x", "version": "1", "cache-shown": "1"}
    ticked = text(logged_in.get(url, {**chosen, "cache": "on"}).content.decode())
    assert "Cost: ≈ $4.10 (up to $16.10): 10 conversations × 1 turn" in ticked and CACHE_NOTE in ticked
    plain = text(logged_in.get(url, chosen).content.decode())
    assert "Cost: ≈ $4.10 (up to $16.10)" in plain and CACHE_NOTE not in plain

    # A suite that caches: the box left ticked keeps the note, unticked it turns the cache off.
    cached = services.create_suite(
        owner=priced.owner, source=SUITE.replace("name: priced", "name: c\ncache: true")
    )
    url = reverse("suites:launch_routes", args=[cached.public_id])
    assert CACHE_NOTE in text(logged_in.get(url, {**chosen, "cache": "on"}).content.decode())
    assert CACHE_NOTE not in text(logged_in.get(url, chosen).content.decode())
    # A request without the box (an older page's) leaves the suite's own choice.
    assert CACHE_NOTE in text(logged_in.get(url, {"model": "paid/gpt-x", "version": "1"}).content.decode())


def test_the_cache_box_asks_for_the_estimate_again_and_a_refused_launch_keeps_its_choice(logged_in, priced):
    page = logged_in.get(reverse("suites:detail", args=[priced.public_id])).content.decode()
    box = re.search(r"<input type=\"checkbox\"[^>]*name=\"cache\"[^>]*>", page).group(0)
    routes = reverse("suites:launch_routes", args=[priced.public_id])
    assert f'hx-get="{routes}"' in box and 'hx-trigger="change"' in box and 'hx-include="closest form"' in box
    assert 'hx-target="#launch-routes"' in box

    # Launched with the box ticked and refused (no concurrency): the form comes back with its estimate so.
    refused = logged_in.post(
        reverse("suites:launch", args=[priced.public_id]),
        {"model": "paid/gpt-x", "version": "1", "cache-shown": "1", "cache": "on", "concurrency": "0"},
    )
    assert refused.status_code == 400 and CACHE_NOTE in text(refused.content.decode())


def test_a_matrix_estimate_gives_each_variant_and_their_sum(logged_in, priced):
    url = reverse("suites:launch_routes", args=[priced.public_id])
    compared = {"model": "paid/gpt-x", "compare": "paid/gpt-x@temperature=0.7\nmock", "version": "1"}
    page = text(logged_in.get(url, compared).content.decode())
    assert "Cost of paid/gpt-x: ≈ $4.10 (up to $16.10)" in page
    assert "Cost of paid/gpt-x temperature=0.7: ≈ $4.10 (up to $16.10)" in page
    assert "Cost of mock: no cost: the mock endpoint" in page
    assert "Cost of all 3 variants: ≈ $8.20 (up to $32.20)" in page
    # A variant typed half-way leaves the single run's estimate.
    half = text(logged_in.get(url, {**compared, "compare": "paid/gpt-x@temperature"}).content.decode())
    assert "Cost: ≈ $4.10 (up to $16.10)" in half and "Cost of" not in half


def test_the_cost_limit_field_reaches_the_run(logged_in, priced):
    response = logged_in.post(
        reverse("suites:launch", args=[priced.public_id]), {"concurrency": "2", "max_cost": "1.50"}
    )
    assert response.status_code == 302
    assert Run.objects.get().options == {"max_cost": 1.5}


def test_a_cost_limit_of_nothing_is_refused(logged_in, priced):
    response = logged_in.post(
        reverse("suites:launch", args=[priced.public_id]), {"concurrency": "2", "max_cost": "0"}
    )
    assert response.status_code == 400 and not Run.objects.exists()


def test_the_api_launch_takes_a_cost_limit(user, priced):
    _, token = create_token(user, "ci")
    api = Client(enforce_csrf_checks=True)
    response = api.post(
        "/api/runs",
        {"yaml": SUITE, "options": {"max_cost": 2.5}},
        content_type="application/json",
        **bearer(token),
    )
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.options == {"max_cost": 2.5}
    status = api.get(f"/api/runs/{run.pk}", **bearer(token)).json()
    assert (status["state"], status["stop_reason"]) == ("queued", "")
    refused = api.post(
        "/api/runs",
        {"yaml": SUITE, "options": {"max_cost": 0}},
        content_type="application/json",
        **bearer(token),
    )
    assert refused.status_code == 422


def test_the_api_launch_answers_what_the_run_may_cost_as_evalsite_run_says_it(user, priced):
    """`evalsite run --server` prints these lines, as a run here prints its own: from the prices the server
    knows, with the launch's limit (else the suite's); none for the mock without a limit."""
    _, token = create_token(user, "ci")
    api = Client(enforce_csrf_checks=True)

    def launch(**body) -> list[str]:
        response = api.post(
            "/api/runs", {"yaml": SUITE, **body}, content_type="application/json", **bearer(token)
        )
        assert response.status_code == 201, response.content
        return response.json()["estimate"]

    assert launch(model="paid/gpt-x", options={"max_cost": 2.5}) == [
        "≈ $4.10 (up to $16.10): 10 conversations × 1 turn, ~10 prompt + 200 completion tokens a call at "
        "$1000.00/$2000.00 per M · limit $2.50"
    ]
    assert launch(model="free/gpt-x", options={"max_cost": 2.5}) == [
        "no prices set for endpoint free: cost unknown (10 conversations × 1 turn, ~10 prompt + 200 completion "
        "tokens a call) · limit $2.50, which spends nothing without prices and so never stops the run"
    ]
    assert launch() == []  # the suite's mock, no limit: the line would say nothing


def test_with_variants_the_cost_limit_field_says_the_limit_is_each_variants(logged_in, priced):
    """A matrix is a run per variant, each with the limit of its own: the field says so beside it as soon as
    Compare with names variants (the launch routes' answer redraws the note out of band), and not for one run."""
    page = logged_in.get(reverse("suites:detail", args=[priced.public_id])).content.decode()
    assert re.search(r'<span class="[^"]*" id="launch-limit-each" aria-live="polite" >\s*</span>', page)
    url = reverse("suites:launch_routes", args=[priced.public_id])
    compared = logged_in.get(url, {"model": "paid/gpt-x", "compare": "paid/gpt-y\nmock", "version": "1"})
    (note,) = re.findall(
        r'id="launch-limit-each"[^>]*hx-swap-oob="true">([^<]*)</span>', compared.content.decode()
    )
    assert html.unescape(note) == (
        "With 3 variants, each variant's run has this limit of its own: together they may spend 3 times it."
    )
    single = logged_in.get(url, {"model": "paid/gpt-x", "compare": "", "version": "1"}).content.decode()
    assert re.search(r'id="launch-limit-each"[^>]*hx-swap-oob="true">\s*</span>', single)  # cleared
    # A matrix launch refused (the concurrency out of range) shows the form again, the note with it.
    refused = logged_in.post(
        reverse("suites:launch", args=[priced.public_id]),
        {"model": "paid/gpt-x", "compare": "mock", "concurrency": "0", "max_cost": "1"},
    )
    assert refused.status_code == 400
    assert "With 2 variants, each variant's run has this limit of its own" in text(refused.content.decode())
