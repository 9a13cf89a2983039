"""Carrying out the model's tool calls: a conversation's Toolbox offers the suite's and the eval's tools (and
an MCP server's) in OpenAI's format, checks each call as an agent runtime would (no function name, an
unknown tool, arguments that are no JSON object or break the schema: the model's mistake, sent back as an
error), and takes its result from the tool's sources in order (`SOURCES`): a source that has no answer for
the call passes it on.

The conversation loop (engine.conversation) calls the model, runs the calls and sends the results back as
`tool` messages until the model answers in text; `exchange_messages` rebuilds those messages from a stored
turn, so a resumed conversation sends what the first one did.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..clients import EndpointError
from ..results import ToolCall, ToolRound, TurnRecord, Usage
from ..retries import RetryStopped
from ..schema import DEFAULT_MAX_TOOL_ROUNDS, McpServer, Tool, ToolItem
from . import code, replay, simulated, stubs
from .base import CallScope, Outcome, Source

if TYPE_CHECKING:
    import jsonschema

# Tried in the order a tool's `sources` lists them; each key is a Tool field.
SOURCES: dict[str, Source] = {
    "replay": replay.from_replay,
    "responses": stubs.from_rules,
    "returns": stubs.from_returns,
    "error": stubs.from_error,
    "code": code.from_code,
    "llm": simulated.from_llm,
}

# Sources that stay on the event loop: no I/O, no waiting (a replayed file is parsed once, then looked up).
# The others run in a thread unless asynchronous.
LOCAL_SOURCES = frozenset({"replay", "responses", "returns", "error"})


def openai_tool(tool: Tool) -> dict:
    """A tool as the chat completions API takes it."""
    function = {"name": tool.name, "parameters": tool.parameters}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def result_text(result: Any) -> str:
    """What a `tool` message carries: a string as it is, any other value as JSON."""
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


class Toolbox:
    """One conversation's tools: the eval's, then the suite's it does not redefine, then its MCP servers'."""

    def __init__(
        self, tools: Sequence[Tool], servers: Sequence[McpServer] = (), max_rounds: int | None = None
    ):
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            self.tools.setdefault(tool.name, tool)
        self.servers = list(servers)
        self.max_rounds = max_rounds or DEFAULT_MAX_TOOL_ROUNDS
        self.state: dict = {}
        self._listed = not self.servers
        self._server_of: dict[str, McpServer] = {}

    @classmethod
    def of(cls, suite_tools, eval_tools, max_rounds: int | None = None) -> Toolbox | None:
        """The eval's toolbox; None when neither the suite nor the eval offers a tool."""
        entries = [*(eval_tools or ()), *(suite_tools or ())]
        if not entries:
            return None
        tools = [entry for entry in entries if isinstance(entry, Tool)]
        servers = [entry.mcp for entry in entries if isinstance(entry, ToolItem)]
        return cls(tools, servers, max_rounds)

    async def open(self, io) -> None:
        """List the MCP servers' tools (once per conversation); a tool the suite declares keeps its own."""
        if self._listed:
            return
        from . import mcp  # the MCP SDK is imported only by suites that use a server

        for server in self.servers:
            for tool in await io.awaited(mcp.server_tools, server):
                if tool.name not in self.tools:
                    self.tools[tool.name] = tool
                    self._server_of[tool.name] = server
        self._listed = True

    def offered(self) -> list[dict]:
        return [openai_tool(tool) for tool in self.tools.values()]

    async def run(self, call: dict, scope: CallScope, io) -> ToolCall:
        """Carry out one call ({id, name, arguments}). `io` is the conversation loop's
        (engine.conversation_io.IO): a synchronous source that may wait runs through `io.blocking`, an
        asynchronous one through `io.awaited`."""
        started = time.monotonic()
        record = ToolCall(id=call["id"], name=call["name"], raw_arguments=call.get("arguments") or "")
        tool = self.tools.get(call["name"])
        arguments, mistake = _arguments(record.raw_arguments)
        if call.get("problem"):  # no function name, or no function call: engine.clients.answers
            mistake = f"{call['problem']} (offered: {', '.join(self.tools) or 'none'})"
        elif tool is None:
            offered = ", ".join(self.tools) or "none"
            mistake = f"there is no tool named `{call['name']}` (offered: {offered})"
        elif mistake is None:
            mistake = _schema_mistake(tool, arguments)
        if mistake is not None:
            return record.model_copy(
                update={"arguments": arguments, "error": mistake, "mistake": True, "result": f"Error: {mistake}",
                        "source": "none", "latency_ms": _ms(started)}
            )  # fmt: skip
        outcome = await self._outcome(tool, arguments, scope, io)
        text = f"Error: {outcome.error}" if outcome.error is not None else result_text(outcome.result)
        return record.model_copy(
            update={"arguments": arguments, "error": outcome.error, "result": text, "source": outcome.source,
                    "latency_ms": _ms(started), "usage": outcome.usage, "cost": outcome.cost}
        )  # fmt: skip

    async def _outcome(self, tool: Tool, arguments: dict, scope: CallScope, io) -> Outcome:
        scope.state = self.state
        server = self._server_of.get(tool.name)
        if server is not None:
            from . import mcp  # as in open()

            return await io.awaited(mcp.call, server, tool.name, arguments)
        for key in tool.sources:
            source = SOURCES.get(key)
            if source is None:
                return Outcome(
                    error=f"the tool's `{key}` results are not available in this evalsite", source=key
                )
            try:
                if inspect.iscoroutinefunction(source):
                    outcome = await io.awaited(source, tool, arguments, scope)
                elif key in LOCAL_SOURCES:
                    outcome = source(tool, arguments, scope)
                else:
                    outcome = await io.blocking(source, tool, arguments, scope)
            except (EndpointError, RetryStopped):  # a tool's model or runner failed: the conversation's error
                raise
            except Exception as exc:  # a handler's failure is the tool's error, which the model is told
                return Outcome(error=f"{type(exc).__name__}: {exc}", source=key)
            if outcome is not None:
                return outcome if outcome.source else replace(outcome, source=key)
        return Outcome(error=f"`{tool.name}` has no result for these arguments", source="none")


