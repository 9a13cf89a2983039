"""A scripted judge client and the helpers that grade one reply with one check."""

from __future__ import annotations

import math

from engine.checks import (
    JudgeContext,
    Reply,
    evaluate,
)
from engine.clients import Completion
from engine.results import Usage
from engine.schema import (
    Check,
)

JUDGE_USAGE = Usage(prompt_tokens=120, completion_tokens=30)


EMBED_USAGE = Usage(prompt_tokens=16)


class ScriptedJudge:
    """A ChatClient whose answers and embeddings are given by the test; it records every call."""

    label = "scripted-judge"
    is_mock = False

    def __init__(self, answers=(), vectors=None, *, cost: float = 0.002, embed_cost: float = 0.0001):
        self.answers = list(answers)
        self.vectors = vectors
        self.cost = cost
        self.embed_cost = embed_cost
        self.calls: list[dict] = []
        self.embed_calls: list[dict] = []

    def complete(self, model, messages, *, temperature=None):
        self.calls.append(
            {"model": model, "messages": [dict(m) for m in messages], "temperature": temperature}
        )
        if not self.answers:
            raise AssertionError("judge called more often than scripted")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Completion(text=answer, usage=JUDGE_USAGE, cost=self.cost, latency_ms=5)

    def embed(self, model, texts):
        self.embed_calls.append({"model": model, "texts": list(texts)})
        if self.vectors is None:
            raise AssertionError("embed called but no vectors scripted")
        return self.vectors, EMBED_USAGE, self.embed_cost


SYSTEM = {"role": "system", "content": "You are a careful tutor."}


def reply(text: str, completion_tokens: int | None = 7, conversation: list[dict] | None = None) -> Reply:
    if conversation is None:
        conversation = [
            SYSTEM,
            {"role": "user", "content": "What is 15 * 7?"},
            {"role": "assistant", "content": text},
        ]
    return Reply(text=text, completion_tokens=completion_tokens, conversation=conversation)


def check(data: dict) -> Check:
    return Check.model_validate(data)


def run(data: dict, text: str, *, judge: ScriptedJudge | None = None, completion_tokens: int | None = 7):
    ctx = JudgeContext(judge or ScriptedJudge(), "judge-model")
    return evaluate(check(data), reply(text, completion_tokens), ctx)


def unit(x: float) -> list[float]:
    """A 2-d unit vector whose cosine with [1, 0] is x."""
    return [x, math.sqrt(1 - x * x)]
