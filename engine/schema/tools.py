"""Tools offered to the model under test (`tools:` at suite or eval level), in OpenAI's function format, and
where each call's result comes from: a static `returns`, `responses` rules matched on the arguments, an
`error`, a `code` handler, an `llm` that plays the tool, results `replay`ed from an earlier run, or a real
MCP server (a `tools` item that is `{mcp: ...}`, whose tools are listed from the server).

How a call is carried out is engine.tools; the conversation loop (engine.conversation) sends the tools, runs
the calls and sends the results back until the model answers in text or `max_tool_rounds` is reached."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, PrivateAttr, Tag, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from .base import LocatedError, StrictModel
from .checks import CodeSpec

DEFAULT_MAX_TOOL_ROUNDS = 10
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI's API accepts as a function name


class ToolRule(StrictModel):
    """One of a tool's `responses`, tried in order: the first whose `when` matches the call's arguments gives
    the result. `when` maps an argument to a matcher (engine.tools.matching): a value, `{regex}`,
    `{contains}`, `{any: true}` or a JSON Schema; no `when` matches any call."""

    when: dict[str, Any] | None = Field(None, description="Argument name: matcher. Omitted: any call.")
    returns: Any = Field(None, description="The result sent back (a string, or any JSON value).")
    error: str | None = Field(None, description="Send this back as the tool's error instead of a result.")

    @model_validator(mode="after")
    def _one_outcome(self) -> ToolRule:
        if self.error is not None and "returns" in self.model_fields_set:
            raise ValueError("a rule gives `returns` or `error`, not both")
        return self


class LlmTool(StrictModel):
    """A model plays the tool from its description, with what it said before kept per conversation."""

    model: str | None = Field(None, description="The model that plays the tool (default: the suite's judge).")
    instructions: str | None = Field(
        None, description="What the tool knows or how it behaves, beyond its description."
    )


class ToolCode(CodeSpec):
    """A tool's `code` handler, run as a code check is (engine.codegrade: a subprocess, limited in time and
    memory, without the network unless `network: true`; on a server only where code graders are allowed).

    A program reads `{name, arguments, messages, eval_id, config}` as JSON on stdin and prints the result
    (JSON, or plain text); a callable (`function: tools:get_weather`) gets that object as its argument and
    returns the result. A non-zero exit, a raised exception or a timeout is the tool's error, which the model
    is told. Written short, `code: "module:function"` is a callable and `code: [program, arg]` a command."""

    @model_validator(mode="after")
    def _no_grading(self) -> ToolCode:
        for key in ("threshold", "dialect"):
            if key in self.model_fields_set:
                raise LocatedError((key,), f"a tool's `code` has no `{key}`: what it returns is the result")
        return self


class McpServer(StrictModel):
    """A real MCP server whose tools are listed and called through the official `mcp` SDK: a program started
    over stdio (`command`, `env`, `cwd`), or a server at a URL (streamable HTTP)."""

    command: list[str] | None = Field(
        None,
        min_length=1,
        description="The program and its arguments (stdio); `python` is the interpreter evalsite runs on.",
    )
    env: dict[str, str] | None = Field(
        None, description="Environment variables for the program; {{env:NAME}} reads ours."
    )
    cwd: str | None = Field(None, description="The program's working directory.")
    url: str | None = Field(None, description="A server's URL (streamable HTTP), instead of a command.")
    headers: dict[str, str] | None = Field(
        None, description="HTTP headers for a URL server; {{env:NAME}} reads ours."
    )
    tools: list[str] | None = Field(
        None, description="Offer only these of the server's tools (default: all)."
    )
    timeout: float = Field(30.0, gt=0, le=600, description="Seconds one call may take.")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server is a `command` (stdio) or a `url`, one of them")
        return self


class RecordedCall(StrictModel):
    """One call stored in a `replay` file (a results.json): where it was made and what it got."""

    eval_id: str = ""
    prompt: str = ""  # the user message of the turn that made it
    name: str
    arguments: dict[str, Any]
    result: str = ""  # the `tool` message's content
    error: str | None = None


class Tool(StrictModel):
    """A function the model may call, and where its results come from. With no source given, a call gets an
    error result saying the tool has no result configured."""

    name: str = Field(description="The function's name, as the model calls it.")
    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="A JSON Schema for the arguments; a call whose arguments break it is the model's mistake.",
    )
    returns: Any = Field(None, description="A stub: this result for every call (a string or any JSON value).")
    responses: list[ToolRule] | None = Field(None, description="Rules on the arguments, tried in order.")
    error: str | None = Field(None, description="Every call gets this error result.")
    code: ToolCode | None = Field(
        None,
        description="A handler run as code checks are (the same keys), given the name, arguments and "
        "conversation; what it prints or returns is the result.",
    )
    llm: LlmTool | bool | None = Field(None, description="A model plays the tool (true: the suite's judge).")
    replay: str | None = Field(
        None,
        description="Results recorded in an earlier run's stored calls: a results.json file attached to the "
        "suite. A call with the same name and arguments as a stored one gets its result; others go on to "
        "the next source.",
    )

    recorded: SkipJsonSchema[list[RecordedCall] | None] = Field(
        None,
        description="The calls `replay` answers from, read from its file each time the suite is loaded (so a "
        "stored parse carries them to the workers); not written by hand.",
    )
    _replay_index: dict | None = PrivateAttr(None)  # engine.tools.replay's lookup of `recorded`, built once

    @model_validator(mode="before")
    @classmethod
    def _openai_form(cls, data: Any) -> Any:
        # OpenAI's request form, {type: function, function: {name, description, parameters}}, with the
        # result's source beside `function`.
        if (
            isinstance(data, dict)
            and isinstance(data.get("function"), dict)
            and data.get("type") == "function"
        ):
            rest = {key: value for key, value in data.items() if key not in ("type", "function")}
            return {**data["function"], **rest}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOOL_NAME.fullmatch(value):
            raise ValueError(f"`{value}` is not a tool name: 1–64 letters, digits, _ or -")
        return value

    @property
    def sources(self) -> list[str]:
        """The result sources this tool names, in the order they are tried."""
        given = self.model_fields_set
        out = [key for key in ("replay", "responses") if getattr(self, key) is not None]
        if "returns" in given:
            out.append("returns")
        out += [key for key in ("error", "code", "llm") if getattr(self, key) not in (None, False)]
        return out

    @model_validator(mode="after")
    def _recorded_from_a_file(self) -> Tool:
        if self.recorded is not None and self.replay is None:
            raise LocatedError(
                ("recorded",), "`recorded` is read from the `replay` file: name one there instead"
            )
        return self

    @model_validator(mode="after")
    def _parameters_are_a_schema(self) -> Tool:
        if self.parameters.get("type", "object") != "object":
            raise LocatedError(("parameters",), "a tool's `parameters` is a JSON Schema of `type: object`")
        return self


class ToolItem(StrictModel):
    """A `tools` list item that is an MCP server rather than one function."""

    mcp: McpServer


def tool_names(tools: list[Tool | ToolItem] | None) -> list[str]:
    """The names of the functions a list declares itself (an MCP server's are known once it is listed)."""
    return [tool.name for tool in tools or () if isinstance(tool, Tool)]


def check_tools(tools: list[Tool | ToolItem] | None) -> list[Tool | ToolItem] | None:
    """A list may not name one function twice."""
    seen: set[str] = set()
    for position, tool in enumerate(tools or ()):
        if isinstance(tool, Tool):
            if tool.name in seen:
                raise LocatedError((position, "name"), f"tool `{tool.name}` is declared twice")
            seen.add(tool.name)
    return tools


def _entry_kind(value: Any) -> str:
    # Tags are the members' class names, which error locations leave out (engine.errors).
    if isinstance(value, dict):
        return "ToolItem" if "mcp" in value else "Tool"
    return "ToolItem" if isinstance(value, ToolItem) else "Tool"


# A `tools` list item: one function, or an MCP server whose functions are listed from it.
ToolEntry = Annotated[
    Annotated[Tool, Tag("Tool")] | Annotated[ToolItem, Tag("ToolItem")], Discriminator(_entry_kind)
]


# `tools` and `max_tool_rounds`, as the suite and each eval take them.
OfferedTools = Annotated[
    list[ToolEntry] | None,
    AfterValidator(check_tools),
    Field(
        description="Tools offered to the model under test, in OpenAI's function format, each with where its "
        "results come from (returns, responses, error, code, llm, replay), or {mcp: ...} for an MCP server's."
    ),
]
MaxToolRounds = Annotated[
    int | None,
    Field(
        ge=1,
        le=100,
        description="Model calls with tool calls allowed in one turn before it ends unfinished "
        f"(default {DEFAULT_MAX_TOOL_ROUNDS}).",
    ),
]
