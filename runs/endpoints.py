"""The endpoint registry the engine uses, built from settings (the default endpoint) and the admin."""

import math
import time

from django.conf import settings

from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry

from .models import Endpoint


def default_endpoint() -> EndpointConfig:
    return EndpointConfig(
        name=DEFAULT,
        base_url=settings.OPENAI_BASE_URL,
        api_key_env="OPENAI_API_KEY",
        max_concurrency=settings.EVALSITE_DEFAULT_CONCURRENCY,
        price_input=settings.EVALSITE_DEFAULT_PRICE_INPUT,
        price_output=settings.EVALSITE_DEFAULT_PRICE_OUTPUT,
        timeout=settings.EVALSITE_REQUEST_TIMEOUT,
        max_retries=settings.EVALSITE_MAX_RETRIES,
    )


_cached: tuple[tuple, EndpointRegistry] | None = None
_read_at = -math.inf
# Seconds a process may use the registry it last read without reading the rows again; 0 (web processes,
# the CLI) reads them every time. Workers set it at startup (runs.tasks): they ask twice per conversation.
reuse_for = 0.0


def build_registry() -> EndpointRegistry:
    """The registry as the admin and settings define it now (in a worker: as of at most `reuse_for` ago).

    The rows are read, so an endpoint edited in the admin applies to the next conversation (in a worker,
    to those starting a second later), but the registry is rebuilt only when they changed.
    """
    global _cached, _read_at
    cached = _cached
    if cached is not None and time.monotonic() - _read_at < reuse_for:
        return cached[1]
    configs = tuple(endpoint.to_config() for endpoint in Endpoint.objects.order_by("id"))
    key = (default_endpoint(), configs)
    if cached is not None and cached[0] == key:
        _read_at = time.monotonic()
        return cached[1]
    registry = EndpointRegistry(default=key[0], named={config.name: config for config in configs})
    _cached = (key, registry)
    _read_at = time.monotonic()
    return registry
