"""Wrong API tokens are throttled per client address, as failed sign-ins are (django-axes): past the limit the
address gets 429 with Retry-After for the cool-off, the right token included, while the token's owner still
signs in on the web and other addresses still use the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.urls import reverse

from runs.tokens import create_token
from tests.factories import bearer

pytestmark = pytest.mark.django_db

PASSWORD = "pw-alice-123"  # the `user` fixture's


def runs(client: Client, token: str, address: str = "10.0.0.1"):
    return client.get("/api/runs", REMOTE_ADDR=address, **bearer(token))


def test_wrong_tokens_from_one_address_are_refused_past_the_limit(user):
    _, token = create_token(user, "ci")
    client = Client(enforce_csrf_checks=True)
    limit = settings.EVALSITE_TOKEN_FAILURE_LIMIT
    assert limit == 20 and timedelta(minutes=15) == settings.AXES_COOLOFF_TIME
    statuses = [runs(client, f"evs_wrong-{attempt}").status_code for attempt in range(limit + 30)]
    assert statuses[: limit - 1] == [401] * (limit - 1)
    assert statuses[limit - 1 :] == [429] * 31  # the failure that reaches the limit locks the address

    refused = runs(client, token)  # a lucky guess gains nothing while the address cools off
    wait = int(refused["Retry-After"])  # the cool-off's end, from the lockout a moment ago
    assert refused.status_code == 429 and 870 <= wait <= 900
    assert refused.json()["detail"] == f"too many wrong API tokens from this address: retry in {wait} s"

    assert runs(client, token, address="10.0.0.2").status_code == 200  # other addresses are not throttled
    # The token's owner signs in on the web from the throttled address: axes keys sign-ins on the username.
    browser = Client()
    signed_in = browser.post(
        reverse("login"), {"username": user.username, "password": PASSWORD}, REMOTE_ADDR="10.0.0.1"
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == reverse("suites:list")
    # The failures are listed in the admin, under the stand-in username, with the address.
    attempt = AccessAttempt.objects.get(ip_address="10.0.0.1")
    assert attempt.username == "(API token)" and attempt.failures_since_start == limit

    AccessAttempt.objects.update(attempt_time=attempt.attempt_time - timedelta(minutes=16))
    assert runs(client, token).status_code == 200  # the cool-off is over


def test_a_locked_sign_in_does_not_lock_that_users_tokens(user):
    _, token = create_token(user, "ci")
    browser = Client()
    for attempt in range(settings.EVALSITE_LOGIN_FAILURE_LIMIT):
        browser.post(reverse("login"), {"username": user.username, "password": f"guess-{attempt}"})
    locked = browser.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.content.decode()
    assert runs(Client(), token, address="127.0.0.1").status_code == 200


def test_a_wrong_token_does_not_shorten_a_sign_in_lockout(user):
    """axes clears attempts older than the cool-off of the request it handles: one cool-off for both."""
    browser = Client()
    for attempt in range(settings.EVALSITE_LOGIN_FAILURE_LIMIT):
        browser.post(reverse("login"), {"username": user.username, "password": f"guess-{attempt}"})
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=6))
    assert runs(Client(), "evs_wrong", address="10.0.0.3").status_code == 401
    locked = browser.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    assert locked.status_code == 429


def test_the_address_is_the_one_axes_reads_behind_a_proxy(user, settings):
    settings.AXES_CLIENT_IP_CALLABLE = lambda request: request.META["HTTP_X_FORWARDED_FOR"].split(",")[0]
    settings.EVALSITE_TOKEN_FAILURE_LIMIT = 3
    client = Client()
    _, token = create_token(user, "ci")
    forwarded = {"HTTP_X_FORWARDED_FOR": "203.0.113.7"}
    for _ in range(3):
        client.get("/api/runs", REMOTE_ADDR="10.0.0.9", **forwarded, **bearer("evs_wrong"))
    assert client.get("/api/runs", REMOTE_ADDR="10.0.0.9", **forwarded, **bearer(token)).status_code == 429
    other = {"HTTP_X_FORWARDED_FOR": "198.51.100.4"}  # another client behind the same proxy
    assert client.get("/api/runs", REMOTE_ADDR="10.0.0.9", **other, **bearer(token)).status_code == 200
