"""Playing a conversation tree against in-test clients, and the prompts it sends."""

from __future__ import annotations

from engine.conversation import EngineContext, run_eval
from engine.schema import Eval
from tests.engine.doubles import ScriptedClient, make_eval

SYSTEM = "You are a careful math tutor."


def context(agent, judge=None, system: str | None = SYSTEM) -> EngineContext:
    return EngineContext(
        agent=agent,
        model="model-under-test",
        judge=judge or ScriptedClient([]),
        judge_model="judge-m",
        system=system,
    )


def play(ev: Eval, replies, **kwargs):
    agent = ScriptedClient(replies)
    judge = kwargs.pop("judge", None)
    result = run_eval(ev, 0, "eval-1", context(agent, judge), **kwargs)
    return result, agent


THREE_LEVELS = make_eval(
    """
prompt: What is 15 * 7?
checks:
  - match: "*105*"
  - prompt: That answer is incorrect. Please recalculate 15 multiplied by 7.
    checks:
      - match: "*105*"
      - prompt: "Hint: 15 * 7 = 10*7 + 5*7. What is the answer?"
        checks:
          - match: "*105*"
"""
)


PROMPTS = [
    "What is 15 * 7?",
    "That answer is incorrect. Please recalculate 15 multiplied by 7.",
    "Hint: 15 * 7 = 10*7 + 5*7. What is the answer?",
]


def sent_prompts(agent: ScriptedClient) -> list[str]:
    return [call["messages"][-1]["content"] for call in agent.calls]


def full_run():
    return play(THREE_LEVELS, ["100", "101", "105"])
