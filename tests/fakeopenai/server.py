"""The fake endpoint's HTTP server: FakeOpenAI and the request handler it serves through."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import random
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakeopenai.replies import (
    _DROPPED,
    CHAT_PATH,
    EMBEDDINGS_PATH,
    FAKE_MODEL,
    MODELS_PATH,
    Reply,
    _as_reply,
    _error,
    _Fault,
    _Headers,
    _Response,
    _Rule,
    _safe_key,
    _Storm,
    content_text,
    conversation_key,
    count_words,
    hashed_embedding,
    tool_reply,
)

REFUSALS = {
    "unsupported": "Unsupported parameter: '{param}' is not supported with this model.",
    "unrecognized": "Unrecognized request argument supplied: {param}",
    # A gateway's words that name no parameter: only the error's `param` field says which.
    "unnamed": "This model does not support one of the options sent.",
}


class FakeOpenAI:
    """Fake OpenAI endpoint; see the module docstring for the reply-selection order.

    All configuration methods are thread-safe and may be called while requests are in flight.
    """

    def __init__(
        self, latency: float = 0.0, api_key: str | None = None, *, port: int = 0, host: str = "127.0.0.1"
    ):
        self.latency = latency
        self.api_key = api_key
        self.default_reply: str | Reply = "OK"
        # With tools offered and no script or rule answering: rounds of tool calls before the text answer.
        self.tool_rounds = 1
        self._initial_latency = latency
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        # Set on stop() so sleeping handlers (latency, hangs) wake up instead of outliving the test.
        self._stopping = threading.Event()
        self._lock = threading.RLock()
        # Requests being answered right now, and the most seen at once since the last reset().
        self._in_flight = 0
        self.max_in_flight = 0
        self._ids = itertools.count(1)
        self._answering = threading.local()  # the log entry of the request this handler thread answers
        self._clear_state()

    def _clear_state(self) -> None:
        with self._lock:
            self._scripts: dict[str, list[Reply]] = {}
            self._rules: list[_Rule] = []
            self._faults: list[_Fault] = []
            self._down = False
            self._misbehaving: Reply | None = None
            self._storm: _Storm | None = None
            self._embedding_overrides: dict[str, list[float]] = {}
            self._models_seen: dict[str, None] = {}
            self._models_status: int | None = None
            self._requests: list[dict] = []
            self._refused: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is not None:
            return self
        self._stopping.clear()
        # Started again after stop(): the same address, as a model server that comes back.
        port = self._port if self._port is not None else self._requested_port
        self._server = _Server((self._host, port), self)
        self._port = self._server.server_address[1]
        # A short poll interval keeps stop() fast; the default 0.5 s would add up across many tests.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fakeopenai:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        self._stopping.set()
        server.shutdown()
        # Keep-alive connections have their own handler threads that would otherwise keep
        # answering after stop(); cutting them makes a stopped fake look like a dead endpoint.
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeOpenAI has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``; still valid after stop(), pointing at a closed port."""
        return f"http://{self._host}:{self.port}/v1"

    # -- configuration -----------------------------------------------------------------------------

    def script(self, first_user: str, replies: list[str | Reply]) -> None:
        """Reply by turn for the conversation whose first user message is exactly ``first_user``."""
        if not replies:
            raise ValueError("script() needs at least one reply")
        with self._lock:
            self._scripts[first_user] = [_as_reply(reply) for reply in replies]

    def rule(
        self,
        contains: str,
        reply: str | Reply | list[str | Reply],
        *,
        where: str = "last",
        model: str | None = None,
    ) -> None:
        """Reply with ``reply`` when the last message contains ``contains``; earlier rules win.

        ``where``: "last" (the last message, the default), "system" (any system message) or "any" (any
        message). A list of replies cycles: the rule's n-th answered request gets ``replies[n % len]``.
        ``model``: the rule applies only to requests for this model.
        """
        if where not in ("last", "system", "any"):
            raise ValueError(f"where must be last, system or any, not {where!r}")
        replies = [_as_reply(item) for item in reply] if isinstance(reply, list) else [_as_reply(reply)]
        if not replies:
            raise ValueError("rule() needs at least one reply")
        with self._lock:
            self._rules.append(_Rule(contains, replies, where, model))

    def fail_next(
        self,
        n: int,
        status: int = 429,
        retry_after: float | None = None,
        hang: float | None = None,
        first_user: str | None = None,
        reply: str | Reply | None = None,
    ) -> None:
        """Make the next ``n`` chat requests (only this conversation's, if ``first_user``) fail.

        With ``hang`` the request instead sleeps that long and is then answered normally, which a
        client with a shorter timeout sees as a timeout. With ``reply`` it is answered with that Reply
        (``Reply(raw="<html>...", content_type="text/html")``, ``Reply(choices=[])``), status 200 unless
        the Reply has one.
        """
        if n <= 0:
            return
        with self._lock:
            fault = _Fault(n, status, retry_after, hang, first_user, _as_reply(reply) if reply else None)
            self._faults.append(fault)

    def refuse(self, param: str, style: str = "unsupported") -> None:
        """Answer every chat request whose body carries ``param`` with a 400 naming it, in the words of
        OpenAI's API: ``style`` "unsupported" ("Unsupported parameter: 'temperature' is not supported with
        this model.") or "unrecognized" ("Unrecognized request argument supplied: seed"). Before any fault
        or reply, without the latency, as the API checks a request before it reaches a model."""
        if style not in REFUSALS:
            raise ValueError(f"style must be one of {', '.join(REFUSALS)}, not {style!r}")
        with self._lock:
            self._refused[param] = style

    def misbehave(self, reply: str | Reply | None = None) -> None:
        """Answer every chat request with ``reply`` (a malformed 200, say) until ``misbehave()`` with none,
        as a gateway does while it has no model behind it. Such answers are logged with ``"fault": True``."""
        with self._lock:
            self._misbehaving = _as_reply(reply) if reply is not None else None

    def down(self) -> None:
        """Answer every chat/embeddings request with 503 until up()."""
        with self._lock:
            self._down = True

    def up(self) -> None:
        with self._lock:
            self._down = False

    def storm(
        self,
        rate_429: float = 0.0,
        rate_500: float = 0.0,
        retry_after: float | None = 1.0,
        seed: int | None = None,
    ) -> None:
        """From now on a chat request fails with 429 (sending ``retry_after`` as Retry-After) with
        probability ``rate_429``, or with 500 with probability ``rate_500``; ``storm()`` ends it. Seeded, so
        a run sees the same sequence of failures in the order requests arrive."""
        if not 0 <= rate_429 + rate_500 <= 1 or rate_429 < 0 or rate_500 < 0:
            raise ValueError("storm rates must be between 0 and 1, and add up to at most 1")
        with self._lock:
            self._storm = (
                _Storm(rate_429, rate_500, retry_after, random.Random(seed)) if rate_429 or rate_500 else None
            )

    def fail_models(self, status: int = 404) -> None:
        """Answer ``GET /v1/models`` with this status until reset(), like endpoints that do not serve it."""
        with self._lock:
            self._models_status = status

    def embedding(self, text: str, vector: list[float]) -> None:
        """Return ``vector`` (as given, not normalised) whenever exactly ``text`` is embedded."""
        with self._lock:
            self._embedding_overrides[text] = [float(value) for value in vector]

    def embedding_for(self, text: str) -> list[float]:
        """The vector the server would return for ``text``."""
        with self._lock:
            override = self._embedding_overrides.get(text)
        return list(override) if override is not None else hashed_embedding(text)

    def reset(self) -> None:
        """Back to the just-constructed state: clears scripts, rules, faults, down, embedding
        overrides, seen models and the request log; restores latency and default_reply."""
        self._clear_state()
        with self._lock:
            self.max_in_flight = self._in_flight
        self.latency = self._initial_latency
        self.default_reply = "OK"
        self.tool_rounds = 1

    # -- inspection --------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict]:
        """Snapshot of the request log: ``{"path", "body", "headers", "at", "status"}`` per request,
        in arrival order. ``status`` is None while the request is still being answered."""
        with self._lock:
            return list(self._requests)

    def chat_headers(self) -> list[dict]:
        """Headers of logged chat requests (lower-cased names), in arrival order."""
        return [entry["headers"] for entry in self.requests if entry["path"] == CHAT_PATH]

    def chat_requests(self, first_user: str | None = None) -> list[dict]:
        """Bodies of logged chat requests, optionally only those of one conversation."""
        bodies = []
        for entry in self.requests:
            body = entry["body"]
            if entry["path"] != CHAT_PATH or not isinstance(body, dict):
                continue
            if first_user is not None:
                messages = body.get("messages")
                if not isinstance(messages, list) or _safe_key(messages) != first_user:
                    continue
            bodies.append(body)
        return bodies

    # -- request handling (called from handler threads) --------------------------------------------

    def _note_fault(self) -> None:
        """The request being answered gets a fault's answer: its log entry says so (a 200 that is no reply)."""
        entry = getattr(self._answering, "entry", None)
        if entry is not None:
            entry["fault"] = True

    def _handle(self, method: str, path: str, raw_body: bytes, headers: _Headers) -> _Response:
        body: Any = None
        malformed = False
        if raw_body:
            try:
                body = json.loads(raw_body)
            except ValueError:
                malformed = True
        # Logged on arrival, not completion, so a hung request is visible to the test meanwhile.
        entry = {"path": path, "body": body, "headers": headers, "at": time.monotonic(), "status": None}
        with self._lock:
            self._requests.append(entry)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        self._answering.entry = entry
        try:
            response = self._route(method, path, body, malformed, headers)
        finally:
            self._answering.entry = None
            with self._lock:
                self._in_flight -= 1
        with self._lock:
            entry["status"] = response.status if response is not _DROPPED else None
        return response

    def _route(self, method: str, path: str, body: Any, malformed: bool, headers: _Headers) -> _Response:
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            # Echoes the key it was given, as some providers do: callers must keep it out of what they show.
            sent = (headers.get("authorization") or "").removeprefix("Bearer ")
            message = (
                f"Incorrect API key provided: {sent}. "
                "You can find your API key at https://platform.openai.com/account/api-keys."
            )
            return _error(401, message, code="invalid_api_key")
        routes = {
            (CHAT_PATH, "POST"): self._chat,
            (EMBEDDINGS_PATH, "POST"): self._embeddings,
            (MODELS_PATH, "GET"): self._models,
        }
        handler = routes.get((path, method))
        if handler is None:
            if any(route_path == path for route_path, _ in routes):
                return _error(405, f"Method {method} not allowed on {path}")
            return _error(404, f"Unknown path {path}")
        if method == "POST" and (malformed or not isinstance(body, dict)):
            return _error(400, "Request body must be a JSON object")
        return handler(body)

    def _sleep(self, seconds: float | None) -> None:
        if seconds and seconds > 0:
            self._stopping.wait(seconds)

    def _note_model(self, model: Any) -> None:
        if isinstance(model, str) and model:
            with self._lock:
                self._models_seen.setdefault(model, None)

    def _chat(self, body: dict) -> _Response:
        with self._lock:
            down = self._down
        if down:
            return _error(503, "The server is temporarily unavailable (fakeopenai is down)")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, "'messages' must be a non-empty list of message objects")
        if body.get("stream"):
            return _error(400, "fakeopenai does not support stream=true")
        with self._lock:
            refused = next((param for param in self._refused if param in body), None)
            style = self._refused.get(refused) if refused else None
        if refused is not None:
            return _error(
                400, REFUSALS[style].format(param=refused), code=f"{style}_parameter", param=refused
            )
        model = body.get("model") or FAKE_MODEL
        self._note_model(model)
        key = conversation_key(messages)

        stormed = self._stormed()
        if stormed is not None:
            self._sleep(self.latency)
            return stormed

        with self._lock:
            misbehaving = self._misbehaving
        if misbehaving is not None:
            self._sleep(self.latency)
            self._note_fault()
            return self._answer(model, messages, misbehaving)

        fault = self._take_fault(key)
        if fault is not None and fault.reply is not None:
            self._sleep(self.latency)
            self._note_fault()
            return self._answer(model, messages, fault.reply)
        if fault is not None and fault.hang is None:
            self._sleep(self.latency)
            return _error(fault.status, retry_after=fault.retry_after)

        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        reply = self._select_reply(key, messages, model, tools)
        if fault is not None:
            self._sleep(fault.hang)
        elif reply.hang is not None:
            self._sleep(reply.hang)
        else:
            self._sleep(reply.latency if reply.latency is not None else self.latency)

        if self._stopping.is_set():
            return _DROPPED  # stopped while this request waited: a dead server answers nothing
        return self._answer(model, messages, reply)

    def _answer(self, model: str, messages: list[dict], reply: Reply) -> _Response:
        if reply.raw is not None:
            return _Response(reply.status or 200, {}, {"Content-Type": reply.content_type}, reply.raw)
        if reply.status is not None:
            return _error(reply.status, reply.text or None, retry_after=reply.retry_after)
        return _Response(200, self._completion(model, messages, reply), {})

    def _stormed(self) -> _Response | None:
        with self._lock:
            storm = self._storm
            if storm is None:
                return None
            draw = storm.random.random()
        if draw < storm.rate_429:
            return _error(429, "Rate limit reached (fakeopenai storm)", retry_after=storm.retry_after)
        if draw < storm.rate_429 + storm.rate_500:
            return _error(500, "The server had an error (fakeopenai storm)")
        return None

    def _take_fault(self, key: str | None) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.first_user is None or fault.first_user == key:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _select_reply(
        self, key: str | None, messages: list[dict], model: str | None = None, tools: list[dict] | None = None
    ) -> Reply:
        with self._lock:
            replies = self._scripts.get(key) if key is not None else None
            if replies:
                turn = sum(1 for message in messages if message.get("role") == "assistant")
                return replies[min(turn, len(replies) - 1)]
            for rule in self._rules:
                if rule.matches(messages, model):
                    return rule.take()
        if tools:
            return tool_reply(messages, tools, self.tool_rounds)
        return _as_reply(self.default_reply)

    def _completion(self, model: str, messages: list[dict], reply: Reply) -> dict:
        prompt_tokens = sum(count_words(content_text(message.get("content"))) for message in messages)
        completion_tokens = max(1, count_words(reply.text))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if reply.usage:
            usage.update(reply.usage)
            if "total_tokens" not in reply.usage:
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None if reply.null_content else reply.text},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
        }
        if reply.refusal is not None:
            completion["choices"][0]["message"]["refusal"] = reply.refusal
        if reply.tool_calls:
            message = completion["choices"][0]["message"]
            message["content"] = reply.text or None
            message["tool_calls"] = [
                {
                    "id": call.get("id") or f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call.get("arguments"), str)
                        else json.dumps(call.get("arguments") or {}),
                    },
                }
                for call in reply.tool_calls
            ]
            if reply.finish_reason == "stop":
                completion["choices"][0]["finish_reason"] = "tool_calls"
        if reply.choices is not None:
            completion["choices"] = reply.choices
        if not reply.omit_usage:
            completion["usage"] = usage
        return completion

    def _embeddings(self, body: dict) -> _Response:
        with self._lock:
            down = self._down
        if down:
            return _error(503, "The server is temporarily unavailable (fakeopenai is down)")
        raw_input = body.get("input")
        if isinstance(raw_input, str):
            texts = [raw_input]
        elif isinstance(raw_input, list) and raw_input:
            # Token-id inputs are rare in our code; any stable text stand-in will do for them.
            texts = [item if isinstance(item, str) else json.dumps(item) for item in raw_input]
        else:
            return _error(400, "'input' must be a string or a non-empty list")
        model = body.get("model") or FAKE_MODEL
        self._note_model(model)
        self._sleep(self.latency)

        # The client asks for base64 unless the caller picked a format, then decodes float32 itself.
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = self.embedding_for(text)
            encoded: Any = vector
            if as_base64:
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(count_words(text) for text in texts)
        return _Response(
            200,
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
            {},
        )

    def _models(self, body: Any) -> _Response:
        with self._lock:
            if self._models_status is not None:
                return _error(self._models_status, "Not served here")
            names = dict.fromkeys([FAKE_MODEL, *self._models_seen])
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "fakeopenai"} for name in names]
        return _Response(200, {"object": "list", "data": data}, {})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Bursts of simultaneous connects must queue, not be dropped: a launch at high concurrency opens hundreds at
    # once, faster than the accepting thread takes them, and a connect dropped beyond the queue is retried by its
    # client a second later. The queue is as long as uvicorn's default backlog; the kernel caps it at somaxconn.
    request_queue_size = 2048

    def __init__(self, address: tuple[str, int], fake: FakeOpenAI):
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request, client_address):
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request, client_address):
        # Clients hanging up (timeouts, stop()) are expected; only real bugs deserve a traceback.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakeopenai/1.0"
    # Headers and body go out as separate writes; without TCP_NODELAY, Nagle plus delayed ACKs delay each
    # keep-alive request and spoil latency measurements.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        # Always drain the body, even for requests we reject, or the next request on this
        # keep-alive connection would be parsed from the leftovers.
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length > 0 else b""
        path = self.path.split("?", 1)[0]
        response = self.server.fake._handle(method, path, raw_body, _Headers(self.headers.items()))
        if response is _DROPPED:
            self.close_connection = True
            return
        if response.raw is not None:
            payload = response.raw.encode("utf-8")
        else:
            payload = json.dumps(response.body).encode("utf-8")
        headers = {"Content-Type": "application/json", **response.headers}
        try:
            self.send_response(response.status)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            # The client gave up (typically a timeout during a hang); nothing left to tell it.
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass
