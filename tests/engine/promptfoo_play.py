"""Reading a promptfoo or today's AgentV project, playing it on the fake endpoint, and reading what was sent."""

from __future__ import annotations

import json
import os

from engine import suitevars
from engine.clients import EndpointConfig, EndpointRegistry
from engine.codegrade.run import CodeRunner
from engine.loader import load_suite
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.engine.import_fixtures import FIXTURES


def project(name: str) -> dict[str, str]:
    """A fixture folder as the tool lays it out, every file by its path inside the folder."""
    root = FIXTURES / name
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def play(fake, result, tmp_path=None):
    suite = load_suite(result.source, files=result.files)
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    runner = None
    if tmp_path is not None:
        for name, text in result.files.items():
            (tmp_path / name).write_text(text)
        runner = CodeRunner(folder=tmp_path, inherit_env=True)
    return run_suite(
        suite, EndpointRegistry(config), model="agent", files=result.files, concurrency=1, code=runner
    )


def verdict(score: float, reason: str = "graded") -> str:
    return json.dumps({"score": score, "reason": reason})


def judged(fake, needle: str) -> list[str]:
    """The judge prompts (last message) that contain `needle`."""
    return [
        r["messages"][-1]["content"]
        for r in fake.chat_requests()
        if r["messages"][0]["role"] == "system" and "judge" in r["messages"][0]["content"]
        and needle in r["messages"][-1]["content"]
    ]  # fmt: skip


def sent_user_turns(fake, first: str) -> list[list[str]]:
    """The user messages of each model request of the conversation that starts with `first`."""
    out = []
    for request in fake.chat_requests():
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        if users and users[0] == first:
            out.append(users)
    return out


def play_with_vars(fake, result, values: dict[str, str]):
    """Play an imported suite with its variables given at launch, as `evalsite run --var` does."""
    suite = suitevars.bind(load_suite(result.source, files=result.files), values)
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    return run_suite(suite, EndpointRegistry(config), model="agent", files=result.files, concurrency=1)
