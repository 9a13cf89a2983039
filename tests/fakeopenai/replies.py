"""What the fake endpoint answers with: replies, rules and faults, and the helpers that read a request."""

from __future__ import annotations

import math
import random
import re
import zlib
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, NamedTuple

EMBEDDING_DIMENSIONS = 64


FAKE_MODEL = "fake-model"


CHAT_PATH = "/v1/chat/completions"


EMBEDDINGS_PATH = "/v1/embeddings"


MODELS_PATH = "/v1/models"


@dataclass
class Reply:
    """One canned answer. A plain ``str`` anywhere a Reply is accepted means ``Reply(text=...)``."""

    text: str = ""
    # Overrides the server-wide latency for this request only.
    latency: float | None = None
    # Answer with this HTTP error status (text becomes the error message) instead of a completion.
    status: int | None = None
    # Seconds, sent as a Retry-After header; only meaningful together with ``status``.
    retry_after: float | None = None
    # Sleep this long before answering (replaces latency); used to trigger client timeouts.
    hang: float | None = None
    # Merged over the computed usage; total_tokens is recomputed unless given.
    usage: dict | None = None
    omit_usage: bool = False
    # How the completion says the reply ended: "length" (cut off at the token limit), "content_filter", ...
    finish_reason: str = "stop"
    # A refusal sent in the message's `refusal` field (structured outputs), its content then null.
    refusal: str | None = None
    # The message's content is null instead of ``text``.
    null_content: bool = False
    # The completion's ``choices`` replaced whole: [] (none), [{"index": 0}] (no message), ...
    choices: list | None = None
    # Answer this body exactly as it is, with ``content_type``, instead of a completion: what a proxy sends
    # with status 200 when it is not the model answering (an HTML page, a JSON body cut short).
    raw: str | None = None
    content_type: str = "application/json"
    # Tool calls the message makes: [{"name": ..., "arguments": {...} or its JSON text, "id": optional}]; the
    # content is then null unless ``text`` is given, and finish_reason "tool_calls" unless another is.
    tool_calls: list[dict] | None = None


@dataclass
class _Rule:
    contains: str
    replies: list[Reply]
    where: str = "last"  # last | system | any
    model: str | None = None
    answered: int = 0

    def matches(self, messages: list[dict], model: str | None) -> bool:
        if self.model is not None and model != self.model:
            return False
        if self.where == "last":
            looked_at = messages[-1:]
        elif self.where == "system":
            looked_at = [m for m in messages if m.get("role") == "system"]
        else:
            looked_at = messages
        return any(self.contains in content_text(m.get("content")) for m in looked_at)

    def take(self) -> Reply:
        """The next reply (called under the server's lock)."""
        reply = self.replies[self.answered % len(self.replies)]
        self.answered += 1
        return reply


@dataclass
class _Fault:
    remaining: int
    status: int
    retry_after: float | None
    hang: float | None
    first_user: str | None
    reply: Reply | None = None  # answered with this instead of an error status


@dataclass
class _Storm:
    rate_429: float
    rate_500: float
    retry_after: float | None
    random: random.Random


class _Response(NamedTuple):
    status: int
    body: dict
    headers: dict[str, str]
    raw: str | None = None  # sent instead of the JSON of `body`, with the headers' Content-Type


# A request the server was stopped in the middle of: the connection is closed with no answer.
_DROPPED = _Response(0, {}, {})


class _Headers(dict):
    """Request headers with lower-cased keys and case-insensitive lookup, so tests need not guess
    how the client capitalised a header."""

    def __init__(self, items=()):
        super().__init__((key.lower(), value) for key, value in items)

    def __getitem__(self, key):
        return super().__getitem__(key.lower())

    def __contains__(self, key):
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key, default=None):
        return super().get(key.lower(), default)


def content_text(content: Any) -> str:
    """Text of a message ``content``: a string, or a list of parts whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return str(content)


def conversation_key(messages: list[dict]) -> str | None:
    """Content of the first user message: how scripts and fault filters recognise a conversation."""
    for message in messages:
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return None


def count_words(text: str) -> int:
    return len(text.split())


_WORD_RE = re.compile(r"[^\W_]+")


def hashed_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """Deterministic, L2-normalised hashed bag of lower-case words.

    crc32 rather than hash() so vectors are stable across processes (PYTHONHASHSEED). Counts are
    kept non-negative so cosines stay in [0, 1] like real embeddings: shared words raise similarity,
    texts with no words in common only overlap through bucket collisions (typically < 0.2).
    """
    vector = [0.0] * dimensions
    for word in _WORD_RE.findall(text.lower()):
        vector[zlib.crc32(word.encode("utf-8")) % dimensions] += 1.0
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        # Word-less input still needs a valid unit vector so cosine stays defined.
        vector[0] = 1.0
        return vector
    return [value / norm for value in vector]


def _error_body(
    status: int, message: str | None = None, code: str | None = None, param: str | None = None
) -> dict:
    if status == 429:
        error_type, default_code = "requests", "rate_limit_exceeded"
    elif status >= 500:
        error_type, default_code = "server_error", None
    else:
        error_type, default_code = "invalid_request_error", None
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return {
        "error": {
            "message": message or f"{phrase} (fakeopenai)",
            "type": error_type,
            "param": param,
            "code": code or default_code,
        }
    }


def _error(
    status: int,
    message: str | None = None,
    retry_after: float | None = None,
    code: str | None = None,
    param: str | None = None,
) -> _Response:
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = f"{retry_after:g}"
    return _Response(status, _error_body(status, message, code, param), headers)


def tool_reply(messages: list[dict], tools: list[dict], rounds: int) -> Reply:
    """What the fake answers when tools are offered and no script or rule chose a reply: after a user message
    it calls the first offered tool, with arguments made from its schema and the user's message; after tool
    results it calls it again until ``rounds`` rounds are done, then answers in text that quotes every result
    of the turn ("Tool results: ...")."""
    since_user = []
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        since_user.append(message)
    done = sum(
        1 for message in since_user if message.get("role") == "assistant" and message.get("tool_calls")
    )
    if done >= rounds or not tools:
        results = [content_text(m.get("content")) for m in reversed(since_user) if m.get("role") == "tool"]
        return Reply(text="Tool results: " + " | ".join(results) if results else "No tool was needed.")
    function = (tools[0] or {}).get("function") or {}
    user = next((content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    return Reply(
        tool_calls=[{"name": function.get("name", "tool"), "arguments": made_arguments(function, user)}]
    )


def made_arguments(function: dict, user: str) -> dict:
    """Arguments for a function's required parameters: a string is the user message's last capitalised word
    after its first (a city, a name), else the message; an integer or number 1; a boolean true."""
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    words = re.findall(r"[A-Za-z][\w'-]*", user)
    named = [word for word in words[1:] if word[0].isupper()]
    out: dict = {}
    for name in parameters.get("required") or []:
        kind = (properties.get(name) or {}).get("type", "string")
        if kind == "integer" or kind == "number":
            out[name] = 1
        elif kind == "boolean":
            out[name] = True
        elif kind == "array":
            out[name] = []
        elif kind == "object":
            out[name] = {}
        else:
            out[name] = named[-1] if named else user
    return out


def _as_reply(reply: str | Reply) -> Reply:
    return reply if isinstance(reply, Reply) else Reply(text=str(reply))


def _safe_key(messages: list) -> str | None:
    return conversation_key([m for m in messages if isinstance(m, dict)])
