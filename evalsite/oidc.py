"""The OpenID Connect provider's endpoints for the settings: each one named in the environment, or read
from the issuer's discovery document once, when the process starts."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

# The setting for each endpoint, and its key in a discovery document.
ENDPOINTS = {
    "EVALSITE_OIDC_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "EVALSITE_OIDC_TOKEN_ENDPOINT": "token_endpoint",
    "EVALSITE_OIDC_USERINFO_ENDPOINT": "userinfo_endpoint",
    "EVALSITE_OIDC_JWKS_ENDPOINT": "jwks_uri",
}
DISCOVERY_TIMEOUT = 10


def discover(issuer: str) -> dict:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    if not url.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"EVALSITE_OIDC_ISSUER is a URL, not {issuer!r}")
    try:
        with urllib.request.urlopen(url, timeout=DISCOVERY_TIMEOUT) as response:  # noqa: S310 (checked above)
            return json.load(response)
    except (OSError, ValueError) as exc:
        raise ImproperlyConfigured(f"could not read the OIDC discovery document {url}: {exc}") from exc


def endpoints(env: Mapping[str, str]) -> tuple[str, str, str, str]:
    """Authorization, token, userinfo and JWKS endpoints, in that order."""
    named = {name: env.get(name, "").strip() for name in ENDPOINTS}
    if not all(named.values()):
        issuer = env.get("EVALSITE_OIDC_ISSUER", "").strip()
        if not issuer:
            missing = ", ".join(name for name, value in named.items() if not value)
            raise ImproperlyConfigured(f"single sign-on needs EVALSITE_OIDC_ISSUER, or else {missing}")
        document = discover(issuer)
        named = {name: value or str(document.get(key) or "") for (name, value), key in zip(
            named.items(), ENDPOINTS.values(), strict=True
        )}  # fmt: skip
    authorization, token, userinfo, jwks = named.values()
    return authorization, token, userinfo, jwks
