"""A run's cost on its pages and in its API: a run on an endpoint without prices says its cost is unknown,
naming the endpoint, where it showed $0.0000 as if the calls were free; the mock's $0 stays. What makes a
cost unknown is a call made to an endpoint without prices, not one the suite names and never calls."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from endpoints.models import Endpoint
from runs.models import Turn
from runs.services import create_run, regrade
from runs.tokens import create_token
from suites.services import create_suite
from tests.conftest import FAKE_KEY_ENV
from tests.factories import MOCK_CI_SUITE, bearer, body, play

pytestmark = pytest.mark.django_db

ON_FAKE = """\
name: on-fake
model: fake/test-model
judge: mock
evals:
  - {id: hello, prompt: Say hello, checks: [{contains: OK}]}
"""


def _cost_card(page: str) -> str:
    """The progress card's cost, as text."""
    found = re.search(r'data-testid="run-cost"[^>]*>(.*?)</dd>', page, re.S)
    assert found, "the run page shows no cost"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def _played(user, source: str):
    return play(create_run(version=create_suite(owner=user, source=source).latest_version, user=user))


def test_a_run_on_an_endpoint_without_prices_shows_its_cost_as_unknown(logged_in, user, fake_endpoint):
    run = _played(user, ON_FAKE)
    assert run.status == "passed" and run.unpriced == ["fake"]
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert _cost_card(page) == "unknown no prices for endpoint fake"
    row = re.search(r'<td class="num mono">([^<]*)</td>', page)
    assert row and row.group(1) == "unknown"  # the conversation's cost in the table
    transcript = logged_in.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert "no prices for endpoint fake" in transcript and "$0.0000" not in transcript

    _, token = create_token(user, "ci")
    results = json.loads(body(Client().get(f"/api/runs/{run.pk}/results", **bearer(token))))
    assert (results["totals"]["cost"], results["unpriced"], results["cost_known"]) == (0.0, ["fake"], False)
    status = Client().get(f"/api/runs/{run.pk}", **bearer(token)).json()
    assert status["unpriced"] == ["fake"]
    markdown = body(Client().get(f"/api/runs/{run.pk}/results.md", **bearer(token))).decode()
    assert "cost unknown (no prices for endpoint fake)" in markdown


def test_with_prices_the_cost_is_shown_in_dollars(logged_in, user, fake_endpoint):
    fake_endpoint.price_input = fake_endpoint.price_output = 1000
    fake_endpoint.save()
    run = _played(user, ON_FAKE)
    assert run.unpriced == []
    cost = run.conversations.get().cost
    assert cost > 0
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert _cost_card(page) == f"${cost:.4f}"


def test_a_mock_run_costs_nothing_rather_than_an_unknown_amount(logged_in, user):
    run = _played(user, MOCK_CI_SUITE.format(name="on-mock"))
    assert run.unpriced == []
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert _cost_card(page) == "$0.0000"


def test_a_regrade_calls_the_judges_alone_so_the_models_prices_do_not_matter(user, fake_endpoint):
    source = _played(user, ON_FAKE)
    again = play(regrade(source, version=source.suite_version, user=user))
    assert source.unpriced == ["fake"] and again.unpriced == []


# --- a judge on another endpoint, without prices, while the model's has them ----------------------------------

JUDGED_ELSEWHERE = """\
name: judged-elsewhere
model: fake/test-model
judge: slow/judge-model
evals:
  - {id: hello, prompt: Say hello, checks: [CHECK]}
"""
NEVER_ASKED = JUDGED_ELSEWHERE.replace("CHECK", "{contains: score}")
ASKED = JUDGED_ELSEWHERE.replace("CHECK", "{llm_judge: {criteria: Says hello}}")


@pytest.fixture
def slow_endpoint(fake_endpoint, fake_openai):
    """`slow`, a second endpoint on the fake server, without prices, for the judges; `fake`, the model's, has
    prices. Every call is answered with a verdict the judges read and `contains: score` passes."""
    fake_endpoint.price_input = fake_endpoint.price_output = 1000
    fake_endpoint.save()
    fake_openai.default_reply = '{"score": 1, "reason": "ok"}'
    return Endpoint.objects.create(
        name="slow", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_concurrency=50, timeout=5
    )


def test_a_judge_without_prices_that_no_check_asks_leaves_the_cost_known(
    logged_in, user, slow_endpoint, fake_openai
):
    run = _played(user, NEVER_ASKED)
    assert run.status == "passed" and run.unpriced == []
    assert {request["model"] for request in fake_openai.chat_requests()} == {"test-model"}
    cost = run.conversations.get().cost
    assert cost > 0
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert _cost_card(page) == f"${cost:.4f}"
    _, token = create_token(user, "ci")
    results = json.loads(body(Client().get(f"/api/runs/{run.pk}/results", **bearer(token))))
    assert (results["unpriced"], results["cost_known"]) == ([], True)


def test_a_judge_without_prices_that_is_asked_makes_the_cost_a_lower_bound(logged_in, user, slow_endpoint):
    run = _played(user, ASKED)
    assert run.status == "passed" and run.unpriced == ["slow"]
    (turn,) = Turn.objects.filter(conversation__run=run)
    assert turn.record["unpriced"] == ["slow"]  # the turn says where its calls went without prices
    cost = run.conversations.get().cost
    assert cost > 0  # the model's calls, which have prices
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert _cost_card(page) == f"at least ${cost:.4f} no prices for endpoint slow"


def test_graders_that_judge_after_the_last_turn_name_their_endpoint_on_the_run(user, slow_endpoint):
    source = NEVER_ASKED + (
        "graders:\n  quality: {kind: llm_judge, model: slow/grader-model, rubric: 'Rate {submission}'}\n"
    )
    run = _played(user, source)
    assert run.status == "passed" and run.unpriced == ["slow"]
    (turn,) = Turn.objects.filter(conversation__run=run)
    assert turn.record["unpriced"] == []  # stored before the graders judged: the run names it at the end
