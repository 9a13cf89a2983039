"""engine/clients/mock.py's MockClient: the `mock` model's rules, its estimated and free usage, its embeddings."""

from __future__ import annotations

import pytest

from engine.checks import cosine
from engine.clients import (
    MockClient,
    bag_of_words_vector,
    estimate_tokens,
)
from engine.schema import MockSpec
from tests.engine.doubles import assistant, sys_, user


def mock_spec(**kwargs) -> MockSpec:
    return MockSpec(
        rules=[
            {"when": "*recalculate*", "reply": "105"},
            {"when": "*15 * 7*", "reply": "100"},
            {"when": "*", "reply": "catch-all"},
        ],
        **kwargs,
    )


def test_mock_first_matching_rule_wins():
    """MockClient: the first rule (in order) whose glob matches the latest user message wins."""
    client = MockClient(mock_spec())
    # "*15 * 7*" and "*" both match; the earlier rule wins.
    assert client.complete("m", [user("What is 15 * 7?")]).text == "100"
    # "*recalculate*" comes first even though "*15 * 7*" also matches.
    assert client.complete("m", [user("Please RECALCULATE 15 * 7")]).text == "105"


def test_mock_matches_only_the_latest_user_message():
    """MockClient reads the latest user message, not earlier ones or the assistant's."""
    client = MockClient(MockSpec(rules=[{"when": "*15 * 7*", "reply": "100"}], default="dunno"))
    messages = [user("What is 15 * 7?"), assistant("100"), user("Are you sure?")]
    assert client.complete("m", messages).text == "dunno"


def test_mock_default_when_no_rule_matches():
    """MockClient: the spec's default when nothing matches; the built-in default without a spec."""
    assert MockClient(MockSpec(default="no idea")).complete("m", [user("x")]).text == "no idea"
    assert "mock" in MockClient().complete("m", [user("x")]).text.lower()


def test_mock_usage_is_estimated_and_free_and_latency_uses_sleep():
    """MockClient: estimated usage, zero cost, latency through the injected sleep."""
    slept: list[float] = []
    client = MockClient(mock_spec(latency_ms=250), sleep=slept.append)
    completion = client.complete("m", [sys_("S" * 8), user("What is 15 * 7?")])
    assert slept == [0.25]
    assert completion.cost == 0.0
    assert completion.usage.estimated is True
    assert completion.usage.completion_tokens == estimate_tokens("100")
    assert completion.usage.prompt_tokens > 0
    no_latency: list[float] = []
    MockClient(mock_spec(), sleep=no_latency.append).complete("m", [user("x")])
    assert no_latency == []


def test_mock_embeddings_are_stable_bag_of_words():
    """MockClient.embed: same words give the same vector; different words are less similar."""
    vectors, usage, cost = MockClient().embed("e", ["the cat sat", "sat the cat", "quantum flux"])
    assert cosine(vectors[0], vectors[1]) == pytest.approx(1.0)
    assert cosine(vectors[0], vectors[2]) < 0.9
    assert usage.estimated and cost == 0.0
    assert bag_of_words_vector("") == [0.0] * 64
