"""In-test agent and judge clients for simulated users, and the helpers that play and read a simulated eval."""

from __future__ import annotations

import copy

from engine.checks import Reply
from engine.clients import Completion
from engine.conditions import NATURAL_LANGUAGE_SYSTEM
from engine.conversation import EngineContext, run_eval
from engine.results import Usage
from engine.schema import Eval
from engine.simulate import SIMULATOR_INSTRUCTIONS
from tests.engine.doubles import make_eval

SYSTEM = "You are a restaurant booking agent."


PERSONA = "You are a friendly customer. Answer what the agent asks."


CONFIRMED = '{"status": "confirmed", "booking": {"party": 2, "time": "19:00"}}'


AGENT_USAGE = Usage(prompt_tokens=10, completion_tokens=3)


USER_USAGE = Usage(prompt_tokens=7, completion_tokens=2)


JUDGE_USAGE = Usage(prompt_tokens=20, completion_tokens=5)


class Agent:
    """The model under test: replies in order; an unexpected call fails the test."""

    label = "agent"
    is_mock = False

    def __init__(self, replies):
        self.replies = list(replies)
        self.calls: list[list[dict]] = []
        self.models: list[str] = []

    def complete(self, model, messages, *, temperature=None):
        self.calls.append(copy.deepcopy(messages))
        self.models.append(model)
        if not self.replies:
            raise AssertionError(f"unexpected agent call #{len(self.calls)}: {messages[-1]}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=reply, usage=AGENT_USAGE, cost=0.001, latency_ms=1)

    def embed(self, model, texts):
        raise AssertionError("no embeddings expected")


class Judge:
    """Plays the simulated user (system prompt carries the simulator instructions), the natural_language
    judge (its own system prompt) and the llm_judge (anything else), each from its own list."""

    label = "judge"
    is_mock = False

    def __init__(self, user_lines=(), confidences=(), verdicts=()):
        self.user_lines = list(user_lines)
        self.confidences = list(confidences)
        self.verdicts = list(verdicts)
        self.user_calls: list[list[dict]] = []
        self.nl_calls: list[list[dict]] = []
        self.judge_calls: list[list[dict]] = []
        self.models: list[tuple[str, str]] = []
        self.temperatures: list[tuple[str, float | None]] = []

    def complete(self, model, messages, *, temperature=None):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if SIMULATOR_INSTRUCTIONS in system:
            role, calls, answers, usage = "user", self.user_calls, self.user_lines, USER_USAGE
        elif system == NATURAL_LANGUAGE_SYSTEM:
            role, calls, answers, usage = "nl", self.nl_calls, self.confidences, JUDGE_USAGE
        else:
            role, calls, answers, usage = "judge", self.judge_calls, self.verdicts, JUDGE_USAGE
        calls.append(copy.deepcopy(messages))
        self.models.append((role, model))
        self.temperatures.append((role, temperature))
        if not answers:
            raise AssertionError(f"unexpected {role} call: {messages[-1]['content'][:200]}")
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Completion(text=answer, usage=usage, cost=0.01, latency_ms=1)

    def embed(self, model, texts):
        raise AssertionError("no embeddings expected")

    @property
    def calls(self) -> int:
        return len(self.user_calls) + len(self.nl_calls) + len(self.judge_calls)


def play(ev: Eval, agent_replies, judge: Judge | None = None, *, system=SYSTEM, resolve=None, **kwargs):
    agent = Agent(agent_replies)
    judge = judge or Judge()
    ctx = EngineContext(
        agent=agent, model="agent-m", judge=judge, judge_model="judge-m", system=system, resolve=resolve
    )
    return run_eval(ev, 0, "booking", ctx, **kwargs), agent, judge


def sim(extra: str, checks: str = "") -> Eval:
    """A simulated eval starting from the booking prompt; `extra` is the simulate block's body."""
    body = "\n".join("  " + line for line in extra.strip().splitlines())
    return make_eval(f"prompt: I want to book a table for two.\nsimulate:\n{body}\n{checks}")


def system_of_user_call(call: list[dict]) -> str:
    assert [m["role"] for m in call] == ["system", "user"]
    assert call[1]["content"] == "Write your next message to the agent."
    return call[0]["content"]


def expected_user_system(persona: str, transcript: str) -> str:
    """The documented format (engine/simulate.py), written out here so a change to it shows."""
    return (
        f"{persona}\n\n"
        "You are the user in a conversation with an AI agent. Write only your next message to the agent: "
        "no role label, no quotation marks, no commentary.\n\n"
        "The conversation so far (You = you, Agent = the agent you are talking to):\n"
        f"{transcript}"
    )


def reply(text: str, tokens: int | None = 5) -> Reply:
    return Reply(
        text=text,
        completion_tokens=tokens,
        conversation=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Book a table."},
            {"role": "assistant", "content": text},
        ],
    )
