"""The built-in `mock` endpoint: replies from the suite's `mock.rules`, offline and free."""

from __future__ import annotations

import math
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ..matching import glob_match
from ..patterns import RegexFailure
from ..results import Usage
from ..schema import MockSpec
from ..transcript import message_text
from .base import MOCK, Completion, EndpointError, estimate_tokens


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
    ) -> Completion:
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


def bag_of_words_vector(text: str, dims: int = 64) -> list[float]:
    """A stable, meaning-blind embedding for the mock: same words, same vector."""
    vector = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[zlib.crc32(word.encode()) % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]
