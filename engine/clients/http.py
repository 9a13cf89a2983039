"""Calling an OpenAI-compatible endpoint from threads, through the `openai` package.

The openai client is built with max_retries=0: retries happen in RetryLoop (engine.clients.retrying) and
nowhere else.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

from tenacity import Retrying

from ..meter import answered, sent
from ..redact import redact_configured, register_key_env
from ..results import Usage
from ..retries import LOCAL_PAUSES, PauseBoard, wait_out
from ..schema.settings import ModelSettings
from ..suitevars import MissingSecret, fill_secrets
from ..transcript import format_transcript
from .answers import (
    Reply,
    Transient,
    error_param_of,
    error_text,
    read_reply,
    status_failure,
    timed_out,
    unreachable,
    unreadable,
)
from .base import Completion, EndpointConfig, EndpointError, estimate_tokens
from .retrying import RetryLoop
from .settings import headers, refusal, request_body

_client_cache: dict[tuple, object] = {}
_client_lock = threading.Lock()


class OpenAIClient:
    """Calls one OpenAI-compatible endpoint. Safe to share between threads."""

    is_mock = False

    def __init__(
        self,
        endpoint: EndpointConfig,
        sleep: Callable[[float], None] = time.sleep,
        *,
        pauses: PauseBoard = LOCAL_PAUSES,
        clock: Callable[[], float] = time.monotonic,
        secrets: bool = False,
    ):
        self.endpoint = endpoint
        self.label = endpoint.name
        # Only the model under test is sent the suite's secrets; a judge sees the conversation as it is
        # stored, with the placeholder.
        self.secrets = secrets
        self._sleep = sleep
        self._clock = clock  # measures the retry budget; tests pass one that their `sleep` moves on
        self._pauses = pauses
        register_key_env(endpoint.api_key_env)

    def _client(self):
        import openai  # heavy (a second of imports on a busy machine): only a process that calls through it pays

        api_key = os.environ.get(self.endpoint.api_key_env, "")
        cache_key = (self.endpoint.base_url, api_key, self.endpoint.timeout)
        with _client_lock:
            client = _client_cache.get(cache_key)
            if client is None:
                # Building an OpenAI client is costly (a connection pool each), so one per endpoint and key.
                client = openai.OpenAI(
                    base_url=self.endpoint.base_url,
                    api_key=api_key or "not-set",
                    max_retries=0,
                    timeout=self.endpoint.timeout,
                )
                _client_cache[cache_key] = client
        return client

    def _call(self, what: str, fn):
        """fn(), retried on transient failures until it succeeds or the endpoint's retry budget is spent."""
        loop = RetryLoop(self, what)
        seconds = loop.held_back()
        if seconds:
            wait_out(seconds, self._sleep)

        def attempt():
            sent(self.label, self.endpoint.priced)
            with loop.attempt(self._failure):
                return fn()

        retrying = loop.retrying(Retrying, loop.sleep)
        try:
            return retrying(attempt)
        except Transient as failure:
            raise loop.gave_up(failure, retrying.statistics) from None

    def _failure(self, what: str, exc: BaseException) -> Exception | None:
        """The openai client's exception as the failure to raise; None for any other."""
        import openai  # loaded already: the call that raised went through it

        if isinstance(exc, openai.APIStatusError):
            return status_failure(
                self.label, exc.status_code, error_text(exc), exc.response.headers, error_param_of(exc)
            )
        if isinstance(exc, openai.APITimeoutError):
            return timed_out(what, self.label, self.endpoint.timeout)
        if isinstance(exc, openai.APIConnectionError):
            return unreachable(self.label, self.endpoint.base_url, exc.__cause__ or exc)
        return None

    def _pause_remaining(self) -> float:
        return max(0.0, self._pauses.paused_until(self.label) - time.time())

    def _body(
        self,
        model: str,
        messages: list[dict],
        temperature: float | None,
        tools: list[dict] | None = None,
        settings: ModelSettings | None = None,
    ) -> dict:
        """The request body: engine.clients.settings says in which order the settings go in."""
        if self.secrets:
            messages = with_secrets(messages)
        if self.endpoint.string_only:
            # Endpoints that take one string get the conversation as the judge sees it, in [Role]: form.
            messages = [{"role": "user", "content": format_transcript(messages)}]
        return request_body(model, messages, temperature, tools, settings)

    def _headers(self, settings: ModelSettings | None) -> dict[str, str]:
        sent = headers(settings)
        return headers_with_secrets(sent) if self.secrets else sent

    def _completion(self, reply: Reply, messages: list[dict], started: float) -> Completion:
        latency_ms = int((time.monotonic() - started) * 1000)
        reported = reply.usage
        text = redact_configured(reply.text)  # a configured key never belongs in a reply (engine/redact.py)
        if reported is not None:
            usage = Usage(
                prompt_tokens=reported.get("prompt_tokens") or 0,
                completion_tokens=reported.get("completion_tokens") or 0,
            )
        else:
            prompt_text = " ".join(str(message.get("content", "")) for message in messages)
            usage = Usage(
                prompt_tokens=estimate_tokens(prompt_text),
                completion_tokens=estimate_tokens(text),
                estimated=True,
            )
        cost = self.endpoint.cost(usage)
        answered(cost)
        return Completion(
            text=text,
            usage=usage,
            cost=cost,
            latency_ms=latency_ms,
            finish_reason=reply.finish_reason,
            refusal=redact_configured(reply.refusal) if reply.refusal else None,
            tool_calls=reply.tool_calls,
            calls=reply.calls,
        )

    def complete(
        self,
        model: str,
        messages: list[dict],
        *,
        temperature: float | None = None,
        tools: list[dict] | None = None,
        settings: ModelSettings | None = None,
    ) -> Completion:
        body = self._body(model, messages, temperature, tools, settings)
        sent_headers = self._headers(settings)
        started = time.monotonic()
        # The client's own post: the same auth, headers, timeouts and errors as chat.completions.create,
        # without create's walk of our plain messages against its TypedDicts and the typed response we would
        # only read two fields of, which cost more CPU than the rest of the call.
        try:
            reply = self._call("request", lambda: self._read(body, sent_headers))
        except EndpointError as exc:
            refused = refusal(exc, settings)
            if refused is None:
                raise
            raise refused from None
        return self._completion(reply, messages, started)

    def _read(self, body: dict, sent_headers: dict[str, str] | None = None) -> Reply:
        options = {"headers": sent_headers} if sent_headers else {}
        try:
            response = self._client().post("/chat/completions", body=body, cast_to=dict, options=options)
        except json.JSONDecodeError as exc:  # a JSON content type over a body that is not JSON
            raise unreadable(self.label, f"not JSON: {exc.doc[:200]}") from None
        return read_reply(response, self.label)

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]:
        response = self._call(
            "embedding request", lambda: self._client().embeddings.create(model=model, input=texts)
        )
        vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        tokens = response.usage.prompt_tokens if response.usage else sum(map(estimate_tokens, texts))
        usage = Usage(prompt_tokens=tokens)
        cost = self.endpoint.cost(usage)
        answered(cost)
        return vectors, usage, cost


