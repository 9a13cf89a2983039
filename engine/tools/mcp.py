"""Real MCP servers as tool sources, through the official `mcp` SDK: a `tools` item `{mcp: {command: [...]}}`
starts the program and talks to it over stdio, `{mcp: {url: ...}}` reaches a server over streamable HTTP.
Its tools are listed for real (`server_tools`) and each call goes to it (`call`).

One session per server (its configuration) per event loop: the workers and the CLI play many conversations
on one loop, which share the session (MCP multiplexes requests on it), so a program is started once, not per
call or per conversation. Each session lives in a task of its own, as the SDK's transports must be entered
and left in one task; `aclose` ends the loop's sessions (the CLI's runner calls it before its loop ends; a
worker's loop lasts as long as its process, and a stdio server ends when its stdin closes with it). The
inline path (engine.conversation.run_eval) runs each coroutine on a loop of its own (asyncio.run), so there
a session lasts one call: asyncio.run cancels the session's task as it ends, which stops the program.

A tool's failure (an `isError` result, a protocol error, no answer within the server's `timeout`) is the
tool's error result, which the model is told. A server that cannot start or stops is McpServerError, an
EndpointError: the conversation ends in error with the reason, never as a FAIL.

The SDK is imported only when a session starts, so importing this module (the runner's close hook) costs
nothing to suites without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import sys
import tempfile
import weakref
from typing import Any

from ..clients import EndpointError
from ..codegrade.run import SETTING
from ..redact import register_key_env
from ..schema import McpServer, Tool
from ..schema.tools import TOOL_NAME
from .base import Outcome

ENV_REF = re.compile(r"\{\{\s*env:\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# `python` in a command is the interpreter evalsite runs on, so a server written with the SDK finds it.
PYTHONS = frozenset({"python", "python3"})
# How long a server may take to start and answer the handshake, at least: a program's start (an interpreter
# importing the SDK, `npx` fetching a package) takes longer than the calls its `timeout` bounds.
START_SECONDS = 60.0
CLOSE_SECONDS = 10.0  # how long aclose waits for a server to stop (the SDK's own waits are bounded too)
STDERR_TAIL = 300
# A started server's stderr serves no reason any more; past this size it is emptied, so a long-lived
# session (a worker's) does not fill the disk with its logs.
STDERR_KEPT_BYTES = 1_000_000

COMMANDS_OFF = (
    f"a server started by `command` runs a program, as code graders do, and they are not enabled here "
    f"(set {SETTING}=1 to allow them)"
)
# Why this process starts no server by `command`; None starts them (the CLI). A worker whose deployer has not
# allowed code graders sets it (runs.worker.tasks), for a run launched where they were allowed.
commands_refused: str | None = None

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Session]] = (
    weakref.WeakKeyDictionary()
)


class McpServerError(EndpointError):
    """An MCP server could not start, or stopped: the conversation cannot go on."""


def label(server: McpServer) -> str:
    """The server as a reader recognises it: its command line, or its URL without credentials or query."""
    if server.command:
        return f"`{shlex.join(server.command)}`"
    url = re.sub(r"//[^/@]*@", "//", server.url or "")
    return f"`{url.split('?', 1)[0]}`"


async def server_tools(server: McpServer) -> list[Tool]:
    """The server's tools (those `server.tools` names, when it names some), listed from it, as Tools."""
    session = await _session(server)
    listed = await session.listed()
    if server.tools is not None:
        missing = [name for name in server.tools if name not in listed]
        if missing:
            raise McpServerError(
                f"MCP server {label(server)} has no tool {', '.join(f'`{name}`' for name in missing)} "
                f"(it lists: {', '.join(listed) or 'none'})"
            )
        return [listed[name] for name in server.tools]
    return list(listed.values())


