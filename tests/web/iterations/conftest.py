"""The suite of repeated evals and simulated users these pages show, stored for the test user."""

from __future__ import annotations

import pytest

from suites import services as suite_services
from tests.web.iterated_runs import SUITE


@pytest.fixture
def version(user):
    return suite_services.create_suite(owner=user, source=SUITE).latest_version
