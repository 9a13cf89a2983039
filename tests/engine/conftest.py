"""The engine layer: engine/, the standalone CLI and the fake endpoint, with no database. A test here that asks
for the database belongs in tests/web/."""

from __future__ import annotations

import pytest

from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here) and item.get_closest_marker("django_db") is not None:
            raise pytest.UsageError(f"{item.nodeid} uses the database: move it to tests/web/")


@pytest.fixture
def registry():
    """A default endpoint and a named `fast` one, neither reachable: for resolving names, not calling models."""
    return EndpointRegistry(
        default=EndpointConfig(name=DEFAULT, base_url="http://default.invalid/v1"),
        named={"fast": EndpointConfig(name="fast", base_url="http://fast.invalid/v1", max_concurrency=2)},
    )
