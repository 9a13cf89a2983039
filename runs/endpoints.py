"""The endpoint registry the engine uses, built from settings (the default endpoint) and the admin."""

from django.conf import settings
from django.db import connection

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


def build_registry() -> EndpointRegistry:
    """The registry as the admin and settings define it now.

    Workers ask for it once per conversation. The rows are read every time, so an endpoint edited in the
    admin applies to the next conversation, but the registry is rebuilt only when they changed.
    """
    global _cached
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Endpoint._meta.db_table} ORDER BY id")
        key = (default_endpoint(), tuple(cursor.fetchall()))
    cached = _cached
    if cached is not None and cached[0] == key:
        return cached[1]
    registry = EndpointRegistry(
        default=key[0],
        named={endpoint.name: endpoint.to_config() for endpoint in Endpoint.objects.all()},
    )
    _cached = (key, registry)
    return registry
