"""Production settings: `check --deploy` is clean with EVALSITE_HTTPS=1, and HTTPS is then enforced (redirect,
HSTS, secure cookies) behind a proxy that sets X-Forwarded-Proto; without it, the local setup is unchanged.

Settings are read once per process, so each case runs Django in a subprocess with its own environment.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# What the test process has that a production shell would not.
DROPPED = ("EVALSITE_DEV", "DEBUG", "DJANGO_SETTINGS_MODULE", "SECRET_KEY") + tuple(
    name for name in os.environ if name.startswith("EVALSITE_") and name != "EVALSITE_VAR_DIR"
)


def django(args: list[str], tmp_path, **env: str) -> subprocess.CompletedProcess:
    base = {key: value for key, value in os.environ.items() if key not in DROPPED}
    base.update(EVALSITE_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="evalsite.settings", **env)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=base, capture_output=True, text=True, timeout=120
    )


def production(**env: str) -> dict[str, str]:
    return {"SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "0", "EVALSITE_HTTPS": "1", **env}


def test_check_deploy_is_clean_with_https(tmp_path):
    done = django(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], tmp_path, **production())
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "System check identified no issues" in output, output
    assert "W0" not in output and "WARNINGS" not in output, output


def test_check_deploy_still_warns_about_what_https_cannot_fix(tmp_path):
    """The clean result above is earned, not silenced: without HTTPS the same check warns."""
    done = django(["manage.py", "check", "--deploy"], tmp_path, **production(EVALSITE_HTTPS="0"))
    output = done.stdout + done.stderr
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in output, (warning, output)


PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
client = Client()
# A page that renders no template: the probe's var dir has no collected static files.
plain = client.get("/api/openapi.json")
secure = client.get("/api/openapi.json", headers={"X-Forwarded-Proto": "https"})
print(json.dumps({
    "plain": [plain.status_code, plain.headers.get("Location")],
    "secure": [secure.status_code, secure.headers.get("Strict-Transport-Security")],
    "cookies_secure": [settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE],
}))
"""


def probe(tmp_path, **env: str) -> dict:
    done = django(["-c", PROBE], tmp_path, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_https_redirects_plain_requests_and_sends_hsts(tmp_path):
    seen = probe(tmp_path, **production())
    assert seen["plain"] == [301, "https://testserver/api/openapi.json"]
    assert seen["secure"] == [401, "max-age=31536000; includeSubDomains"]
    assert seen["cookies_secure"] == [True, True]


@pytest.mark.parametrize(
    "env, hsts",
    [
        ({"EVALSITE_HSTS_SECONDS": "3600"}, "max-age=3600; includeSubDomains"),
        ({"EVALSITE_HSTS_INCLUDE_SUBDOMAINS": "0"}, "max-age=31536000"),
        ({"EVALSITE_HSTS_PRELOAD": "1"}, "max-age=31536000; includeSubDomains; preload"),
    ],
)
def test_hsts_is_configurable(tmp_path, env, hsts):
    assert probe(tmp_path, **production(**env))["secure"] == [401, hsts]


def test_local_setup_stays_plain_http(tmp_path):
    """`make run` (EVALSITE_DEV=1, no EVALSITE_HTTPS): no redirect, no HSTS, cookies work over http."""
    seen = probe(tmp_path, EVALSITE_DEV="1")
    assert seen["plain"] == [401, None]
    assert seen["secure"] == [401, None]
    assert seen["cookies_secure"] == [False, False]


@pytest.mark.parametrize("command", ["evalserve", "migrate", "check"])
def test_a_missing_secret_key_is_one_line_naming_it(tmp_path, command):
    # A production shell that forgot SECRET_KEY: what to set, not a traceback through Django's importer.
    done = django(["manage.py", command], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "evalsite: Set SECRET_KEY (or DEBUG=1 / EVALSITE_DEV=1 for a local setup)."
    assert "Traceback" not in done.stderr and done.stdout == ""
