"""Fixtures of the web layer: the Django site with its test database (pages, API, admin, services, selectors)."""

from __future__ import annotations

import pytest


@pytest.fixture
def logged_in(client, user):
    """The test client, signed in as `user`."""
    client.force_login(user)
    return client


@pytest.fixture
def admin_client(client, django_user_model):
    """The test client, signed in as a superuser (kept as `admin_client.admin`)."""
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client.force_login(admin)
    client.admin = admin
    return client
