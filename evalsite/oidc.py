"""The OpenID Connect provider's endpoints for the settings: each one named in the environment, or read from
the issuer's discovery document when a sign-in first needs it (once per process), so that no process
starts by calling the provider, and workers never do."""

from __future__ import annotations

import functools
import json
import urllib.request
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import lazy

# The setting for each endpoint, and its key in a discovery document.
ENDPOINTS = {
    "EVALSITE_OIDC_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "EVALSITE_OIDC_TOKEN_ENDPOINT": "token_endpoint",
    "EVALSITE_OIDC_USERINFO_ENDPOINT": "userinfo_endpoint",
    "EVALSITE_OIDC_JWKS_ENDPOINT": "jwks_uri",
}
DISCOVERY_TIMEOUT = 10


@functools.cache
def discover(issuer: str) -> dict:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        with urllib.request.urlopen(url, timeout=DISCOVERY_TIMEOUT) as response:  # noqa: S310 (checked below)
            return json.load(response)
    except (OSError, ValueError) as exc:
        raise ImproperlyConfigured(f"could not read the OIDC discovery document {url}: {exc}") from exc


def _discovered(issuer: str, key: str) -> str:
    value = discover(issuer).get(key)
    if not value:
        raise ImproperlyConfigured(f"the OIDC discovery document of {issuer} has no {key}")
    return str(value)


def endpoints(issuer: str, env: Mapping[str, str]) -> tuple[str, str, str, str]:
    """Authorization, token, userinfo and JWKS endpoints, in that order; those not named come from the
    issuer's discovery document, read on first use."""
    named = {name: env.get(name, "").strip() for name in ENDPOINTS}
    if all(named.values()):
        return tuple(named.values())
    issuer = issuer.strip()
    if not issuer.startswith(("https://", "http://")):
        missing = ", ".join(name for name, value in named.items() if not value)
        raise ImproperlyConfigured(f"single sign-on needs EVALSITE_OIDC_ISSUER (a URL), or else {missing}")
    later = lazy(_discovered, str)
    return tuple(value or later(issuer, ENDPOINTS[name]) for name, value in named.items())
