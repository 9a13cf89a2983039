"""A launch through the API is one transaction (the suite version and the run together, or neither), and an
`Idempotency-Key` makes a retried launch return the first run instead of making another version and run; a
matrix's launch takes the key the same way."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client

from endpoints.models import Endpoint
from runs.models import LaunchKey, Run, RunMatrix
from runs.tokens import create_token
from suites.models import Suite, SuiteVersion
from tests.factories import MOCK_CI_SUITE, bearer, other_project, project_of

pytestmark = pytest.mark.django_db

SUITE = MOCK_CI_SUITE.format(name="ci-suite")


@pytest.fixture
def alice(user):
    _, token = create_token(user, "ci")
    return token


def launch(token: str, payload: dict, key: str | None = None, route: str = "/api/runs"):
    headers = bearer(token) | ({"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {})
    return Client(enforce_csrf_checks=True).post(route, payload, content_type="application/json", **headers)


def launch_matrix(token: str, payload: dict, key: str | None = None):
    return launch(token, payload, key, route="/api/matrices")


def test_a_retried_launch_with_the_same_key_returns_the_first_run(alice):
    first = launch(alice, {"yaml": SUITE}, key="ci-build-41")
    assert first.status_code == 201
    again = launch(alice, {"yaml": SUITE}, key="ci-build-41")
    assert again.status_code == 200 and again.json() == first.json()
    assert Run.objects.count() == 1 and SuiteVersion.objects.count() == 1
    stored = LaunchKey.objects.get()
    assert str(stored.run_id) == first.json()["id"]
    assert stored.expires_at - stored.created_at == timedelta(hours=24)
    # A new key is a new launch (of the same, unchanged version).
    assert launch(alice, {"yaml": SUITE}, key="ci-build-42").status_code == 201
    assert Run.objects.count() == 2 and SuiteVersion.objects.count() == 1


def test_the_same_key_with_another_body_is_refused_and_makes_nothing(alice):
    assert launch(alice, {"yaml": SUITE}, key="k1").status_code == 201
    edited = SUITE.replace("What is 2+2?", "What is 2+2 exactly?")
    refused = launch(alice, {"yaml": edited}, key="k1")
    assert refused.status_code == 422 and "used for a launch with another body" in refused.json()["detail"]
    assert Run.objects.count() == 1 and SuiteVersion.objects.count() == 1


def test_keys_are_per_user_and_expire(alice, other_user):
    _, mallory = create_token(other_user, "ci", project_of(other_user))
    assert launch(alice, {"yaml": SUITE}, key="same").status_code == 201
    assert launch(mallory, {"yaml": SUITE}, key="same").status_code == 201  # not alice's run
    assert Run.objects.count() == 2
    LaunchKey.objects.update(expires_at=LaunchKey.objects.first().created_at)
    assert launch(alice, {"yaml": SUITE}, key="same").status_code == 201  # expired: a new launch
    assert Run.objects.count() == 3 and LaunchKey.objects.count() == 2


def test_a_bad_key_is_refused(alice):
    for key in ("", "x" * 201):
        response = launch(alice, {"yaml": SUITE}, key=key)
        assert response.status_code == 422 and "Idempotency-Key" in response.json()["detail"]
    assert not Run.objects.exists() and not SuiteVersion.objects.exists()


def test_a_launch_that_cannot_start_saves_no_version(alice):
    """The YAML validates, so it would be saved, but the run cannot start (it names no model): neither is
    stored, as a launch cut short anywhere between the two stores neither."""
    assert launch(alice, {"yaml": SUITE}).status_code == 201
    no_model = SUITE.replace("model: mock\n", "")
    refused = launch(alice, {"yaml": no_model}, key="k2")
    assert refused.status_code == 422 and "names no model" in refused.json()["detail"]
    assert SuiteVersion.objects.count() == 1 and Run.objects.count() == 1
    assert not LaunchKey.objects.filter(key="k2").exists()
    new = launch(alice, {"yaml": no_model.replace("name: ci-suite", "name: brand-new")})
    assert new.status_code == 422
    assert SuiteVersion.objects.count() == 1 and not Suite.objects.filter(name="brand-new").exists()


@pytest.mark.sql
@pytest.mark.django_db(transaction=True)
def test_two_launches_racing_with_one_key_make_one_run(user):
    """Both sent at once: the second waits on the first's key, then answers with its run."""
    _, token = create_token(user, "ci")
    start = threading.Barrier(2)
    answers: list = []

    def send() -> None:
        try:
            start.wait()
            answers.append(launch(token, {"yaml": SUITE}, key="race"))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(answer.status_code for answer in answers) == [200, 201]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert Run.objects.count() == 1 and SuiteVersion.objects.count() == 1


MATRIX = {"yaml": SUITE, "variants": ["mock", "mock@temperature=0.5"]}


def test_a_retried_matrix_launch_with_the_same_key_returns_the_first_matrix(alice):
    first = launch_matrix(alice, MATRIX, key="ci-matrix-7")
    assert first.status_code == 201, first.content
    again = launch_matrix(alice, MATRIX, key="ci-matrix-7")
    assert again.status_code == 200 and again.json() == first.json()
    assert RunMatrix.objects.count() == 1 and Run.objects.count() == 2 and SuiteVersion.objects.count() == 1
    stored = LaunchKey.objects.get()
    assert str(stored.matrix_id) == first.json()["id"] and stored.run_id is None
    assert launch_matrix(alice, MATRIX, key="ci-matrix-8").status_code == 201
    assert RunMatrix.objects.count() == 2 and SuiteVersion.objects.count() == 1


def test_a_matrix_key_sent_with_another_body_or_for_a_run_is_refused_and_makes_nothing(alice):
    assert launch_matrix(alice, MATRIX, key="k1").status_code == 201
    other_variants = {**MATRIX, "variants": ["mock", "mock@temperature=0.9"]}
    refused = launch_matrix(alice, other_variants, key="k1")
    assert refused.status_code == 422 and "used for a launch with another body" in refused.json()["detail"]
    as_run = launch(alice, {"yaml": SUITE}, key="k1")
    assert as_run.status_code == 422 and "used for a launch with another body" in as_run.json()["detail"]
    assert RunMatrix.objects.count() == 1 and Run.objects.count() == 2
    bad = launch_matrix(alice, MATRIX, key="")
    assert bad.status_code == 422 and "Idempotency-Key" in bad.json()["detail"]
    assert RunMatrix.objects.count() == 1


def test_a_matrix_launch_that_cannot_start_keeps_no_key(alice):
    """Every run of a matrix starts or none does; the key of a refused launch is free for the next one."""
    Endpoint.objects.create(name="theirs", base_url="http://127.0.0.1:9/v1", project=other_project())
    refused = launch_matrix(alice, {**MATRIX, "variants": ["mock", "theirs/good"]}, key="k3")
    assert refused.status_code == 422 and "theirs/good" in refused.json()["detail"]
    assert not LaunchKey.objects.exists() and not RunMatrix.objects.exists() and not Run.objects.exists()
    assert launch_matrix(alice, MATRIX, key="k3").status_code == 201
