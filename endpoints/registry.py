"""The endpoints the engine can call: the default one from settings, and the named ones the admin defines."""

from django.conf import settings

from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.retries import LOCAL_PAUSES, PauseBoard


def default_endpoint() -> EndpointConfig:
    return EndpointConfig(
        name=DEFAULT,
        base_url=settings.OPENAI_BASE_URL,
        api_key_env="OPENAI_API_KEY",
        max_concurrency=settings.EVALSITE_DEFAULT_CONCURRENCY,
        price_input=settings.EVALSITE_DEFAULT_PRICE_INPUT,
        price_output=settings.EVALSITE_DEFAULT_PRICE_OUTPUT,
        timeout=settings.EVALSITE_REQUEST_TIMEOUT,
        retry_seconds=settings.EVALSITE_RETRY_SECONDS,
        retry_max_wait=settings.EVALSITE_RETRY_MAX_WAIT,
        max_retries=settings.EVALSITE_MAX_RETRIES,
    )


EVERY_PROJECT = object()  # named_endpoints' default: every endpoint, whichever project it belongs to


def named_endpoints(project_id=EVERY_PROJECT) -> tuple[EndpointConfig, ...]:
    """The named endpoints: all of them, or those a project may use (shared ones and its own; the shared
    ones alone for None)."""
    # Imported here: `evalsite run` reads the default endpoint from settings alone, without Django's apps.
    from django.db.models import Q

    from .models import Endpoint

    endpoints = Endpoint.objects.order_by("id")
    if project_id is not EVERY_PROJECT:
        endpoints = endpoints.filter(Q(project__isnull=True) | Q(project_id=project_id))
    return tuple(endpoint.to_config() for endpoint in endpoints)


def assemble(
    default: EndpointConfig, named: tuple[EndpointConfig, ...], pauses: PauseBoard = LOCAL_PAUSES
) -> EndpointRegistry:
    """A registry of these endpoints whose clients share `pauses`."""
    return EndpointRegistry(default=default, named={config.name: config for config in named}, pauses=pauses)


def current_registry() -> EndpointRegistry:
    """The registry as defined now, for checking where a suite's models go (it makes no calls)."""
    return assemble(default_endpoint(), named_endpoints())


def project_registry(project_id: int | None) -> EndpointRegistry:
    """The registry as a project's suites see it: another project's endpoint is in it no more than one that
    does not exist, so what the pages and the API say of a reference to it is what they say of a typo, and
    names nothing of that project (nor its URL, nor its prices)."""
    return assemble(default_endpoint(), named_endpoints(project_id))
