"""Stand-ins the engine tests play conversations against, and the eval parser they share."""

from __future__ import annotations

import copy

import yaml

from engine.clients import Completion
from engine.results import Usage
from engine.schema import Eval

TURN_USAGE = Usage(prompt_tokens=10, completion_tokens=5)
TURN_COST = 0.001


class ScriptedClient:
    """Replies in the scripted order; records (model, messages, temperature) of every call.

    A scripted item that is an Exception is raised instead of answered. Calling it more often than
    scripted fails the test, so a test notices any unexpected model call.
    """

    label = "scripted"
    is_mock = False

    def __init__(self, replies, *, usage: Usage = TURN_USAGE, cost: float = TURN_COST):
        self.replies = list(replies)
        self.usage = usage
        self.cost = cost
        self.calls: list[dict] = []

    @property
    def messages(self) -> list[list[dict]]:
        return [call["messages"] for call in self.calls]

    def complete(self, model, messages, *, temperature=None):
        self.calls.append({"model": model, "messages": copy.deepcopy(messages), "temperature": temperature})
        if not self.replies:
            raise AssertionError(f"unexpected model call #{len(self.calls)}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=reply, usage=self.usage, cost=self.cost, latency_ms=3)

    def embed(self, model, texts):
        raise AssertionError("no embeddings expected")


def make_eval(text: str) -> Eval:
    return Eval.model_validate(yaml.safe_load(text))


def sys_(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


# A conversation tree with two follow-ups, each chosen by its own failed check: re-grade tests (engine and web)
# edit its checks so that it passes earlier or parts from the stored conversation.
MULTIPLY_TREE = """\
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - contains: "105"
        prompt: Please recalculate.
        checks: [{contains: "105"}]
      - contains: "7"
        prompt: Show your work.
        checks: [{contains: "7"}]
"""
