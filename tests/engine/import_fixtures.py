"""Reading the import fixture folders, and playing a converted suite on the fake endpoint."""

from __future__ import annotations

import os
from pathlib import Path

from engine.clients import EndpointConfig, EndpointRegistry
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"


def folder(name: str, *, without: tuple[str, ...] = ()) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((FIXTURES / name).iterdir()) if p.name not in without}


def one(name: str) -> dict[str, str]:
    path = FIXTURES / name
    return {path.name: path.read_text()}


def has(lines: list[str], *needles: str) -> bool:
    """Some line contains every needle."""
    return any(all(needle in line for needle in needles) for line in lines)


def _run_on_fake(fake_openai, suite, model: str = "agent"):
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(
        name="default", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0
    )
    return run_suite(suite, EndpointRegistry(config), model=model, concurrency=2)


def evaluator_checks(ev) -> list:
    """An eval's checks, and its check graders' (AgentV v2 evaluators of a case become either)."""
    return [*(ev.checks or []), *(grader.check for grader in (ev.graders or {}).values() if grader.check)]


CALIBRATE_TOML = """\
[[samples]]
messages = [
  { role = "user", content = "What is 2+2?" },
  { role = "assistant", content = "The answer is 4" }
]
expected = { score = 3, reason = "Correct answer" }
tags = ["math"]

[[samples]]
userMessage = "Hi"
assistantResponse = "Go away"
expected = { score = -3, reason = "Rude" }
"""