async def call(server: McpServer, name: str, arguments: dict) -> Outcome:
    """Call one of the server's tools: its result, or the tool's error."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    session = await _session(server)
    session.trim_stderr()
    try:
        result = await session.client.call_tool(name, arguments, read_timeout_seconds=server.timeout)
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            return Outcome(
                error=f"no answer within {server.timeout:g} s (the MCP server's `timeout`)", source="mcp"
            )
        if exc.code == CONNECTION_CLOSED:
            raise session.stopped("its connection closed") from None
        return Outcome(error=exc.message or f"MCP error {exc.code}", source="mcp")  # e.g. invalid arguments
    except (OSError, EOFError) as exc:
        raise session.stopped(_reason(exc)) from None
    except Exception as exc:  # anyio's closed or broken streams: the connection is gone
        if type(exc).__module__.startswith("anyio"):
            raise session.stopped(_reason(exc)) from None
        raise
    if result.is_error:
        return Outcome(error=_text(result.content) or "the tool failed and said nothing", source="mcp")
    return Outcome(result=_result(result), source="mcp")


async def aclose() -> None:
    """Stop the running loop's MCP sessions (their programs end; a URL session is closed)."""
    sessions = _sessions.pop(asyncio.get_running_loop(), {})
    for session in list(sessions.values()):
        await session.close()


def _result(result) -> Any:
    """What the model is sent: the text blocks joined; with none, the structured content (sent as JSON)."""
    text = _text(result.content)
    if text or result.structured_content is None:
        return text
    return result.structured_content


def _text(content: list) -> str:
    parts = []
    for block in content or ():
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        elif getattr(block, "type", None) in ("image", "audio"):
            parts.append(f"[{block.type} {block.mime_type}]")
        elif getattr(block, "type", None) == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif getattr(block, "type", None) == "resource":
            parts.append(getattr(block.resource, "text", None) or f"[resource {block.resource.uri}]")
    return "\n".join(parts)


async def _session(server: McpServer) -> _Session:
    """The running loop's session with this server, started by the first conversation that needs it; the
    others wait for that start. One that failed to start or stopped is started again by the next caller."""
    if server.command is not None and commands_refused:
        raise McpServerError(f"MCP server {label(server)} was not started: {commands_refused}")
    sessions = _sessions.setdefault(asyncio.get_running_loop(), {})
    key = server.model_dump_json()
    session = sessions.get(key)
    if session is not None and session.closed_under_us():
        session.stopped("its connection closed")  # while idle: nothing was sent, so a new one is safe
        session = None
    if session is None or session.gone:
        session = sessions[key] = _Session(server, sessions, key)
    await session.started()
    return session


