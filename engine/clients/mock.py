"""The built-in `mock` endpoint: replies from the suite's `mock.rules`, offline and free.

A rule with `calls` plays an agent when tools are offered: after the user's message it answers with those
tool calls, and once their results are back it answers the rule's `reply`, where `{{tool_results}}` stands
for the results.
"""

from __future__ import annotations

import json
import math
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ..matching import glob_match
from ..patterns import RegexFailure
from ..results import Usage
from ..schema import MockRule, MockSpec
from ..schema.settings import ModelSettings
from ..transcript import message_text
from .base import MOCK, Completion, EndpointError, estimate_tokens

TOOL_RESULTS = "{{tool_results}}"


@dataclass
class MockClient:
    """The first rule whose glob matches the latest user message wins. Token counts are estimates."""

    spec: MockSpec = field(default_factory=MockSpec)
    label: str = MOCK
    is_mock: bool = True
    sleep: Callable[[float], None] = time.sleep

    def complete(
        self,
        model: str,
        messages: list[dict],
        *,
        temperature: float | None = None,
        tools: list[dict] | None = None,
        settings: ModelSettings | None = None,
    ) -> Completion:
        started = time.monotonic()
        last_user = next((message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
        try:
            rule = next((rule for rule in self.spec.rules if glob_match(rule.when, last_user)), None)
        except RegexFailure as exc:  # a rule's glob ran out of time: this conversation errors, not the run
            raise EndpointError(f"mock endpoint: {exc}") from None
        calls = ()
        if rule is not None and rule.calls and tools and messages and messages[-1].get("role") == "user":
            calls = _calls(rule, messages)
            text = ""
        else:
            text = rule.reply if rule is not None else self.spec.default
            if TOOL_RESULTS in text:
                text = text.replace(TOOL_RESULTS, "; ".join(_results_since_user(messages)))
        text, finish = _as_set(text, settings)
        if self.spec.latency_ms:
            self.sleep(self.spec.latency_ms / 1000)
        prompt_text = " ".join(message_text(m) for m in messages)
        answer = text or " ".join(call["name"] + call["arguments"] for call in calls)
        usage = Usage(
            prompt_tokens=estimate_tokens(prompt_text),
            completion_tokens=estimate_tokens(answer),
            estimated=True,
        )
        return Completion(
            text=text,
            usage=usage,
            cost=0.0,
            latency_ms=int((time.monotonic() - started) * 1000),
            finish_reason="tool_calls" if calls else finish,
            tool_calls=bool(calls),
            calls=calls,
        )

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]:
        vectors = [bag_of_words_vector(text) for text in texts]
        return vectors, Usage(prompt_tokens=sum(map(estimate_tokens, texts)), estimated=True), 0.0


def _as_set(text: str, settings: ModelSettings | None) -> tuple[str, str | None]:
    """The reply as the settings that shape a reply would leave it: cut at the first `stop` sequence, then
    to `max_tokens` (or `max_completion_tokens`) estimated tokens, with the finish reason an endpoint gives.
    The mock has no sampling to set; the other settings change nothing."""
    if settings is None or not text:
        return text, None
    finish = None
    stops = [settings.stop] if isinstance(settings.stop, str) else settings.stop or []
    cuts = [text.find(stop) for stop in stops if stop and stop in text]
    if cuts:
        text, finish = text[: min(cuts)], "stop"
    limit = settings.max_completion_tokens or settings.max_tokens
    if limit is not None and estimate_tokens(text) > limit:
        text, finish = text[: limit * 4], "length"
    return text, finish


def bag_of_words_vector(text: str, dims: int = 64) -> list[float]:
    """A stable, meaning-blind embedding for the mock: same words, same vector."""
    vector = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[zlib.crc32(word.encode()) % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _calls(rule: MockRule, messages: list[dict]) -> tuple[dict, ...]:
    """The rule's calls as a model sends them; ids go on from the conversation's earlier calls, so each is
    unique in it."""
    before = sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")
    return tuple(
        {
            "id": f"call_{before + number}",
            "name": call.name,
            "arguments": json.dumps(call.arguments, ensure_ascii=False),
        }
        for number, call in enumerate(rule.calls or (), start=1)
    )


def _results_since_user(messages: list[dict]) -> list[str]:
    """The texts of the `tool` messages after the latest user message, in order."""
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "tool":
            results.append(message_text(message))
    return results[::-1]
