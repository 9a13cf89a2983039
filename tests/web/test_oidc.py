"""Single sign-on: off unless configured; configured from the environment (endpoints from the issuer's
discovery document), the code flow against a fake provider on 127.0.0.1 signs the user in, creating them on
first sign-in in no project unless a default role is set; a tampered state or nonce is refused."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.urls import NoReverseMatch, clear_url_caches, reverse

import evalsite.urls
from evalsite import oidc
from projects.models import Action, AuditEvent, Membership, Project
from tests.web.fake_oidc import CLIENT_ID, CLIENT_SECRET, Provider

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def provider():
    with Provider() as running:
        yield running


def settings_under(env: dict[str, str], tmp_path) -> dict:
    """The settings evalsite reads from this environment, in a fresh process: the sign-on ones."""
    script = (
        "import json; import evalsite.settings as s; "
        "print(json.dumps({k: getattr(s, k) for k in dir(s) "
        "if k.startswith(('OIDC_', 'EVALSITE_OIDC', 'LOGIN_REDIRECT_URL_FAILURE', 'AUTHENTICATION_BACKENDS'))}, "
        "default=str))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_OIDC")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=base | {"EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(tmp_path)} | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def configured(provider, tmp_path_factory) -> dict:
    return settings_under(
        {
            "EVALSITE_OIDC_CLIENT_ID": CLIENT_ID,
            "EVALSITE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "EVALSITE_OIDC_ISSUER": provider.url,
            "EVALSITE_OIDC_NAME": "Acme SSO",
        },
        tmp_path_factory.mktemp("var"),
    )


@contextmanager
def site(values: dict):
    """The site under these settings, its URLs read again (they depend on whether sign-on is on)."""
    with override_settings(**values):
        importlib.reload(evalsite.urls)
        clear_url_caches()
        yield
    importlib.reload(evalsite.urls)
    clear_url_caches()


@pytest.fixture
def sso(configured, provider, db):
    """Sign-on as the environment configures it, its endpoints read from the discovery document on first
    use in this process, as a web process does."""
    oidc.discover.cache_clear()
    names = (
        "OIDC_OP_AUTHORIZATION_ENDPOINT",
        "OIDC_OP_TOKEN_ENDPOINT",
        "OIDC_OP_USER_ENDPOINT",
        "OIDC_OP_JWKS_ENDPOINT",
    )
    with site(configured | dict(zip(names, oidc.endpoints(provider.url, {}), strict=True))):
        yield configured


def test_off_by_default_no_backend_no_urls_no_button(client, tmp_path, db):
    plain = settings_under({}, tmp_path)
    assert plain["EVALSITE_OIDC"] is False
    assert not any("oidc" in backend for backend in plain["AUTHENTICATION_BACKENDS"])
    assert not any(name.startswith("OIDC_") for name in plain)
    with pytest.raises(NoReverseMatch):
        reverse("oidc_authentication_init")
    assert client.get("/oidc/authenticate/").status_code == 404
    assert "Sign in with" not in client.get(reverse("login")).content.decode()


def test_the_environment_configures_it_from_the_issuer(configured, provider):
    assert configured["EVALSITE_OIDC"] is True
    assert configured["AUTHENTICATION_BACKENDS"][-1] == "projects.oidc.Backend"
    assert configured["OIDC_OP_AUTHORIZATION_ENDPOINT"] == f"{provider.url}/authorize"
    assert configured["OIDC_OP_TOKEN_ENDPOINT"] == f"{provider.url}/token"
    assert configured["OIDC_OP_USER_ENDPOINT"] == f"{provider.url}/userinfo"
    assert configured["OIDC_OP_JWKS_ENDPOINT"] == f"{provider.url}/jwks"
    assert (configured["OIDC_RP_SIGN_ALGO"], configured["OIDC_USE_NONCE"]) == ("RS256", True)


def test_no_process_calls_the_provider_when_it_starts(tmp_path):
    # An issuer nobody answers at: the settings load all the same (a worker never signs anyone in).
    script = "import evalsite.settings as s; print(s.EVALSITE_OIDC, s.AUTHENTICATION_BACKENDS[-1])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_OIDC")}
    env |= {"EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(tmp_path), "EVALSITE_OIDC_CLIENT_ID": CLIENT_ID}
    env["EVALSITE_OIDC_ISSUER"] = "http://127.0.0.1:9/"  # the discard port: nothing answers
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "True projects.oidc.Backend"), done.stderr


def test_a_bad_default_role_stops_the_start(provider, tmp_path):
    with pytest.raises(AssertionError, match="EVALSITE_OIDC_DEFAULT_ROLE"):
        settings_under(
            {"EVALSITE_OIDC_CLIENT_ID": CLIENT_ID, "EVALSITE_OIDC_DEFAULT_ROLE": "admin"}, tmp_path
        )


def start(client, next_url: str = "/runs/") -> dict[str, str]:
    """Press "Sign in with …", and let the provider send the browser back: the callback's query."""
    init = client.get(reverse("oidc_authentication_init"), {"next": next_url})
    assert init.status_code == 302
    at_provider = requests.get(init["Location"], allow_redirects=False, timeout=10)
    assert at_provider.status_code == 302, at_provider.text
    back = urlsplit(at_provider.headers["Location"])
    assert back.path == reverse("oidc_authentication_callback")
    return {name: values[0] for name, values in parse_qs(back.query).items()}