class _Session:
    """One connection to one server, held open by a task of its own until `close`."""

    def __init__(self, server: McpServer, registry: dict, key: str):
        self.server = server
        self.client = None
        self.gone = False  # could not start, stopped or closed: the next caller starts another
        self._registry, self._key = registry, key
        self._ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._listed: asyncio.Future | None = None
        # The program's stderr, kept for the reason a failed start gives; closed with the session.
        self._errlog = (
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            if server.command
            else None
        )
        self._task = asyncio.create_task(self._hold(), name=f"mcp {label(server)}")

    async def started(self) -> None:
        limit = max(self.server.timeout, START_SECONDS)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), limit)
        except TimeoutError:
            await self.close()
            raise McpServerError(
                f"MCP server {label(self.server)} could not start: no answer within {limit:g} s"
                f"{self._stderr()}"
            ) from None

    async def listed(self) -> dict[str, Tool]:
        """Its tools by name, listed once per session (a conversation's toolbox asks as it opens)."""
        if self._listed is None:
            self._listed = asyncio.ensure_future(self._list())
        return await asyncio.shield(self._listed)

    async def _list(self) -> dict[str, Tool]:
        from mcp import MCPError

        tools: dict[str, Tool] = {}
        cursor = None
        try:
            while True:
                page = await asyncio.wait_for(self.client.list_tools(cursor=cursor), self.server.timeout)
                for tool in page.tools:
                    if TOOL_NAME.fullmatch(tool.name):  # others cannot be offered in OpenAI's format
                        tools[tool.name] = Tool(
                            name=tool.name, description=tool.description or "",
                            parameters=tool.input_schema or {"type": "object", "properties": {}},
                        )  # fmt: skip
                cursor = page.next_cursor
                if not cursor:
                    return tools
        except (MCPError, TimeoutError, OSError) as exc:
            self.stopped("")  # the next conversation starts it and asks again
            raise McpServerError(
                f"MCP server {label(self.server)} could not list its tools: {_reason(exc) or 'no answer'}"
            ) from None

    def closed_under_us(self) -> bool:
        """Whether the connection has ended (the program exited, the server hung up) since it was last used.
        Read from the SDK's dispatcher, which refuses to send once closed; a later SDK without that flag
        reads as open, and the next call says the server stopped."""
        if self.client is None or self.gone:
            return False
        try:
            dispatcher = self.client.session._dispatcher
        except (AttributeError, RuntimeError):
            return False
        return getattr(dispatcher, "_closed", False) is True

    def stopped(self, why: str) -> McpServerError:
        """The error that ends a conversation whose server went away; the next caller starts it again."""
        self._forget()
        self._closing.set()
        return McpServerError(f"MCP server {label(self.server)} stopped: {why}")

    async def close(self) -> None:
        self._forget()
        self._closing.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self._task), CLOSE_SECONDS)

    def _forget(self) -> None:
        self.gone = True
        if self._registry.get(self._key) is self:
            del self._registry[self._key]

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = await self._transport(stack)
                # No response cache: a conversation's calls must reach the server every time.
                client = await stack.enter_async_context(Client(transport, cache=None))
                self.client = client
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(
                    McpServerError(
                        f"MCP server {label(self.server)} could not start: {_reason(exc)}{self._stderr()}"
                    )
                )
                self._ready.exception()  # retrieved here: a start nobody awaited any more is not logged
            if not isinstance(exc, Exception):
                raise
        finally:
            self._forget()
            if self._errlog is not None:
                self._errlog.close()

    async def _transport(self, stack: contextlib.AsyncExitStack):
        server = self.server
        if server.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = {name: _filled(value) for name, value in (server.headers or {}).items()}
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            )
            return streamable_http_client(_filled(server.url), http_client=http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        program, *args = server.command
        if program in PYTHONS:
            program = sys.executable
        params = StdioServerParameters(
            command=program, args=args, cwd=server.cwd,
            env={name: _filled(value) for name, value in (server.env or {}).items()},
        )  # fmt: skip
        return stdio_client(params, errlog=self._errlog)

    def trim_stderr(self) -> None:
        if self._errlog is None or self._errlog.closed:
            return
        with contextlib.suppress(OSError, ValueError):
            if os.fstat(self._errlog.fileno()).st_size > STDERR_KEPT_BYTES:
                # The program shares this file's offset (it inherited the descriptor): it writes from 0 again.
                self._errlog.truncate(0)
                self._errlog.seek(0)

    def _stderr(self) -> str:
        """The last lines the program wrote to stderr, as a reader needs them to see why it failed."""
        if self._errlog is None or self._errlog.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._errlog.flush()
            self._errlog.seek(0)
            lines = [line.strip() for line in self._errlog.read().splitlines() if line.strip()]
            self._errlog.seek(0, os.SEEK_END)
            if lines:
                tail = " / ".join(lines[-3:])
                return f" (its stderr: {tail[-STDERR_TAIL:]})"
        return ""


def _filled(text: str) -> str:
    """`{{env:NAME}}` replaced by our environment variable NAME, read as the server starts; its value is
    redacted wherever it appears. An unset one ends the conversation in error, naming it."""

    def value(found: re.Match) -> str:
        name = found.group("name")
        secret = os.environ.get(name)
        if not secret:
            raise McpServerError(
                f"{{{{env:{name}}}}} in an MCP server's settings is read from the environment variable {name}, "
                "which is not set where this run plays"
            )
        register_key_env(name)
        return secret

    return ENV_REF.sub(value, text)


def _reason(exc: BaseException) -> str:
    """One line saying why: the innermost exception of a group (the SDK's transports raise groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"no program {exc.filename or ''} (not found)".replace("  ", " ")
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if getattr(exc, "code", None) == -32000:  # the SDK's CONNECTION_CLOSED
        return "it closed the connection"
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())
