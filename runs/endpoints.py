"""The endpoint registry the engine uses, built from settings (the default endpoint) and the admin."""

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


def build_registry() -> EndpointRegistry:
    return EndpointRegistry(
        default=default_endpoint(),
        named={endpoint.name: endpoint.to_config() for endpoint in Endpoint.objects.all()},
    )
