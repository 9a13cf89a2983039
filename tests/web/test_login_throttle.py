"""Sign-in throttling (django-axes): after 5 wrong passwords for a username from one address, that pair is
refused for a while, the right password included; other users and the CLI are untouched. After 20 wrong
passwords from one address whatever the usernames (password spraying), the address is; the 429 says when to
come back (Retry-After)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.urls import reverse

from tests.conftest import ROOT

PASSWORD = "pw-alice-123"  # the `user` fixture's
OTHER_PASSWORD = "pw-mallory-123"  # the `other_user` fixture's

pytestmark = pytest.mark.django_db


def sign_in(client, username: str, password: str, url: str | None = None):
    return client.post(url or reverse("login"), {"username": username, "password": password})


def signed_in_as(client) -> str | None:
    from django.contrib.auth import get_user

    user = get_user(client)
    return user.get_username() if user.is_authenticated else None


def test_sixty_wrong_passwords_lock_the_username_after_five(client, user, other_user):
    assert settings.EVALSITE_LOGIN_FAILURE_LIMIT == 5
    statuses = [sign_in(client, user.username, f"guess-{attempt}").status_code for attempt in range(60)]
    assert statuses[:4] == [200] * 4  # the form again, saying the password is wrong
    assert statuses[4:] == [429] * 56  # the fifth failure locks, and every try after it is refused

    refused = sign_in(client, user.username, PASSWORD)
    assert refused.status_code == 429
    page = refused.content.decode()
    assert "Too many failed sign-ins" in page and "alice" in page and "Wait 15\xa0minutes" in page
    assert signed_in_as(client) is None

    # Another user signing in from the same address is not locked out.
    welcomed = sign_in(client, other_user.username, OTHER_PASSWORD)
    assert welcomed.status_code == 302 and welcomed.headers["Location"] == reverse("suites:list")
    assert signed_in_as(client) == "mallory"


def test_the_lock_lifts_after_the_cool_off(client, user):
    for attempt in range(5):
        sign_in(client, user.username, f"guess-{attempt}")
    assert sign_in(client, user.username, PASSWORD).status_code == 429
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16)
    )
    assert sign_in(client, user.username, PASSWORD).status_code == 302
    assert signed_in_as(client) == "alice"
    assert not AccessAttempt.objects.exists()  # a success starts the count afresh


def test_a_success_resets_the_count(client, user):
    for attempt in range(4):
        sign_in(client, user.username, f"guess-{attempt}")
    assert sign_in(client, user.username, PASSWORD).status_code == 302
    client.logout()
    for attempt in range(4):
        assert sign_in(client, user.username, f"again-{attempt}").status_code == 200


def test_the_admin_sign_in_is_throttled_too(client, django_user_model):
    django_user_model.objects.create_superuser("root", password="pw-root-123")
    url = reverse("admin:login")
    statuses = [sign_in(client, "root", f"guess-{attempt}", url).status_code for attempt in range(6)]
    assert statuses == [200] * 4 + [429] * 2
    assert sign_in(client, "root", "pw-root-123", url).status_code == 429
    assert signed_in_as(client) is None


def test_commands_and_workers_print_nothing_of_axes(tmp_path):
    """Every Django process loads axes (workers and manage.py commands too); none of them signs anyone in,
    and their output stays theirs: no start-up banner from it."""
    env = {**os.environ, "EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(tmp_path)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == "System check identified no issues (0 silenced).\n"


def test_wrong_passwords_for_many_usernames_lock_the_address_whatever_the_username(client, user):
    """Password spraying: one password tried on many usernames, none of them failing five times. Twenty
    failures from one address lock every username there, the right password included, for the cool-off;
    another address is untouched."""
    assert settings.EVALSITE_LOGIN_ADDRESS_FAILURE_LIMIT == 20
    names = [f"user{n}" for n in range(19)] + ["alice"]
    statuses = [sign_in(client, name, "Summer2026!").status_code for name in names]
    assert statuses == [200] * 19 + [429]
    refused = sign_in(client, "alice", PASSWORD)
    assert refused.status_code == 429 and signed_in_as(client) is None
    assert 890 <= int(refused["Retry-After"]) <= 900
    page = " ".join(refused.content.decode().split())
    assert "Sign-in from this address is paused, whatever the username" in page and "axes_reset_ip" in page
    elsewhere = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.0.0.9"
    )
    assert elsewhere.status_code == 302 and signed_in_as(client) == "alice"


def test_a_success_from_the_address_does_not_clear_its_count(client, user, other_user):
    for n in range(19):
        assert sign_in(client, f"user{n}", "Summer2026!").status_code == 200
    assert (
        sign_in(client, other_user.username, OTHER_PASSWORD).status_code == 302
    )  # the sprayer's own account
    client.logout()
    assert sign_in(client, "user19", "Summer2026!").status_code == 429


def test_a_locked_username_is_told_when_to_come_back(client, user):
    for attempt in range(5):
        response = sign_in(client, user.username, f"guess-{attempt}")
    assert response.status_code == 429
    assert 890 <= int(response["Retry-After"]) <= 900
    assert "Sign-in as <strong>alice</strong> from this address is paused" in response.content.decode()