def _arguments(raw: str) -> tuple[dict | None, str | None]:
    if not raw.strip():
        return {}, None  # a call with no arguments
    try:
        value = json.loads(raw)
    except ValueError:
        return None, f"the arguments are not JSON: {raw[:80]!r}"
    if not isinstance(value, dict):
        return None, "the arguments are not a JSON object"
    return value, None


@functools.lru_cache(maxsize=256)
def _validator(parameters: str) -> jsonschema.Draft202012Validator:
    """A tool's parameters schema (as canonical JSON) made into a validator once per process, not once per
    call: making one costs as much as checking a call with it."""
    import jsonschema  # at the first tool call checked: suites without tools never need it

    return jsonschema.Draft202012Validator(json.loads(parameters))


def _schema_mistake(tool: Tool, arguments: dict) -> str | None:
    import jsonschema

    try:
        validator = _validator(json.dumps(tool.parameters, sort_keys=True))
        errors = sorted(validator.iter_errors(arguments), key=str)
    except jsonschema.SchemaError as exc:
        return f"the tool's parameters are no valid JSON Schema: {exc.message}"
    if not errors:
        return None
    where = "/".join(str(part) for part in errors[0].absolute_path)
    return f"the arguments break the schema{f' at {where}' if where else ''}: {errors[0].message}"


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def spent(rounds: Sequence[ToolRound]) -> tuple[Usage, float]:
    """What the models that played tools (`llm`) spent in these rounds: the turn counts it as judge usage."""
    calls = [call for round_ in rounds for call in round_.calls]
    usage = sum((call.usage for call in calls if call.usage is not None), Usage())
    return usage, sum(call.cost for call in calls)


def unanswered(call: dict) -> ToolCall:
    """A call of a round that did not finish, recorded as the model sent it: it is not carried out."""
    arguments, _ = _arguments(call.get("arguments") or "")
    return ToolCall(
        id=call["id"], name=call["name"], arguments=arguments, raw_arguments=call.get("arguments") or ""
    )


def carried_out(rounds: Sequence[ToolRound]) -> list[ToolCall]:
    """The calls of these rounds that were carried out: those of a round that did not finish were not."""
    return [call for round_ in rounds if round_.incomplete is None for call in round_.calls]


def round_messages(round_: ToolRound) -> list[dict]:
    """The assistant message that made a round's calls, then a `tool` message answering each. A round that
    did not finish adds none: its calls were not carried out, and its text is the turn's reply."""
    if round_.incomplete is not None:
        return []
    assistant = {
        "role": "assistant",
        "content": round_.text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.raw_arguments},
            }
            for call in round_.calls
        ],
    }
    return [
        assistant,
        *({"role": "tool", "tool_call_id": call.id, "content": call.result} for call in round_.calls),
    ]


def exchange_messages(turn: TurnRecord) -> list[dict]:
    """What a turn added to the conversation after its user message: its tool rounds, then the reply."""
    out = [message for round_ in turn.tool_rounds for message in round_messages(round_)]
    out.append({"role": "assistant", "content": turn.response})
    return out
