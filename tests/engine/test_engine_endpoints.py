"""engine/clients/: the endpoint registry (`endpoint/model` references, clients, cost per token) and the
token estimate."""

from __future__ import annotations

import pytest

from engine.clients import (
    DEFAULT,
    MOCK,
    EndpointConfig,
    EndpointError,
    MockClient,
    OpenAIClient,
    estimate_tokens,
)
from engine.results import Usage
from engine.schema import MockSpec


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("gpt-4o", (DEFAULT, "gpt-4o")),
        ("  gpt-4o  ", (DEFAULT, "gpt-4o")),
        ("anthropic/claude-3.5-sonnet", (DEFAULT, "anthropic/claude-3.5-sonnet")),
        ("fast/gpt-x", ("fast", "gpt-x")),
        ("fast/org/model-y", ("fast", "org/model-y")),
        ("default/anthropic/claude-3.5-sonnet", (DEFAULT, "anthropic/claude-3.5-sonnet")),
        ("default/gpt-4o", (DEFAULT, "gpt-4o")),
        ("slow/gpt-x", (DEFAULT, "slow/gpt-x")),
        ("mock", (MOCK, MOCK)),
        ("mock/x", (MOCK, "x")),
    ],
)
def test_registry_resolve(registry, ref, expected):
    """resolve: plain and unknown-prefix ids go whole to default (a launch refuses the latter first); known
    endpoint/model and default/model split; mock."""
    assert registry.resolve(ref) == expected


def test_registry_clients(registry):
    """client(): mock gives a MockClient with the suite's rules; named gives an OpenAIClient; unknown errors."""
    spec = MockSpec(rules=[{"when": "*", "reply": "hi"}])
    mock = registry.client(MOCK, spec)
    assert isinstance(mock, MockClient) and mock.is_mock and mock.spec is spec
    fast = registry.client("fast")
    assert isinstance(fast, OpenAIClient) and fast.label == "fast" and not fast.is_mock
    assert registry.client(DEFAULT).endpoint.base_url == "http://default.invalid/v1"
    with pytest.raises(EndpointError, match="unknown endpoint"):
        registry.client("nope")
    assert registry.max_concurrency("fast") == 2
    assert registry.max_concurrency(MOCK) >= 100


def test_endpoint_cost_per_million_tokens():
    """EndpointConfig.cost: prices are USD per million prompt and completion tokens."""
    endpoint = EndpointConfig(name="x", base_url="http://x.invalid", price_input=2.0, price_output=10.0)
    assert endpoint.cost(Usage(prompt_tokens=1_000_000, completion_tokens=500_000)) == pytest.approx(7.0)


def test_estimate_tokens():
    """estimate_tokens: about 4 characters a token, at least 1 for non-empty text, 0 for empty."""
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("x" * 40) == 10
    assert estimate_tokens("x" * 41) == 11
