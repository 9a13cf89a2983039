"""Chat clients: any OpenAI-compatible endpoint through the `openai` package, and the built-in mock.

Retries live here and only here: the openai client is built with max_retries=0, Celery tasks never retry
model errors, and `OpenAIClient._call` retries 429, 408, 409 and 5xx responses, timeouts and dropped
connections for up to the endpoint's `retry_seconds` (minutes by default: providers rate-limit for tens of
seconds), and 200 answers that are not a chat completion (a proxy's HTML page, a body cut short, no
`choices`: gateways send those for moments too), with exponential backoff and full jitter, honouring
Retry-After, each wait capped at `retry_max_wait`. A 429 pauses the endpoint for every caller
(engine.retries). A backoff of our own choosing (no Retry-After) is at most BACKOFF_MAX_WAIT, and ends early
once the endpoint answers another call: after an outage every waiting call retries within a moment of the
first answer. When it gives up it raises EndpointError, which marks that one conversation `error`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import re
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import aiohttp
import openai
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from .calls import came_back, going_out
from .matching import glob_match
from .patterns import RegexFailure
from .redact import redact, redact_configured, register_key_env
from .results import Usage
from .retries import LOCAL_PAUSES, PauseBoard, RetryWait, async_wait_out, report_wait, wait_out
from .schema import MockSpec
from .suitevars import MissingSecret, fill_secrets
from .transcript import format_transcript, message_text

MOCK = "mock"
DEFAULT = "default"
# The reason a call waiting out a rate limit (a 429's Retry-After, or another call's pause) reports; the pages
# tell this wait from the others by it: "waiting for rate limit (retry in 8 s)".
RATE_LIMIT_WAIT = "waiting for rate limit"
# The reason a call reports while it waits to ask again after a 200 that was no chat completion; after the
# first, it says how many: "endpoint sent an unreadable reply (3 times)".
UNREADABLE_REPLY = "endpoint sent an unreadable reply"
RETRY_SECONDS = 300.0
RETRY_MAX_WAIT = 60.0
RETRIED_STATUSES = (408, 409, 429)  # and every 5xx: what the openai client itself would retry
# The longest backoff we choose ourselves (a dropped connection, a 5xx without Retry-After). A server that
# wants longer says so with Retry-After, honoured up to `retry_max_wait`; past this, a longer wait only
# delays noticing the endpoint is back (a waiting call is also woken by another call's answer, but across
# processes that takes up to a second, and a lone call has no one to wake it).
BACKOFF_MAX_WAIT = 8.0

# Calls waiting out a backoff, per endpoint, in this process: an answer while some wait tells them (and,
# through the board, other processes) to retry now.
_waiting: dict[str, int] = {}
_waiting_lock = threading.Lock()


def _count_waiting(endpoint: str, change: int) -> None:
    with _waiting_lock:
        _waiting[endpoint] = _waiting.get(endpoint, 0) + change


class EndpointError(Exception):
    """The endpoint could not give an answer; the message says why, for the person reading the run.

    The message is redacted here, as it is built: endpoints may echo the key they were sent.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"  # the *name* of the variable; keys never live in the database
    max_concurrency: int = 10
    price_input: float = 0.0  # USD per million prompt tokens
    price_output: float = 0.0  # USD per million completion tokens
    timeout: float = 60.0
    retry_seconds: float = RETRY_SECONDS  # how long one call may keep retrying, waits included
    retry_max_wait: float = RETRY_MAX_WAIT  # the longest single wait, Retry-After included
    max_retries: int | None = None  # an optional cap on the number of retries as well
    string_only: bool = False

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.price_input + usage.completion_tokens * self.price_output) / 1e6


@dataclass
class Completion:
    text: str
    usage: Usage
    cost: float
    latency_ms: int
    # How the reply ended, as the endpoint said (`stop`, `length`, `content_filter`, …; None: not said), the
    # model's refusal when it sent one instead of content, and whether it called tools: what tells a finished
    # reply from one that is not (engine.replies).
    finish_reason: str | None = None
    refusal: str | None = None
    tool_calls: bool = False


