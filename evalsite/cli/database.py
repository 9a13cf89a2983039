"""What the commands that read the server's database share: Django set up in terminal mode, and the
endpoints as the workers see them."""

from __future__ import annotations

import os

import django
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from engine.clients import EndpointRegistry
from evalsite import terminal

from .common import UserError


def setup_django(apps: bool = True) -> None:
    """Django in terminal mode (evalsite/terminal.py): no SECRET_KEY needed, nothing created. Without `apps`,
    only the settings are read: what a command that touches no database needs."""
    terminal.active = True
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    try:
        if apps:
            django.setup()
        else:
            _ = settings.EVALSITE_DEFAULT_CONCURRENCY  # read now, so a settings error is said here
    except ImproperlyConfigured as exc:
        raise UserError(f"settings: {exc}") from None


def endpoint_registry(named: bool = True) -> tuple[EndpointRegistry, str | None]:
    """The endpoints as the workers see them, and why the named ones could not be read (None if they were).

    `named`: whether a reference may name an endpoint. Without, the default endpoint and `mock` are all a run
    can use: they come from the settings, and Django's apps and the database are left alone."""
    if not named:
        setup_django(apps=False)
        # Imported once the settings are named: it reads them.
        from endpoints.registry import default_endpoint

        return EndpointRegistry(default=default_endpoint()), None
    setup_django()
    # Imported once Django is set up: the CLI runs suites without Django configured.
    from runs.endpoints import terminal_registry

    return terminal_registry()
