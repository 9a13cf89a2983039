"""API keys are redacted from what endpoints send back before it is stored or logged.

The end-to-end test (a real worker, every page) is in tests/e2e/test_e2e_key_redaction.py.
"""

from __future__ import annotations

import io
import logging

import pytest

from engine import redact as redaction
from engine.clients import EndpointConfig, EndpointError, OpenAIClient
from engine.redact import RedactingFilter, redact, redact_configured, register_key_env
from tests.conftest import FAKE_KEY
from tests.fakeopenai import Reply

PROJECT_KEY = "sk-proj-Q8v2LmZ0xT4kP9wR7yB3nJ6cH1sD5fG0aE2uI8oK4tV7bN9mX3zW1qf3a9"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            f"Incorrect API key provided: {PROJECT_KEY}. You can find your API key at https://x/keys.",
            "Incorrect API key provided: sk-proj-…f3a9. You can find your API key at https://x/keys.",
        ),
        ("key sk-abc123def456ghi789jkl012 refused", "key sk-…l012 refused"),
        ("Authorization: Bearer abcdEFGH1234ijklMNOP5678", "Authorization: Bearer …5678"),
        ("Invalid API key: 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "Invalid API key: …b1a0"),
        ('{"token": "ghs_Z3r0P4dd1ngT0k3nV4lu3XYZ"}', '{"token": "…3XYZ"}'),
        (
            "cannot reach https://bob:hunter2pass@proxy.local/v1",
            "cannot reach https://bob:[redacted]@proxy.local/v1",
        ),
        ("gsk_1234567890abcdefGHIJ is revoked", "gsk_…GHIJ is revoked"),
    ],
)
def test_key_shaped_text_is_redacted_keeping_the_prefix_and_last_four(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize(
    "prose",
    [
        "Incorrect API key provided. Check your key and try again.",
        "The key difference is that the model answers in French.",
        "Bearer of bad news: the token limit is 4096 tokens.",
        "Use sk-learn pipelines; the model gpt-4o-mini-2024-07-18 is deprecated.",
        "HTTP 503 from fake: upstream connect error, retry in 8 s (request id req_abc)",
        "cannot reach fake at http://127.0.0.1:8080/v1: Connection refused",
        "The secret is in the sauce, and the keys are under the mat.",
    ],
)
def test_ordinary_prose_is_left_alone(prose):
    assert redact(prose) == prose


def test_configured_key_values_are_redacted_whatever_their_shape(monkeypatch):
    monkeypatch.setenv("ACME_CREDENTIALS", "plain-words-but-secret")
    monkeypatch.setattr(redaction, "_key_envs", {"OPENAI_API_KEY"})
    register_key_env("ACME_CREDENTIALS")  # an endpoint's api_key_env, named without KEY
    monkeypatch.setenv("OPENAI_API_KEY", "opensesame42")
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to be anything but a word
    text = "sent plain-words-but-secret and opensesame42 with abc"
    assert redact_configured(text) == "sent …cret and [redacted] with abc"
    assert redact(text) == "sent …cret and [redacted] with abc"


def test_endpoint_errors_are_redacted_as_they_are_built():
    assert str(EndpointError(f"HTTP 401 from x: Incorrect API key provided: {PROJECT_KEY}")) == (
        "HTTP 401 from x: Incorrect API key provided: sk-proj-…f3a9"
    )


def test_log_records_and_their_tracebacks_are_redacted():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("endpoint said %s", f"Incorrect API key provided: {PROJECT_KEY}")
        try:
            raise RuntimeError(f"Bearer {PROJECT_KEY}")
        except RuntimeError:
            logger.exception("conversation %s crashed", 7)
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert PROJECT_KEY not in written and "Q8v2LmZ0" not in written
    assert "endpoint said Incorrect API key provided: sk-proj-…f3a9" in written
    assert "conversation 7 crashed" in written and "RuntimeError: Bearer sk-proj-…f3a9" in written


# --- through the real client and the fake server ----------------------------------------------------------


def client_with_key(monkeypatch, fake_openai, key: str) -> OpenAIClient:
    monkeypatch.setenv("ACME_WRONG", key)
    return OpenAIClient(
        EndpointConfig(name="acme", base_url=fake_openai.base_url, api_key_env="ACME_WRONG", max_retries=0)
    )


def test_a_401_that_echoes_the_key_becomes_a_redacted_endpoint_error(monkeypatch, fake_openai):
    client = client_with_key(monkeypatch, fake_openai, "wrong-but-not-key-shaped-value")
    with pytest.raises(EndpointError) as info:
        client.complete("m", [{"role": "user", "content": "hi"}])
    assert "wrong-but-not-key-shaped-value" not in str(info.value)
    assert str(info.value).startswith("HTTP 401 from acme: Incorrect API key provided: …alue.")


def test_replies_lose_configured_keys_but_keep_key_shaped_text(monkeypatch, fake_openai):
    """A suite may check whether a model repeats an sk-… from its prompt; only real keys are removed."""
    fake_openai.script("hi", [Reply(text=f"mine is {FAKE_KEY} and yours {PROJECT_KEY}")])
    client = client_with_key(monkeypatch, fake_openai, FAKE_KEY)
    text = client.complete("m", [{"role": "user", "content": "hi"}]).text
    assert text == f"mine is [redacted] and yours {PROJECT_KEY}"


def test_the_secrets_are_read_again_when_the_environment_changes(monkeypatch):
    """configured_secrets() is kept between replies (walking the environment per reply was costly); a key
    set, changed or removed afterwards is still noticed at once."""
    monkeypatch.setenv("ACME_TOKEN", "first-value-of-the-token")
    assert "first-value-of-the-token" not in redact("a reply: first-value-of-the-token")
    monkeypatch.setenv("ACME_TOKEN", "second-value-of-the-token")  # same names, another value
    assert "second-value-of-the-token" not in redact("a reply: second-value-of-the-token")
    assert redact("a reply: first-value-of-the-token") == "a reply: first-value-of-the-token"
    monkeypatch.delenv("ACME_TOKEN")
    assert redact("a reply: second-value-of-the-token") == "a reply: second-value-of-the-token"
