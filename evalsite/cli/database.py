"""What the commands that read the server's database share: Django set up in terminal mode, and the
endpoints as the workers see them."""

from __future__ import annotations

import os

import django
from django.core.exceptions import ImproperlyConfigured

from engine.clients import EndpointRegistry
from evalsite import terminal

from .common import UserError


def setup_django() -> None:
    """Django in terminal mode (evalsite/terminal.py): no SECRET_KEY needed, nothing created."""
    terminal.active = True
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    try:
        django.setup()
    except ImproperlyConfigured as exc:
        raise UserError(f"settings: {exc}") from None


def endpoint_registry() -> tuple[EndpointRegistry, str | None]:
    """The endpoints as the workers see them, and why the named ones could not be read (None if they were)."""
    setup_django()
    # Imported once Django is set up: the CLI runs suites without Django configured.
    from runs.endpoints import terminal_registry

    return terminal_registry()
