"""The `code` source: a handler run exactly as a code check is (engine.codegrade.run: a subprocess in the
suite's folder or its attached files, limited in time and memory, cut off from the network unless it says
`network: true`), where the engine context has a code runner: always in the CLI, on a server only when its
deployer allows code graders (engine.codegrade.policy, which refuses the launch of a suite with a code tool
as it refuses one with a code check).

It is given `{name, arguments, messages, eval_id, config}`: as JSON on a program's stdin, as the argument of
a callable. A program's stdout is the result, as it printed it; a callable's return value is (a string as it is,
any other value as JSON). A non-zero exit, a raised exception or a timeout is the tool's error, sent back to the model as an
agent runtime would; a handler that cannot run here at all (not allowed, not installed, not importable, no
way to cut it off from the network) makes the conversation an error that says why."""

from __future__ import annotations

import json
import pathlib
import shutil

from ..codegrade.run import (
    CodeGraderError,
    CodeScope,
    describe,
    network_off_prefix,
    program,
    read_json,
    run_limited,
)
from ..schema import Tool
from .base import CallScope, Outcome

DIALECT_FILE = pathlib.Path(__file__).with_name("code_host.py")
CANNOT_LOAD = "cannot load "  # what host.py says when a callable's module or function is not there


def payload(tool: Tool, arguments: dict, scope: CallScope) -> dict:
    return {
        "name": tool.name,
        "arguments": arguments,
        "messages": scope.conversation,
        "eval_id": scope.eval_id,
        "config": tool.code.config,
    }


def from_code(tool: Tool, arguments: dict, scope: CallScope) -> Outcome:
    spec = tool.code
    name = f"tool `{tool.name}` ({describe(spec)})"
    runner = getattr(scope.ctx, "code", None)
    if runner is None:
        raise CodeGraderError(f"{name}: {CodeScope(None).refusal}")
    stdin = json.dumps(payload(tool, arguments, scope), default=str)
    argv = program(spec, DIALECT_FILE, "tool")
    if spec.function is None:
        _can_run(spec, runner, name)
    try:
        stdout, _ = run_limited(argv, stdin, spec, runner)
    except CodeGraderError as exc:
        if CANNOT_LOAD in str(exc):  # the suite's mistake, not the tool's answer
            raise CodeGraderError(f"{name}: {_failure(exc, spec)}") from None
        return Outcome(error=_failure(exc, spec), source="code")
    if spec.function is None:
        return Outcome(result=stdout.strip(), source="code")
    answer = read_json(stdout)
    if isinstance(answer, dict) and "error" in answer:
        return Outcome(error=str(answer["error"]), source="code")
    return Outcome(result=answer.get("result") if isinstance(answer, dict) else answer, source="code")


def _can_run(spec, runner, name: str) -> None:
    """A program that cannot start here is the suite's or the host's problem, never the tool's answer."""
    program = spec.command[0]
    path = runner.environment(spec.network).get("PATH")
    if "/" not in program and shutil.which(program, path=path) is None:
        raise CodeGraderError(f"{name}: `{program}` is not installed on this machine (not found on PATH)")
    if not spec.network and network_off_prefix()[0] is None:
        raise CodeGraderError(
            f"{name}: cannot cut it off from the network on this host ({network_off_prefix()[1]}); "
            "set `network: true` on the tool's code to run it with the network"
        )


def _failure(exc: CodeGraderError, spec) -> str:
    """The runner's words without its prefix, and the last line of what the handler wrote to stderr (a
    traceback's last line is the exception)."""
    text = str(exc).removeprefix(f"code grader {describe(spec)}: ")
    how, _, stderr = text.partition("\nstderr: ")
    lines = [line for line in stderr.splitlines() if line.strip()]
    return f"{how}: {lines[-1].strip()}" if lines else how
