"""Chat clients: any OpenAI-compatible endpoint, and the built-in mock.

Retries live here and only here: the openai client is built with max_retries=0 and Celery tasks never
retry model errors. A call retries 429, 408, 409 and 5xx responses, timeouts, dropped connections and 200
answers that are not a chat completion (gateways send those for moments too) for up to the endpoint's
`retry_seconds`, with exponential backoff and full jitter, honouring Retry-After, each wait capped at
`retry_max_wait`. A 429 pauses the endpoint for every caller (engine.retries). A backoff of our own choosing
ends early once the endpoint answers another call, so waiting calls retry soon after an outage ends. When
it gives up it raises EndpointError, which marks that one conversation `error`.

base: endpoint settings, the completion, the error; answers: reading what an endpoint said; retrying: one
call's retries; http: the threaded client (openai); aio: the asyncio client (aiohttp); mock: the built-in
mock; registry: model references to endpoints and clients.
"""

from .aio import AsyncOpenAIClient
from .answers import RATE_LIMIT_WAIT, UNREADABLE_REPLY
from .base import (
    DEFAULT,
    MOCK,
    ChatClient,
    Completion,
    EndpointConfig,
    EndpointError,
    default_endpoint_from_env,
    estimate_tokens,
)
from .http import OpenAIClient, warm_up, with_secrets
from .mock import MockClient, bag_of_words_vector
from .registry import EndpointRegistry
from .retrying import BACKOFF_MAX_WAIT

__all__ = [
    "BACKOFF_MAX_WAIT",
    "DEFAULT",
    "MOCK",
    "RATE_LIMIT_WAIT",
    "UNREADABLE_REPLY",
    "AsyncOpenAIClient",
    "ChatClient",
    "Completion",
    "EndpointConfig",
    "EndpointError",
    "EndpointRegistry",
    "MockClient",
    "OpenAIClient",
    "bag_of_words_vector",
    "default_endpoint_from_env",
    "estimate_tokens",
    "warm_up",
    "with_secrets",
]
