"""Which endpoint a model reference names, and the client that calls it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..retries import LOCAL_PAUSES, PauseBoard
from ..schema import MockSpec
from .aio import AsyncOpenAIClient
from .base import DEFAULT, MOCK, ChatClient, EndpointConfig, EndpointError
from .http import OpenAIClient
from .mock import MockClient


@dataclass
class EndpointRegistry:
    """Maps model references to endpoints.

    "endpoint/model" picks a named endpoint when "endpoint" is one, and "default/model" the default endpoint
    (the model id may hold slashes of its own: "default/anthropic/claude-3.5-sonnet"); a bare model id goes to
    the default endpoint. "mock" (or "mock/anything") is the built-in mock. A "name/model" whose name is no
    endpoint goes whole to the default endpoint here, as a run stored with one plays it; every launch refuses
    such a reference first (engine.endpoint_checks.no_endpoint).
    """

    default: EndpointConfig
    named: dict[str, EndpointConfig] = field(default_factory=dict)
    pauses: PauseBoard = LOCAL_PAUSES  # rate-limit pauses, shared by every client of an endpoint

    def resolve(self, ref: str) -> tuple[str, str]:
        """Returns (endpoint name, model id to send)."""
        ref = ref.strip()
        if ref == MOCK:
            return MOCK, MOCK
        prefix, sep, rest = ref.partition("/")
        if sep and rest:
            if prefix == MOCK:
                return MOCK, rest
            if prefix == DEFAULT:
                return DEFAULT, rest
            if prefix in self.named:
                return prefix, rest
        return DEFAULT, ref

    def endpoint(self, name: str) -> EndpointConfig | None:
        if name == DEFAULT:
            return self.default
        return self.named.get(name)

    def endpoint_of(self, ref: str) -> tuple[str, EndpointConfig | None]:
        """Where a model reference goes: the endpoint's name and its settings (None for the mock), as
        engine.cost.estimate prices a reference."""
        name, _ = self.resolve(ref)
        return name, self.endpoint(name)

    def client(
        self, name: str, mock: MockSpec | None = None, *, asynchronous: bool = False, secrets: bool = False
    ) -> ChatClient:
        """The endpoint's client; `asynchronous`: one whose chat calls can also be awaited; `secrets`: one
        that fills the suite's `{{secret:NAME}}` from the environment in what it sends (the model under
        test's)."""
        if name == MOCK:
            return MockClient(mock or MockSpec())
        endpoint = self.endpoint(name)
        if endpoint is None:
            raise EndpointError(f"unknown endpoint {name!r}")
        return (AsyncOpenAIClient if asynchronous else OpenAIClient)(
            endpoint, pauses=self.pauses, secrets=secrets
        )

    def with_timeouts(
        self, per_endpoint: Mapping[str, float], every: float | None = None
    ) -> EndpointRegistry:
        """This registry with its request timeouts overridden: `every` for each endpoint, else
        `per_endpoint`'s for the endpoints it names (`default` for the default one)."""
        if every is None and not per_endpoint:
            return self

        def timed(config: EndpointConfig) -> EndpointConfig:
            seconds = every if every is not None else per_endpoint.get(config.name)
            return config if seconds is None else replace(config, timeout=float(seconds))

        named = {name: timed(config) for name, config in self.named.items()}
        return EndpointRegistry(default=timed(self.default), named=named, pauses=self.pauses)

    def max_concurrency(self, name: str) -> int:
        endpoint = self.endpoint(name)
        return endpoint.max_concurrency if endpoint else 1_000
