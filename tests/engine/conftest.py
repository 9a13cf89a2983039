"""The engine layer: engine/, the standalone CLI and the fake endpoint, with no database. A test here that asks
for the database belongs in tests/web/."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here) and item.get_closest_marker("django_db") is not None:
            raise pytest.UsageError(f"{item.nodeid} uses the database: move it to tests/web/")
