"""Awaiting chat calls on an event loop, through aiohttp, for the asyncio path that plays many
conversations on one loop (engine.runner, the workers).

Chat calls go through aiohttp rather than the `openai` client: its request building and parsing, in
Python, dominate a call's CPU once the model is fast. Grading runs in threads beside the loop
(engine.conversation_io.Threaded), as checks are plain functions: a judge's or a simulated user's chat call
made there is handed to the loop that plays the conversation (`calls_loop`), so it costs what the model under
test's calls cost. Embeddings keep the `openai` client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import os
import time
import weakref

import aiohttp
import orjson
from tenacity import AsyncRetrying

from ..meter import sent
from ..retries import async_wait_out
from ..schema.settings import ModelSettings
from .answers import (
    Reply,
    Transient,
    error_body,
    read_reply,
    status_failure,
    timed_out,
    unreachable,
    unreadable,
)
from .base import Completion, EndpointError
from .http import OpenAIClient
from .retrying import RetryLoop
from .settings import refusal

# Per event loop, per (base URL, key, timeout); each loop's own are touched only on it.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, aiohttp.ClientSession]] = (
    weakref.WeakKeyDictionary()
)


# The loop playing the conversation whose grading runs in this thread (engine.conversation_io.Threaded sets it
# in the thread's copy of the conversation's context); None elsewhere.
calls_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "calls_loop", default=None
)
# How often a grading thread waiting on its call looks whether the loop has stopped (a run cut short).
_LOOP_CHECK_SECONDS = 1.0


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def close_sessions() -> None:
    """Close every endpoint's session on the running loop (the runner, once its conversations have ended)."""
    for session in _sessions.pop(asyncio.get_running_loop(), {}).values():
        await session.close()


def _encoded(body: dict) -> bytes:
    """The request body as JSON; what orjson refuses (an integer past 64 bits, say) the json module writes."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


class _HTTPFailure(Exception):
    def __init__(self, status: int, text: str, headers, param: str | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.text, self.headers, self.param = status, text, headers, param


class AsyncOpenAIClient(OpenAIClient):
    """An OpenAIClient whose chat calls can also be awaited (`acomplete`): the same retries, waits, pauses,
    errors and redaction as `complete`; only the transport differs."""

    def _session_key(self) -> tuple:
        api_key = os.environ.get(self.endpoint.api_key_env, "") or "not-set"
        return (self.endpoint.base_url, api_key, self.endpoint.timeout)

    def _session(self):
        # One session (a connection pool) per event loop and endpoint, shared by every client built for it: a
        # worker builds a client per conversation, and a session each would open a connection each.
        loop = asyncio.get_running_loop()
        sessions = _sessions.get(loop)
        if sessions is None:  # setdefault would make a weak reference to the loop on every call
            sessions = _sessions[loop] = {}
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

    def complete(self, model: str, messages: list[dict], **kwargs) -> Completion:
        """From a grading thread, the call is made on the loop playing its conversation, through aiohttp;
        anywhere else (no such loop, or on the loop's own thread), through the `openai` client."""
        loop = calls_loop.get()
        if loop is None or loop.is_closed() or _running_loop() is loop:
            return super().complete(model, messages, **kwargs)
        future = asyncio.run_coroutine_threadsafe(self.acomplete(model, messages, **kwargs), loop)
        while True:
            try:
                return future.result(timeout=_LOOP_CHECK_SECONDS)
            except concurrent.futures.TimeoutError:
                if not loop.is_running():  # the run was cut short: nobody will answer
                    future.cancel()
                    raise EndpointError(f"{self.label}: the run stopped before the call ended") from None

    async def aclose(self) -> None:
        """Close this endpoint's session on the running event loop (the runner calls it before its loop ends)."""
        session = _sessions.get(asyncio.get_running_loop(), {}).pop(self._session_key(), None)
        if session is not None:
            await session.close()

    async def acomplete(
        self,
        model: str,
        messages: list[dict],
        *,
        temperature: float | None = None,
        tools: list[dict] | None = None,
        settings: ModelSettings | None = None,
    ) -> Completion:
        body = self._body(model, messages, temperature, tools, settings)
        sent_headers = self._headers(settings) or None
        started = time.monotonic()
        try:
            reply = await self._acall("request", lambda: self._post(body, sent_headers))
        except EndpointError as exc:
            refused = refusal(exc, settings)
            if refused is None:
                raise
            raise refused from None
        return self._completion(reply, messages, started)

    async def _post(self, body: dict, sent_headers: dict[str, str] | None = None) -> Reply:
        # Encoded and decoded by orjson: the json module's work was a tenth of a worker's CPU a call. The
        # session sends these bytes as application/json.
        async with self._session().post(
            self.endpoint.base_url.rstrip("/") + "/chat/completions",
            data=_encoded(body),
            headers=sent_headers,
        ) as r:
            if r.status >= 400:
                raw = await r.text()
                text, param = error_body(raw)
                raise _HTTPFailure(r.status, text, r.headers, param)
            raw = await r.read()
            try:
                response = orjson.loads(raw)
            except orjson.JSONDecodeError:
                text = raw.decode("utf-8", errors="replace")
                raise unreadable(self.label, f"not JSON: {text[:200]}") from None
        return read_reply(response, self.label)

    def _afailure(self, what: str, exc: BaseException) -> Exception | None:
        """aiohttp's exception (or our _HTTPFailure) as the failure to raise; None for any other."""
        if isinstance(exc, _HTTPFailure):
            return status_failure(self.label, exc.status, exc.text, exc.headers, exc.param)
        if isinstance(exc, (TimeoutError, aiohttp.ServerTimeoutError)):
            return timed_out(what, self.label, self.endpoint.timeout)
        if isinstance(exc, aiohttp.ClientError):
            return unreachable(self.label, self.endpoint.base_url, exc)
        return None

    async def _acall(self, what: str, afn):
        """_call for coroutines: the same retry loop under tenacity's AsyncRetrying."""
        loop = RetryLoop(self, what)
        seconds = loop.held_back()
        if seconds:
            await async_wait_out(seconds)

        async def attempt():
            sent(self.label, self.endpoint.priced)
            with loop.attempt(self._afailure):
                return await afn()

        # Most calls succeed at once: the first attempt is made without tenacity, whose machinery costs more
        # than the rest of a call's CPU. A first attempt that failed is handed to the retry loop as its
        # attempt 1, so the loop waits and counts as if it had made it.
        failed_first: list[Transient] = []
        try:
            return await attempt()
        except Transient as failure:
            failed_first.append(failure)

        async def again():
            if failed_first:
                raise failed_first.pop()
            return await attempt()

        retrying = loop.retrying(AsyncRetrying, loop.asleep)
        try:
            return await retrying(again)
        except Transient as failure:
            raise loop.gave_up(failure, retrying.statistics) from None