class ChatClient(Protocol):
    label: str
    is_mock: bool

    def complete(
        self, model: str, messages: list[dict], *, temperature: float | None = None
    ) -> Completion: ...

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]: ...


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _retry_after(headers, now: float | None = None) -> float | None:
    """Seconds the response asks us to wait: retry-after-ms, else Retry-After in seconds or as a date."""
    value = headers.get("retry-after-ms") if headers else None
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after") if headers else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class _Transient(Exception):
    """A failure worth retrying; `reason` is what a person watching the run is told while we wait."""

    def __init__(
        self,
        message: str,
        reason: str,
        retry_after: float | None = None,
        rate_limited: bool = False,
        unreadable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.retry_after = retry_after
        self.rate_limited = rate_limited
        self.unreadable = unreadable  # a 200 that was no chat completion


def _error_text(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return str(getattr(exc, "message", "") or exc)


@dataclass(frozen=True)
class _Reply:
    """What a chat completion says: its first choice's content and how it ended, and the reported usage."""

    text: str
    usage: dict | None
    finish_reason: str | None
    refusal: str | None
    tool_calls: bool


def _reply(response, label: str) -> _Reply:
    """A chat completion's reply; a 200 that is not one (no JSON object, no `choices`, a choice without a
    message object) is a transient failure: gateways send such answers for moments, as they send 502s."""
    if isinstance(response, str):  # the openai client's answer for a body that is not declared JSON
        raise _unreadable(label, f"not JSON: {response[:200]}")
    if not isinstance(response, dict):
        raise _unreadable(label, f"not a JSON object: {json.dumps(response)[:200]}")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _unreadable(label, f"no choices: {json.dumps(response)[:200]}")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise _unreadable(label, f"a choice without a message: {json.dumps(first)[:200]}")
    text, refusal, finish = message.get("content"), message.get("refusal"), first.get("finish_reason")
    usage = response.get("usage")
    return _Reply(
        text=text if isinstance(text, str) else "",
        usage=usage if isinstance(usage, dict) else None,
        finish_reason=finish if isinstance(finish, str) else None,
        refusal=refusal if isinstance(refusal, str) and refusal else None,
        tool_calls=bool(message.get("tool_calls")),
    )


def _unreadable(label: str, detail: str) -> _Transient:
    return _Transient(f"{label} sent an unreadable reply: {detail}", UNREADABLE_REPLY, unreadable=True)


def _status_failure(label: str, status: int, text: str, headers) -> Exception:
    """What an HTTP error answer is: an EndpointError (a 4xx that retrying cannot fix) or a _Transient."""
    message = redact(f"HTTP {status} from {label}: {text}")
    if status not in RETRIED_STATUSES and status < 500:
        return EndpointError(message)
    retry_after = _retry_after(headers)
    if status == 429:
        return _Transient(message, RATE_LIMIT_WAIT, retry_after, rate_limited=True)
    return _Transient(message, f"endpoint unavailable (HTTP {status})", retry_after)


def _timed_out(what: str, label: str, timeout: float) -> _Transient:
    return _Transient(f"{what} to {label} timed out after {timeout:g}s", "endpoint timed out")


def _unreachable(label: str, base_url: str, cause) -> _Transient:
    return _Transient(f"cannot reach {label} at {base_url}: {cause}", "cannot reach endpoint")


class _RetryLoop:
    """One call's retries, as tenacity's Retrying (threads) or AsyncRetrying (asyncio) runs them: how long
    to wait, when to stop, what to report, and waits that end early when the endpoint answers someone."""

    def __init__(self, client: OpenAIClient) -> None:
        self.client = client
        self.endpoint = client.endpoint
        self.label = client.label
        self.started = client._clock()
        # When the latest attempt failed (epoch seconds: boards are shared between processes), and whether
        # the coming wait is a backoff of ours, to cut short when the endpoint answers another call.
        self.failed_at = 0.0
        self.wakeable = False
        self.unreadable = 0  # 200 answers that were no chat completion, said on the page while it waits
        self.backoff = wait_random_exponential(
            multiplier=0.5, min=0.1, max=min(BACKOFF_MAX_WAIT, self.endpoint.retry_max_wait)
        )

    def failed(self) -> None:
        self.failed_at = time.time()

    def answered(self) -> None:
        if self.failed_at or _waiting.get(self.label):
            # Back after failing this call, or answering while others wait: they may retry now.
            self.client._pauses.recovered(self.label, time.time())

    def wait(self, state: RetryCallState) -> float:
        failure: _Transient = state.outcome.exception()
        self.wakeable = failure.retry_after is None and not failure.rate_limited
        delay = failure.retry_after if failure.retry_after is not None else self.backoff(state)
        delay = min(delay, self.endpoint.retry_max_wait)
        if failure.rate_limited:  # everyone else holds back too, instead of each meeting the limit
            self.client._pauses.pause(self.label, time.time() + delay)
        # Another call may have paused the endpoint for longer: wait that out too, whole.
        paused = self.client._pause_remaining()
        self.wakeable = self.wakeable and paused <= delay
        return max(delay, paused)

    def stop(self, state: RetryCallState) -> bool:
        if self.endpoint.max_retries is not None and state.attempt_number > self.endpoint.max_retries:
            return True
        return self.client._clock() - self.started + state.upcoming_sleep > self.endpoint.retry_seconds

    def before_sleep(self, state: RetryCallState) -> None:
        failure: _Transient = state.outcome.exception()
        reason = failure.reason
        if failure.unreadable:
            self.unreadable += 1
            if self.unreadable > 1:
                reason = f"{reason} ({self.unreadable} times)"
        report_wait(RetryWait(self.label, reason, state.upcoming_sleep, state.attempt_number))

    def woken(self) -> bool:
        return self.client._pauses.recovered_at(self.label) > self.failed_at

    def sleep(self, seconds: float) -> None:
        # A sleep passed in (tests' fake time) returns at once: no other call can answer meanwhile.
        if not self.wakeable or self.client._sleep is not time.sleep:
            wait_out(seconds, self.client._sleep)
            return
        _count_waiting(self.label, 1)
        try:
            wait_out(seconds, self.client._sleep, self.woken)
        finally:
            _count_waiting(self.label, -1)

    async def asleep(self, seconds: float) -> None:
        if self.client._sleep is not time.sleep:  # tests' fake time: returns at once, as in `sleep`
            wait_out(seconds, self.client._sleep)
            return
        if not self.wakeable:
            await async_wait_out(seconds)
            return
        _count_waiting(self.label, 1)
        try:
            await async_wait_out(seconds, self.woken)
        finally:
            _count_waiting(self.label, -1)

    def gave_up(self, failure: _Transient, statistics: dict) -> EndpointError:
        attempts = statistics.get("attempt_number", 1)
        spent = self.client._clock() - self.started
        suffix = f" (gave up after {attempts} attempts in {spent:.0f} s)" if attempts > 1 else ""
        return EndpointError(failure.message + suffix)


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
        """fn(), retried on transient failures until it succeeds or the endpoint's retry budget is spent.

        tenacity runs the loop: full-jitter exponential backoff (wait_random_exponential) up to
        BACKOFF_MAX_WAIT, replaced by the server's Retry-After when it sends one, and stopped before a wait
        would overrun the budget. A backoff ends early when the endpoint answers another call meanwhile.
        """
        loop = _RetryLoop(self)
        self._wait_for_pause()

        def attempt():
            call = going_out()
            answered = False
            try:
                result = fn()
                answered = True
            except _Transient:  # an answer that was no chat completion
                loop.failed()
                raise
            except openai.APIStatusError as exc:
                loop.failed()
                failure = _status_failure(self.label, exc.status_code, _error_text(exc), exc.response.headers)
                raise failure from None
            except openai.APITimeoutError:
                loop.failed()
                raise _timed_out(what, self.label, self.endpoint.timeout) from None
            except openai.APIConnectionError as exc:
                loop.failed()
                raise _unreachable(self.label, self.endpoint.base_url, exc.__cause__ or exc) from None
            finally:
                came_back(call, answered=answered)
            loop.answered()
            return result

        retrying = Retrying(
            retry=retry_if_exception_type(_Transient),
            wait=loop.wait,
            stop=loop.stop,
            before_sleep=loop.before_sleep,
            sleep=loop.sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except _Transient as failure:
            raise loop.gave_up(failure, retrying.statistics) from None

    def _pause_remaining(self) -> float:
        return max(0.0, self._pauses.paused_until(self.label) - time.time())

    def _wait_for_pause(self) -> None:
        """Hold back while another call has the endpoint paused after a rate limit."""
        remaining = self._pause_remaining()
        if remaining <= 0:
            return
        # Spread out a little, so the callers held back do not all arrive in the same instant.
        seconds = remaining + random.uniform(0, min(1.0, 0.2 * remaining))
        report_wait(RetryWait(self.label, RATE_LIMIT_WAIT, seconds, 0))
        wait_out(seconds, self._sleep)

    def _body(self, model: str, messages: list[dict], temperature: float | None) -> dict:
        if self.secrets:
            messages = with_secrets(messages)
        if self.endpoint.string_only:
            # Endpoints that take one string get the conversation as the judge sees it, in [Role]: form.
            messages = [{"role": "user", "content": format_transcript(messages)}]
        body = {"model": model, "messages": messages}
        if temperature is not None:
            body["temperature"] = temperature
        return body

    def _completion(self, reply: _Reply, messages: list[dict], started: float) -> Completion:
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
        return Completion(
            text=text,
            usage=usage,
            cost=self.endpoint.cost(usage),
            latency_ms=latency_ms,
            finish_reason=reply.finish_reason,
            refusal=redact_configured(reply.refusal) if reply.refusal else None,
            tool_calls=reply.tool_calls,
        )

    def complete(self, model: str, messages: list[dict], *, temperature: float | None = None) -> Completion:
        body = self._body(model, messages, temperature)
        started = time.monotonic()
        # The client's own post: the same auth, headers, timeouts and errors as chat.completions.create,
        # minus create's walk of our plain messages against its TypedDicts and the typed response we would
        # only read two fields of. Those cost more CPU than the rest of the call (3.5 of 6 ms per call).
        reply = self._call("request", lambda: self._read(body))
        return self._completion(reply, messages, started)

    def _read(self, body: dict) -> _Reply:
        try:
            response = self._client().post("/chat/completions", body=body, cast_to=dict)
        except json.JSONDecodeError as exc:  # a JSON content type over a body that is not JSON
            raise _unreadable(self.label, f"not JSON: {exc.doc[:200]}") from None
        return _reply(response, self.label)

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]:
        response = self._call(
            "embedding request", lambda: self._client().embeddings.create(model=model, input=texts)
        )
        vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        tokens = response.usage.prompt_tokens if response.usage else sum(map(estimate_tokens, texts))
        usage = Usage(prompt_tokens=tokens)
        return vectors, usage, self.endpoint.cost(usage)


# Per event loop, per (base URL, key, timeout); each loop's own are touched only on it.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, aiohttp.ClientSession]] = (
    weakref.WeakKeyDictionary()
)


class AsyncOpenAIClient(OpenAIClient):
    """An OpenAIClient whose chat calls can also be awaited (`acomplete`), for the asyncio path that plays
    many conversations on one event loop (engine.runner, the CLI). The same retries, waits, pauses, errors
    and redaction as `complete`; only the transport differs.

    Chat calls go through aiohttp rather than the `openai` client: measured against the fake endpoint at
    concurrency 100, a call costs 0.34 ms of CPU through aiohttp and 1.6–2.2 ms through the openai client
    (sync or async) or httpx, whose Python-level request building and parsing dominate once the model is
    fast. Judges and embeddings keep the `openai` client, in threads (engine.conversation.run_eval_async).
    """

    def _session_key(self) -> tuple:
        api_key = os.environ.get(self.endpoint.api_key_env, "") or "not-set"
        return (self.endpoint.base_url, api_key, self.endpoint.timeout)

    def _session(self):
        # One session (a connection pool) per event loop and endpoint, shared by every client built for it: a
        # worker builds a client per conversation, and a session each would open a connection each.
        sessions = _sessions.setdefault(asyncio.get_running_loop(), {})
        key = self._session_key()
        session = sessions.get(key)
        if session is None or session.closed:
            session = aiohttp.ClientSession(
                # Concurrency is the caller's to bound (the runner's semaphore, the endpoint's cap).
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(total=self.endpoint.timeout),
                headers={"Authorization": f"Bearer {key[1]}", "Content-Type": "application/json"},
            )
            sessions[key] = session
        return session

    async def aclose(self) -> None:
        """Close this endpoint's session on the running event loop (the runner calls it before its loop ends)."""
        session = _sessions.get(asyncio.get_running_loop(), {}).pop(self._session_key(), None)
        if session is not None:
            await session.close()

    async def acomplete(
        self, model: str, messages: list[dict], *, temperature: float | None = None
    ) -> Completion:
        body = self._body(model, messages, temperature)
        started = time.monotonic()
        reply = await self._acall("request", lambda: self._post(body))
        return self._completion(reply, messages, started)

    async def _post(self, body: dict) -> _Reply:
        async with self._session().post(
            self.endpoint.base_url.rstrip("/") + "/chat/completions", json=body
        ) as r:
            if r.status >= 400:
                raw = await r.text()
                raise _HTTPFailure(r.status, _error_body_text(raw), r.headers)
            try:
                response = await r.json(content_type=None)
            except ValueError:
                raise _unreadable(self.label, f"not JSON: {(await r.text(errors='replace'))[:200]}") from None
        return _reply(response, self.label)

    async def _acall(self, what: str, afn):
        """_call for coroutines: the same retry loop under tenacity's AsyncRetrying."""

        import aiohttp

        loop = _RetryLoop(self)
        remaining = self._pause_remaining()
        if remaining > 0:  # another call has the endpoint paused after a rate limit
            seconds = remaining + random.uniform(0, min(1.0, 0.2 * remaining))
            report_wait(RetryWait(self.label, RATE_LIMIT_WAIT, seconds, 0))
            await async_wait_out(seconds)

        async def attempt():
            call = going_out()
            answered = False
            try:
                result = await afn()
                answered = True
            except _Transient:  # an answer that was no chat completion
                loop.failed()
                raise
            except _HTTPFailure as exc:
                loop.failed()
                raise _status_failure(self.label, exc.status, exc.text, exc.headers) from None
            except (TimeoutError, aiohttp.ServerTimeoutError):
                loop.failed()
                raise _timed_out(what, self.label, self.endpoint.timeout) from None
            except aiohttp.ClientError as exc:
                loop.failed()
                raise _unreachable(self.label, self.endpoint.base_url, exc) from None
            finally:
                came_back(call, answered=answered)
            loop.answered()
            return result

        # Most calls succeed at once: the first attempt is made without tenacity, whose machinery (a few
        # inspect calls per callback per attempt) cost a tenth of a millisecond a call at concurrency 100. A
        # first attempt that failed is handed to the retry loop as its attempt 1, so the loop waits and
        # counts as if it had made it.
        failed_first: list[_Transient] = []
        try:
            return await attempt()
        except _Transient as failure:
            failed_first.append(failure)

        async def again():
            if failed_first:
                raise failed_first.pop()
            return await attempt()

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Transient),
            wait=loop.wait,
            stop=loop.stop,
            before_sleep=loop.before_sleep,
            sleep=loop.asleep,
            reraise=True,
        )
        try:
            return await retrying(again)
        except _Transient as failure:
            raise loop.gave_up(failure, retrying.statistics) from None


