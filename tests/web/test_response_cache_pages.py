"""A cached turn on its transcript: "cached" and what it saved where a reply shows its latency and cost, not
"0 ms · $0.000000"; "cost unknown" on an endpoint without prices. Played twice through the server's store,
on the fake endpoint, which counts the requests."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from runs.services import create_run
from suites.services import create_suite
from tests.factories import play

# Transactional: the cache is written from the conversations' own thread, which a test transaction would lock out.
pytestmark = pytest.mark.django_db(transaction=True)

SUITE = """\
name: cached
model: fake/test-model
judge: mock
cache: {model: true}
evals:
  - {id: hello, prompt: Say hello, checks: [{contains: OK}]}
"""


def _turn_meta(client, run) -> str:
    page = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    found = re.search(r'<div class="turn-meta">(.*?)</div>', page, re.S)
    assert found, "the transcript shows no turn"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def _played_twice(user, fake_openai):
    version = create_suite(owner=user, source=SUITE).latest_version
    first = play(create_run(version=version, user=user))
    asked = len(fake_openai.chat_requests())
    second = play(create_run(version=version, user=user))
    # The second run's reply came from the cache.
    assert asked == 1 and len(fake_openai.chat_requests()) == asked
    return first, second


def test_a_cached_turn_says_cached_and_what_it_saved(logged_in, user, fake_endpoint, fake_openai):
    fake_endpoint.price_input, fake_endpoint.price_output = 1000, 2000
    fake_endpoint.save()
    first, second = _played_twice(user, fake_openai)
    spent = first.conversations.get().cost
    assert spent > 0 and second.conversations.get().saved_cost == pytest.approx(spent)
    meta = _turn_meta(logged_in, second)
    assert f"cached ${spent:.6f} saved" in meta
    assert " ms" not in meta and "$0.000000" not in meta
    assert " ms" in _turn_meta(logged_in, first)  # a reply the model gave shows its latency


def test_a_cached_turn_on_an_endpoint_without_prices_says_its_cost_is_unknown(
    logged_in, user, fake_endpoint, fake_openai
):
    _, second = _played_twice(user, fake_openai)
    meta = _turn_meta(logged_in, second)
    assert "cached cost unknown" in meta and "saved" not in meta and "$" not in meta
