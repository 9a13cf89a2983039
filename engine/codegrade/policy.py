"""Where code graders may run: always in the CLI, on a server only when its deployer sets
EVALSITE_CODE_GRADERS. A suite with a code check is refused at launch on a server that does not allow
them, and the editor and the validate API say so at each code check. An MCP server started by `command`
runs a program too (engine.tools.mcp), and follows the same rule; one at a `url` does not."""

from __future__ import annotations

from ..schema import Suite, ToolItem
from ..source import SuiteProblem, format_path
from .run import SETTING

DISABLED = (
    f"code graders are not enabled on this server (its deployer sets {SETTING}=1 to allow them); "
    "a run of this suite is refused here: run it with the CLI (`evalsite run`)"
)

DISABLED_MCP = (
    f"an MCP server started by `command` runs a program, as code graders do, and they are not enabled on this "
    f"server (its deployer sets {SETTING}=1 to allow them); a run of this suite is refused here: run it with "
    "the CLI (`evalsite run`), or reach the server by `url`"
)


def mcp_commands(suite: Suite) -> list[tuple]:
    """The path of each MCP server the suite starts as a program (`tools: [{mcp: {command: ...}}]`)."""
    lists = [(("tools",), suite.tools)]
    lists += [(("evals", index, "tools"), ev.tools) for index, ev in enumerate(suite.evals)]
    return [
        (*path, position, "mcp", "command")
        for path, entries in lists
        for position, entry in enumerate(entries or ())
        if isinstance(entry, ToolItem) and entry.mcp.command is not None
    ]


def where(suite: Suite, path: tuple) -> str:
    """A code check's place as a reader finds it: the eval's id and the path, e.g.
    eval `capital` (evals[0].checks[1].code)."""
    if len(path) > 1 and path[0] == "evals" and isinstance(path[1], int) and path[1] < len(suite.evals):
        return f"eval `{suite.eval_id(path[1])}` ({format_path(path)})"
    return format_path(path)


def refusals(suite: Suite, locate=None) -> list[SuiteProblem]:
    """One located problem per code check of a suite that a server without code graders cannot run.
    `locate(path) -> (line, column)` places each in the suite's text."""
    found = []
    for path, _ in suite.code_checks():
        line, column = locate(path) if locate is not None else (0, 0)
        found.append(SuiteProblem(line, column, format_path(path), DISABLED))
    for path in mcp_commands(suite):
        line, column = locate(path) if locate is not None else (0, 0)
        found.append(SuiteProblem(line, column, format_path(path), DISABLED_MCP))
    return found


def launch_refusal(suite: Suite) -> str | None:
    """Why a server without code graders refuses to run this suite, naming its code checks and the MCP
    servers it starts; None if it has none."""
    what = []
    code = suite.code_checks()
    # A tool whose results come from `code` is no check: the reader looks for it under `tools`.
    if places := [where(suite, path) for path, _ in code if "tools" not in path]:
        what.append(f"code checks ({_shown(places)})")
    if tools := [where(suite, path) for path, _ in code if "tools" in path]:
        what.append(f"tools answered by `code` ({_shown(tools)})")
    if servers := [where(suite, path) for path in mcp_commands(suite)]:
        what.append(f"MCP servers started by `command`, which run a program ({_shown(servers)})")
    if not what:
        return None
    return (
        f"this suite has {' and '.join(what)}; code graders are not enabled on this server "
        f"(its deployer sets {SETTING}=1 to allow them). Run it with the CLI (`evalsite run`) instead."
    )


def _shown(places: list[str]) -> str:
    return ", ".join(places[:5]) + (f" and {len(places) - 5} more" if len(places) > 5 else "")
