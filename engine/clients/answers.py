"""Reading what an endpoint answered: a chat completion, or a failure that retrying may or may not fix."""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass

from ..redact import redact
from .base import EndpointError

# The reason a call waiting out a rate limit (a 429's Retry-After, or another call's pause) reports; the pages
# tell this wait from the others by it: "waiting for rate limit (retry in 8 s)".
RATE_LIMIT_WAIT = "waiting for rate limit"
# The reason a call reports while it waits to ask again after a 200 that was no chat completion; after the
# first, it says how many: "endpoint sent an unreadable reply (3 times)".
UNREADABLE_REPLY = "endpoint sent an unreadable reply"
RETRIED_STATUSES = (408, 409, 429)  # and every 5xx: what the openai client itself would retry


class Transient(Exception):
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


def retry_after(headers, now: float | None = None) -> float | None:
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


def error_text(exc) -> str:
    """An openai client error's message: the JSON error's message when the body has one."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return str(getattr(exc, "message", "") or exc)


def error_param(body: object) -> str | None:
    """The request field an OpenAI-style error body names (`error.param`), when it names one."""
    error = body.get("error") if isinstance(body, dict) else None
    param = error.get("param") if isinstance(error, dict) else None
    return param if isinstance(param, str) and param else None


def error_param_of(exc) -> str | None:
    """error_param of an openai client error, whose `body` is the error object itself."""
    body = getattr(exc, "body", None)
    return error_param({"error": body} if isinstance(body, dict) and "error" not in body else body)


def error_body(raw: str) -> tuple[str, str | None]:
    """An error answer's message, as the openai client would give it (the JSON error's message, or the text),
    and the request field it names (error_param)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:500] or "no body", None
    if isinstance(body, dict):
        error = body.get("error")
        message = (error.get("message") if isinstance(error, dict) else None) or body.get("message")
        if message:
            return str(message), error_param(body)
    return raw[:500], error_param(body)


@dataclass(frozen=True)
class Reply:
    """What a chat completion says: its first choice's content and how it ended, and the reported usage."""

    text: str
    usage: dict | None
    finish_reason: str | None
    refusal: str | None
    tool_calls: bool
    calls: tuple[dict, ...] = ()  # the tool calls, as the endpoint sent them


def read_reply(response, label: str) -> Reply:
    """A chat completion's reply; a 200 that is not one (no JSON object, no `choices`, a choice without a
    message object) is a transient failure: gateways send such answers for moments, as they send 502s."""
    if isinstance(response, str):  # the openai client's answer for a body that is not declared JSON
        raise unreadable(label, f"not JSON: {response[:200]}")
    if not isinstance(response, dict):
        raise unreadable(label, f"not a JSON object: {json.dumps(response)[:200]}")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise unreadable(label, f"no choices: {json.dumps(response)[:200]}")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise unreadable(label, f"a choice without a message: {json.dumps(first)[:200]}")
    text, refusal = _content(message.get("content"))
    if isinstance(message.get("refusal"), str) and message["refusal"]:
        refusal = message["refusal"]
    finish, usage = first.get("finish_reason"), response.get("usage")
    calls = _calls(message.get("tool_calls"))
    return Reply(
        text=text,
        usage=usage if isinstance(usage, dict) else None,
        finish_reason=finish if isinstance(finish, str) else None,
        refusal=refusal,
        tool_calls=bool(calls),
        calls=calls,
    )


def _content(value) -> tuple[str, str | None]:
    """A message's content as (text, refusal): a string as it is; a list of parts (as OpenAI-compatible
    servers may send it) as its text parts joined, and its refusal parts as the refusal."""
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list):
        return "", None
    texts, refusals = [], []
    for part in value:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str) and part["refusal"]:
            refusals.append(part["refusal"])
    return "\n".join(texts), "\n".join(refusals) or None


def _calls(value) -> tuple[dict, ...]:
    """The tool calls of a reply as {id, name, arguments} (arguments as the text the model sent). An item
    that cannot be carried out (no function name, no function call at all) is kept with a `problem` in
    words: it is the model's mistake, never a reply without calls."""
    if not value:
        return ()
    out = []
    for position, item in enumerate(value if isinstance(value, list) else [value]):
        function = item.get("function") if isinstance(item, dict) else None
        call = {"id": str((item.get("id") if isinstance(item, dict) else None) or f"call_{position}")}
        if not isinstance(function, dict):
            shown = json.dumps(item, ensure_ascii=False)[:80]
            out.append(
                {**call, "name": "", "arguments": "", "problem": f"the call is no function call: {shown}"}
            )
            continue
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(arguments, str):  # some servers send an object where the API has its JSON text
            arguments = "" if arguments is None else json.dumps(arguments)
        call.update(name=name if isinstance(name, str) else "", arguments=arguments)
        if not call["name"].strip():
            call["problem"] = "the call names no function"
        out.append(call)
    return tuple(out)


def unreadable(label: str, detail: str) -> Transient:
    return Transient(f"{label} sent an unreadable reply: {detail}", UNREADABLE_REPLY, unreadable=True)


def status_failure(label: str, status: int, text: str, headers, param: str | None = None) -> Exception:
    """What an HTTP error answer is: an EndpointError (a 4xx that retrying cannot fix) or a Transient."""
    message = redact(f"HTTP {status} from {label}: {text}")
    if status not in RETRIED_STATUSES and status < 500:
        return EndpointError(message, param)
    wait = retry_after(headers)
    if status == 429:
        return Transient(message, RATE_LIMIT_WAIT, wait, rate_limited=True)
    return Transient(message, f"endpoint unavailable (HTTP {status})", wait)


def timed_out(what: str, label: str, timeout: float) -> Transient:
    return Transient(f"{what} to {label} timed out after {timeout:g}s", "endpoint timed out")


def unreachable(label: str, base_url: str, cause) -> Transient:
    return Transient(f"cannot reach {label} at {base_url}: {cause}", "cannot reach endpoint")
