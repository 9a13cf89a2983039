"""What every chat client shares: an endpoint's settings, the completion it gives, the error it raises."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Protocol

from ..redact import redact
from ..results import DEFAULT_ENDPOINT, Usage
from ..schema.settings import ModelSettings

MOCK = "mock"
DEFAULT = DEFAULT_ENDPOINT
RETRY_SECONDS = 300.0
RETRY_MAX_WAIT = 60.0


class EndpointError(Exception):
    """The endpoint could not give an answer; the message says why, for the person reading the run.

    The message is redacted here, as it is built: endpoints may echo the key they were sent.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(redact(message))
        self.param = param  # the request field an OpenAI-style error body names, when it names one


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"  # the *name* of the variable; keys never live in the database
    max_concurrency: int = 10
    price_input: float = 0.0  # USD per million prompt tokens
    price_output: float = 0.0  # USD per million completion tokens
    timeout: float = 60.0
    retry_seconds: float = RETRY_SECONDS  # how long one call may keep retrying, waits included
    retry_max_wait: float = RETRY_MAX_WAIT  # the longest single wait, Retry-After included
    max_retries: int | None = None  # an optional cap on the number of retries as well
    string_only: bool = False

    @property
    def priced(self) -> bool:
        """Whether it has prices: without them its calls count 0 in every cost, and a cost that counts them is
        unknown (0 for both means no price is known, not a free endpoint)."""
        return bool(self.price_input or self.price_output)

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.price_input + usage.completion_tokens * self.price_output) / 1e6


def default_endpoint_from_env(**overrides) -> EndpointConfig:
    base_url = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    return EndpointConfig(name=DEFAULT, base_url=base_url, api_key_env="OPENAI_API_KEY", **overrides)


@dataclass
class Completion:
    text: str
    usage: Usage
    cost: float
    latency_ms: int
    # How the reply ended, as the endpoint said (`stop`, `length`, `content_filter`, …; None: not said), the
    # model's refusal when it sent one instead of content, and whether it called tools: what tells a finished
    # reply from one that is not (engine.replies).
    finish_reason: str | None = None
    refusal: str | None = None
    tool_calls: bool = False
    calls: tuple[dict, ...] = ()  # each tool call as {id, name, arguments}: engine.clients.answers
    # Answered from the response cache (engine.cache): nothing spent, and what the call would have cost at this
    # endpoint's prices is saved.
    cached: bool = False
    saved_cost: float = 0.0


class ChatClient(Protocol):
    label: str
    is_mock: bool

    def complete(
        self,
        model: str,
        messages: list[dict],
        *,
        temperature: float | None = None,
        tools: list[dict] | None = None,
        settings: ModelSettings | None = None,
    ) -> Completion: ...

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]: ...


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0