class _HTTPFailure(Exception):
    def __init__(self, status: int, text: str, headers) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.text, self.headers = status, text, headers


def _error_body_text(raw: str) -> str:
    """An error answer's message, as the openai client would give it: the JSON error's message, or the text."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:500] or "no body"
    if isinstance(body, dict):
        error = body.get("error")
        message = (error.get("message") if isinstance(error, dict) else None) or body.get("message")
        if message:
            return str(message)
    return raw[:500]


def with_secrets(messages: list[dict]) -> list[dict]:
    """The messages as sent: each `{{secret:NAME}}` filled from the environment here, at the call, so the
    value is in no stored message; it is redacted wherever the endpoint echoes it. An unset one ends the
    conversation as an error naming the variable (engine.suitevars)."""
    if not any("{{" in str(message.get("content") or "") for message in messages):
        return messages

    def filled(text: str) -> str:
        try:
            text, used = fill_secrets(text)
        except MissingSecret as exc:
            raise EndpointError(str(exc)) from None
        for name in used:
            register_key_env(name)
        return text

    sent = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            message = {**message, "content": filled(content)}
        elif isinstance(content, list):  # content parts: their text
            parts = [
                {**part, "text": filled(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
            message = {**message, "content": parts}
        sent.append(message)
    return sent


@dataclass
class MockClient:
    """The built-in `mock` endpoint: replies from the suite's `mock.rules`, offline and free.

    The first rule whose glob matches the latest user message wins. Token counts are estimates.
    """

    spec: MockSpec = field(default_factory=MockSpec)
    label: str = MOCK
    is_mock: bool = True
    sleep: Callable[[float], None] = time.sleep

    def complete(self, model: str, messages: list[dict], *, temperature: float | None = None) -> Completion:
        started = time.monotonic()
        last_user = next((message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
        try:
            text = next(
                (rule.reply for rule in self.spec.rules if glob_match(rule.when, last_user)),
                self.spec.default,
            )
        except RegexFailure as exc:  # a rule's glob ran out of time: this conversation errors, not the run
            raise EndpointError(f"mock endpoint: {exc}") from None
        if self.spec.latency_ms:
            self.sleep(self.spec.latency_ms / 1000)
        prompt_text = " ".join(message_text(m) for m in messages)
        usage = Usage(
            prompt_tokens=estimate_tokens(prompt_text),
            completion_tokens=estimate_tokens(text),
            estimated=True,
        )
        return Completion(
            text=text, usage=usage, cost=0.0, latency_ms=int((time.monotonic() - started) * 1000)
        )

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]:
        vectors = [bag_of_words_vector(text) for text in texts]
        return vectors, Usage(prompt_tokens=sum(map(estimate_tokens, texts)), estimated=True), 0.0


def warm_up() -> None:
    """Load the openai client's lazily imported modules now, not in a dozen threads' first requests."""
    client = openai.OpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1", max_retries=0)
    _ = client.chat.completions, client.embeddings
    client.close()


def bag_of_words_vector(text: str, dims: int = 64) -> list[float]:
    """A stable, meaning-blind embedding for the mock: same words, same vector."""
    vector = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[zlib.crc32(word.encode()) % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@dataclass
class EndpointRegistry:
    """Maps model references to endpoints.

    "endpoint/model" picks a named endpoint when "endpoint" is one; anything else, including ids such as
    "anthropic/claude-3.5-sonnet", goes whole to the default endpoint. "mock" (or "mock/anything") is the
    built-in mock.
    """

    default: EndpointConfig
    named: dict[str, EndpointConfig] = field(default_factory=dict)
    pauses: PauseBoard = LOCAL_PAUSES  # rate-limit pauses, shared by every client of an endpoint

    def resolve(self, ref: str) -> tuple[str, str]:
        """Returns (endpoint name, model id to send)."""
        ref = ref.strip()
        if ref == MOCK:
            return MOCK, MOCK
        prefix, sep, rest = ref.partition("/")
        if sep and rest:
            if prefix == MOCK:
                return MOCK, rest
            if prefix in self.named:
                return prefix, rest
        return DEFAULT, ref

    def endpoint(self, name: str) -> EndpointConfig | None:
        if name == DEFAULT:
            return self.default
        return self.named.get(name)

    def client(
        self, name: str, mock: MockSpec | None = None, *, asynchronous: bool = False, secrets: bool = False
    ) -> ChatClient:
        """The endpoint's client; `asynchronous`: one whose chat calls can also be awaited; `secrets`: one
        that fills the suite's `{{secret:NAME}}` from the environment in what it sends (the model under
        test's)."""
        if name == MOCK:
            return MockClient(mock or MockSpec())
        endpoint = self.endpoint(name)
        if endpoint is None:
            raise EndpointError(f"unknown endpoint {name!r}")
        return (AsyncOpenAIClient if asynchronous else OpenAIClient)(
            endpoint, pauses=self.pauses, secrets=secrets
        )

    def with_timeouts(
        self, per_endpoint: Mapping[str, float], every: float | None = None
    ) -> EndpointRegistry:
        """This registry with its request timeouts overridden: `every` for each endpoint, else
        `per_endpoint`'s for the endpoints it names (`default` for the default one)."""
        if every is None and not per_endpoint:
            return self

        def timed(config: EndpointConfig) -> EndpointConfig:
            seconds = every if every is not None else per_endpoint.get(config.name)
            return config if seconds is None else replace(config, timeout=float(seconds))

        named = {name: timed(config) for name, config in self.named.items()}
        return EndpointRegistry(default=timed(self.default), named=named, pauses=self.pauses)

    def max_concurrency(self, name: str) -> int:
        endpoint = self.endpoint(name)
        return endpoint.max_concurrency if endpoint else 1_000


def default_endpoint_from_env(**overrides) -> EndpointConfig:
    base_url = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    return EndpointConfig(name=DEFAULT, base_url=base_url, api_key_env="OPENAI_API_KEY", **overrides)


def is_known_endpoint_name(name: str) -> bool:
    return bool(re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,49}", name)) and name not in (MOCK, DEFAULT)
