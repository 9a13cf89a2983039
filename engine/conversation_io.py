"""How the conversation loop makes the calls that may wait on a model: at once in the caller's thread
(engine.conversation.run_eval), or awaited on an event loop shared with other conversations (run_eval_async).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable

from .clients import ChatClient, Completion
from .clients.aio import calls_loop


class Stopping:
    """An asynchronous should_stop, awaited between turns and read without waiting during a retry's wait."""

    def __init__(self, ask: Callable[[], Awaitable[bool | str]]) -> None:
        self.ask = ask
        self.known: bool | str = False  # once true (or a reason), kept: a conversation told to stop stops
        self.asking: asyncio.Task | None = None

    async def __call__(self) -> bool | str:
        self.known = self.known or await self.ask()
        return self.known

    def now(self) -> bool | str:
        if not self.known and (self.asking is None or self.asking.done()):
            self.asking = asyncio.get_running_loop().create_task(self._in_background())
        return self.known

    async def _in_background(self) -> None:
        with contextlib.suppress(Exception):  # the next check asks again; the turn's own check raises
            await self()


class IO:
    """How the loop makes the calls that may wait on a model: at once, in the caller's thread (run_eval),
    or awaited on an event loop shared with other conversations (run_eval_async)."""

    async def agent(
        self, client: ChatClient, model: str, messages: list[dict], tools=None, settings=None
    ) -> Completion:
        offered = _offered(tools, settings)
        return client.complete(model, messages, **offered)

    async def blocking(self, fn: Callable, *args, may_call_model: bool = True):
        return fn(*args)

    async def awaited(self, fn: Callable[..., Awaitable], *args):
        """A coroutine function's answer (an MCP server's, engine.tools): run to its end on a loop of its own,
        as nothing here runs on one."""
        return asyncio.run(fn(*args))


class Threaded(IO):
    async def agent(
        self, client: ChatClient, model: str, messages: list[dict], tools=None, settings=None
    ) -> Completion:
        offered = _offered(tools, settings)
        acomplete = getattr(client, "acomplete", None)
        if acomplete is not None:
            return await acomplete(model, messages, **offered)
        if client.is_mock and not getattr(getattr(client, "spec", None), "latency_ms", 0):
            return client.complete(model, messages, **offered)  # no I/O and no wait: nothing to give back
        return await asyncio.to_thread(functools.partial(client.complete, model, messages, **offered))

    async def blocking(self, fn: Callable, *args, may_call_model: bool = True):
        if not may_call_model:
            return fn(*args)
        return await asyncio.to_thread(_calling_on, asyncio.get_running_loop(), fn, *args)

    async def awaited(self, fn: Callable[..., Awaitable], *args):
        return await fn(*args)


INLINE, THREADED = IO(), Threaded()


def _calling_on(loop: asyncio.AbstractEventLoop, fn: Callable, *args):
    """fn(*args) in a grading thread, whose chat calls are made on `loop` (engine.clients.aio)."""
    calls_loop.set(loop)  # in this thread's copy of the conversation's context only
    return fn(*args)


def _offered(tools, settings) -> dict:
    """The keywords a call is given: only those set, so a ChatClient without them keeps working."""
    offered = {"tools": tools} if tools else {}
    if settings is not None:
        offered["settings"] = settings
    return offered


async def answer(value):
    """A callback's value, awaited when it is awaitable (the asyncio path's callbacks may be coroutines)."""
    return await value if inspect.isawaitable(value) else value


def run_inline(coroutine):
    """Run a coroutine that never suspends (the loop with INLINE calls) to its end, without an event loop:
    run_eval plays one conversation in its caller's thread (the benchmarks' engine floor, tests) at no cost
    of a loop per call. The workers and the CLI play on an event loop (run_eval_async)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the conversation loop awaited something while run inline")