def signed_in_as(client):
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id) if user_id else None


def test_the_login_page_offers_it_beside_the_password_form(client, sso):
    html = client.get(reverse("login")).content.decode()
    assert 'name="password"' in html
    assert f'href="{reverse("oidc_authentication_init")}"' in html and "Sign in with Acme SSO" in html


def test_signing_in_creates_the_user_in_no_project(client, sso, provider):
    query = start(client)
    landed = client.get(reverse("oidc_authentication_callback"), query)
    assert (landed.status_code, landed["Location"]) == (302, "/runs/")
    user = signed_in_as(client)
    assert (user.username, user.email, user.has_usable_password()) == ("ada", "ada@example.org", False)
    assert not Membership.objects.filter(user=user).exists()
    assert client.get("/runs/").status_code == 200

    # Signing out works; signing in again finds the same user.
    client.post(reverse("logout"))
    assert signed_in_as(client) is None
    client.get(reverse("oidc_authentication_callback"), start(client))
    assert signed_in_as(client) == user and get_user_model().objects.count() == 1


def test_a_default_role_joins_the_default_project(client, configured, provider, db):
    with site(configured | {"EVALSITE_OIDC_DEFAULT_ROLE": "reviewer"}):
        client.get(reverse("oidc_authentication_callback"), start(client))
    user = signed_in_as(client)
    membership = Membership.objects.get(user=user)
    assert (membership.project, membership.role) == (Project.default(), "reviewer")
    event = AuditEvent.objects.get(action=Action.MEMBER_ADDED)
    assert (event.actor, event.target_label, event.detail["role"]) == (None, "ada", "reviewer")


def test_an_account_made_here_is_never_signed_in_through_the_provider(client, sso, django_user_model):
    local = django_user_model.objects.create_user("ada", email="ada@example.org", password="pw-local-123")
    client.get(reverse("oidc_authentication_callback"), start(client))
    user = signed_in_as(client)
    assert user != local and user.username == "ada-2"


def test_a_tampered_state_is_refused(client, sso, provider):
    query = start(client)
    refused = client.get(reverse("oidc_authentication_callback"), query | {"state": query["state"] + "x"})
    assert refused.status_code == 400
    assert signed_in_as(client) is None
    assert query["code"] in provider.codes  # the code was never even exchanged


def test_an_id_token_for_another_nonce_is_refused(client, sso, provider):
    provider.nonce_override = "someone-elses-nonce"
    try:
        refused = client.get(reverse("oidc_authentication_callback"), start(client))
    finally:
        provider.nonce_override = None
    assert refused.status_code == 400
    assert signed_in_as(client) is None and not get_user_model().objects.exists()


def test_the_provider_saying_no_sends_back_to_the_login_page(client, sso):
    failed = client.get(reverse("oidc_authentication_callback"), {"error": "access_denied", "state": "x"})
    assert failed.status_code == 302 and failed["Location"].startswith(reverse("login"))
    page = client.get(failed["Location"]).content.decode()
    assert "Signing in with Acme SSO did not work" in page
