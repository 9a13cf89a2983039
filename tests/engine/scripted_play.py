"""Playing one scripted eval against in-test clients, and the suite problems it reports."""

from __future__ import annotations

import pytest

from engine.conversation import Defaults, EngineContext, run_eval
from engine.loader import load_suite
from engine.schema import Eval
from engine.source import SuiteError
from tests.engine.doubles import ScriptedClient, make_eval

SYSTEM = "You are a geography tutor."


CAPITALS = [
    "What is the capital of France?",
    "What is the capital of Germany?",
    "What is the capital of Italy?",
]


def play(ev: Eval, replies, *, judge=None, defaults=None, system=SYSTEM, **kwargs):
    agent = ScriptedClient(replies)
    ctx = EngineContext(
        agent=agent,
        model="model-under-test",
        judge=judge or ScriptedClient([]),
        judge_model="judge-m",
        system=system,
        defaults=defaults or Defaults(),
    )
    return run_eval(ev, 0, "eval-1", ctx, **kwargs), agent


def problems_of(source: str, files=None) -> list:
    with pytest.raises(SuiteError) as info:
        load_suite(source, files=files)
    return info.value.problems


PER_TURN = make_eval(
    """
input:
  - What is the capital of France?
  - What is the capital of Germany?
  - What is the capital of Italy?
ground_truth: [Paris, Berlin, Rome]
grader: contains
"""
)


def _judge_eval(rubric: str = "Q: {input}\nExpected: {ground_truth}\nGot: {submission}\nScore 0-1."):
    return Eval(input="Capital of France?", ground_truth="Paris", grader="llm_judge", rubric=rubric)


THREE_CHECKED = """
turns:
  - input: one
    checks: [{contains: A}]
  - input: two
    checks: [{contains: B}]
  - input: three
    checks: [{contains: C}]
"""