def headers_with_secrets(sent: dict[str, str]) -> dict[str, str]:
    """The model under test's extra headers as sent: a `{{secret:NAME}}` in a value (a gateway's key) filled
    from the environment here, at the call, as in its messages."""
    if not any("{{" in value for value in sent.values()):
        return sent
    return {name: _filled(value) for name, value in sent.items()}


def _filled(text: str) -> str:
    try:
        text, used = fill_secrets(text)
    except MissingSecret as exc:
        raise EndpointError(str(exc)) from None
    for name in used:
        register_key_env(name)
    return text


def with_secrets(messages: list[dict]) -> list[dict]:
    """The messages as sent: each `{{secret:NAME}}` filled from the environment here, at the call, so the
    value is in no stored message; it is redacted wherever the endpoint echoes it. An unset one ends the
    conversation as an error naming the variable (engine.suitevars)."""
    if not any("{{" in str(message.get("content") or "") for message in messages):
        return messages

    sent = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            message = {**message, "content": _filled(content)}
        elif isinstance(content, list):  # content parts: their text
            parts = [
                {**part, "text": _filled(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
            message = {**message, "content": parts}
        sent.append(message)
    return sent


def warm_up() -> None:
    """Load the openai client's lazily imported modules now, not in a dozen threads' first requests."""
    import openai  # heavy: loaded here, not when the CLI merely validates or plays on aiohttp

    client = openai.OpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1", max_retries=0)
    _ = client.chat.completions, client.embeddings
    client.close()
