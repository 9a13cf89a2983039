"""Keeping API keys out of what evalsite stores, shows and logs.

Some endpoints echo the key they were sent in their error text ("Incorrect API key provided: sk-…"). That
text becomes a conversation's error and verdict, shown on the run page, the transcript, results.json, the
API, the admin and shared pages. So every EndpointError message and every log record goes through
`redact`, which removes:

- configured key values: the value of every endpoint's `api_key_env` variable, OPENAI_API_KEY, and any
  environment variable whose name ends in _KEY, _TOKEN, _SECRET or _PASSWORD (values of 8 characters or
  more; shorter ones are too likely to be ordinary words);
- anything shaped like a key: provider prefixes (sk-, sk-proj-, gsk_, xai-, hf_, AIza…, ghp_, AKIA…), Bearer
  tokens, a password in a URL, and a long token of letters and digits right after "key", "token" or
  "secret".

Reply text gets only the first kind (`redact_configured`): a configured key never belongs in a reply, but a
key-shaped string may be exactly what a suite checks for ("does the model leak the sk-… in its prompt?"),
so rewriting it would change what the checks see.

A key keeps its prefix and its last four characters, as providers' dashboards show them: "sk-proj-…f3a9".
"""

from __future__ import annotations

import logging
import os
import re
from functools import lru_cache

MIN_SECRET = 8
_SECRET_NAME = re.compile(r"(?:_KEY|_TOKEN|_SECRET|_PASSWORD)$", re.IGNORECASE)
_key_envs: set[str] = {"OPENAI_API_KEY"}

_PREFIXED = re.compile(
    r"\b(?P<prefix>sk-(?:proj-|ant-|or-v1-|svcacct-|admin-)?|gsk_|xai-|hf_|ghp_|github_pat_|AIza|AKIA)"
    r"(?P<body>(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{12,})"  # keys are random: a digit somewhere
)
_BEARER = re.compile(
    r"(?P<prefix>\bBearer\s+)(?P<body>(?=[A-Za-z0-9._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE
)
_URL_PASSWORD = re.compile(r"(?P<prefix>://[^/\s:@]+:)(?P<body>[^@\s/]+)(?=@)")
# "key: abc…", "API key provided: abc…", "token=abc…": a long run with letters and digits is a key, not prose.
_AFTER_WORD = re.compile(
    r"(?P<prefix>\b(?:key|token|secret)s?\b(?:\s+provided)?[\"']?\s*[:=]?\s*[\"']?)"
    r"(?P<body>(?=[A-Za-z0-9._\-]*\d)(?=[A-Za-z0-9._\-]*[A-Za-z])[A-Za-z0-9._\-]{20,})",
    re.IGNORECASE,
)


def register_key_env(name: str) -> None:
    """An endpoint's key variable: its value is redacted wherever it appears, whatever its name."""
    _key_envs.add(name)


def mask(secret: str, prefix: str = "") -> str:
    if len(secret) < 20:
        return f"{prefix}[redacted]"
    return f"{prefix}…{secret[-4:]}"


# (the environment and the key names the secrets were read from, the secrets)
_secrets_of: tuple[object, list[str]] | None = None


def configured_secrets() -> list[str]:
    """The values of the endpoints' key variables and of every variable named like a secret.

    Read again only when the environment or the key names changed: every model reply is redacted, and
    walking os.environ (decoding each name and value) for each would cost more than the call's parsing.
    The raw environment (its bytes) is compared with a copy kept of it, in C."""
    global _secrets_of
    raw = getattr(os.environ, "_data", None)
    cached = _secrets_of
    if raw is not None and cached is not None and cached[0][0] == raw and cached[0][1] == _key_envs:
        return cached[1]
    state = (dict(raw), set(_key_envs)) if raw is not None else None
    values = {os.environ.get(name, "") for name in _key_envs}
    values |= {value for name, value in os.environ.items() if _SECRET_NAME.search(name)}
    secrets = sorted((value for value in values if len(value) >= MIN_SECRET), key=len, reverse=True)
    _secrets_of = (state, secrets) if state is not None else None
    return secrets


@lru_cache(maxsize=8)
def _alternation(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(map(re.escape, secrets))) if secrets else None


def redact_configured(text: str) -> str:
    """Configured key values removed (longest first, so a key containing another goes whole)."""
    if not text:
        return text
    pattern = _alternation(tuple(configured_secrets()))
    if pattern is None:
        return text
    return pattern.sub(lambda found: mask(found.group(0), _known_prefix(found.group(0))), text)


def _known_prefix(secret: str) -> str:
    found = _PREFIXED.match(secret)
    return found.group("prefix") if found else ""


def _masked(found: re.Match) -> str:
    return mask(found.group("body"), found.group("prefix"))


def redact(text: str, *keys: str) -> str:
    """Configured key values (and `keys`, a caller's own) and anything shaped like a key, removed from text
    an endpoint sent."""
    if not text:
        return text
    for key in sorted((key for key in keys if key), key=len, reverse=True):
        text = text.replace(key, mask(key, _known_prefix(key)))
    text = redact_configured(text)
    for shape in (_PREFIXED, _BEARER, _URL_PASSWORD, _AFTER_WORD):
        text = shape.sub(_masked, text)
    return text


class RedactingFilter(logging.Filter):
    """On a handler: each record's message and traceback are redacted before any formatter sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's to report, not ours to drop
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
