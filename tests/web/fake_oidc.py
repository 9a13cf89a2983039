"""A small OpenID Connect provider on 127.0.0.1 for the sign-on tests: discovery, the authorization endpoint
(it signs in whoever `claims` names at once and sends the browser back with a code), the token endpoint
(client secret, redirect URI and PKCE verifier checked; an RS256 id_token carrying the request's nonce),
userinfo and JWKS. Nothing of evalsite or of mozilla-django-oidc is patched: the site talks to it over HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "evalsite-test"
CLIENT_SECRET = "s3cret-of-the-test-client"
KID = "test-key-1"


class Provider:
    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.claims = {"sub": "user-1", "email": "ada@example.org", "preferred_username": "ada"}
        self.nonce_override: str | None = None  # an id_token with another nonce than the one asked for
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.refused: list[str] = []  # why the token endpoint said no, for the test to read
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Provider:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def endpoints(self) -> dict[str, str]:
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "userinfo_endpoint": f"{self.url}/userinfo",
            "jwks_uri": f"{self.url}/jwks",
        }

    def jwks(self) -> dict:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [public | {"kid": KID, "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict[str, str]) -> tuple[int, dict, dict]:
        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            return 400, {}, {"error": "invalid_request"}
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        back = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query.get("state", "")})
        return 302, {"Location": back}, {}

    def token(self, form: dict[str, str]) -> tuple[int, dict, dict]:
        asked = self.codes.pop(form.get("code", ""), None)
        checks = {
            "unknown code": asked is not None,
            "client": (form.get("client_id"), form.get("client_secret")) == (CLIENT_ID, CLIENT_SECRET),
            "redirect_uri": asked is not None and form.get("redirect_uri") == asked.get("redirect_uri"),
            "pkce": asked is not None
            and _challenge(form.get("code_verifier", "")) == asked.get("code_challenge"),
        }
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            self.refused.extend(failed)
            return 400, {}, {"error": "invalid_grant"}
        now = int(time.time())
        id_token = jwt.encode(
            {
                **self.claims,
                "iss": self.url,
                "aud": CLIENT_ID,
                "iat": now,
                "exp": now + 300,
                "nonce": self.nonce_override or asked.get("nonce"),
            },
            self.key,
            algorithm="RS256",
            headers={"kid": KID},
        )
        access = secrets.token_urlsafe(16)
        self.tokens[access] = dict(self.claims)
        return (
            200,
            {},
            {"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": id_token},
        )

    def userinfo(self, authorization: str) -> tuple[int, dict, dict]:
        claims = self.tokens.get(authorization.removeprefix("Bearer ").strip())
        return (200, {}, claims) if claims else (401, {}, {"error": "invalid_token"})

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet in the test output
                pass

            def _answer(self, status: int, headers: dict, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urlsplit(self.path)
                query = {name: values[0] for name, values in parse_qs(url.query).items()}
                if url.path == "/.well-known/openid-configuration":
                    self._answer(200, {}, provider.endpoints)
                elif url.path == "/authorize":
                    self._answer(*provider.authorize(query))
                elif url.path == "/jwks":
                    self._answer(200, {}, provider.jwks())
                elif url.path == "/userinfo":
                    self._answer(*provider.userinfo(self.headers.get("Authorization", "")))
                else:
                    self._answer(404, {}, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlsplit(self.path).path == "/token":
                    self._answer(*provider.token(form))
                else:
                    self._answer(404, {}, {"error": "not_found"})

        return Handler


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
