"""Playing a suite's eval against the fake endpoint with a real client, as the tool tests do."""

from __future__ import annotations

import asyncio
import os

from engine.clients import AsyncOpenAIClient, EndpointConfig, OpenAIClient
from engine.conversation import Defaults, EngineContext, run_eval, run_eval_async
from engine.loader import load_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV


def fake_context(fake, suite, client=OpenAIClient) -> EngineContext:
    """The suite's context with `client` on the fake endpoint as the model under test and the judge."""
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    agent = client(config)
    return EngineContext(agent=agent, model="m", judge=agent, judge_model="m", defaults=Defaults.of(suite))


def play(fake, source: str, index: int = 0, **kwargs):
    """The suite's eval at `index`, played on the fake endpoint (`kwargs`: run_eval's, e.g. prior, replay)."""
    suite = load_suite(source)
    return run_eval(suite.evals[index], index, f"e{index}", fake_context(fake, suite), **kwargs)


def play_async(fake, suite, index: int = 0):
    """The loaded suite's eval at `index`, played on an event loop through the asyncio client, as the workers
    and the CLI play it."""

    async def played():
        ctx = fake_context(fake, suite, AsyncOpenAIClient)
        try:
            return await run_eval_async(suite.evals[index], index, f"e{index}", ctx)
        finally:
            await ctx.agent.aclose()

    return asyncio.run(played())
