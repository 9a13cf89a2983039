"""Real MCP servers as tool sources (engine.tools.mcp): a small stdio server written with the SDK
(tests/fixtures/mcp/weather_server.py) is started, its tools are listed and offered to the model (the fake
endpoint records the request's `tools`), and the calls are answered by it. Runs go through the runner, which
plays every conversation on one event loop, as the CLI does."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.clients import EndpointConfig, EndpointRegistry, OpenAIClient
from engine.codegrade import policy
from engine.conversation import Defaults, EngineContext, run_eval
from engine.loader import load_suite
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.fakeopenai import Reply

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "weather_server.py"


def _suite(mcp: str, evals: str) -> str:
    return f"name: mcp\ntools:\n  - mcp: {mcp}\nevals:\n{evals}"


def _stdio(extra: str = "") -> str:
    return f"{{command: [python, {SERVER}]{extra}}}"


def _run(fake, source: str, concurrency: int = 3):
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    return run_suite(load_suite(source), EndpointRegistry(config), model="agent", concurrency=concurrency)


def _offered(request: dict) -> dict[str, dict]:
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools") or ()}


def _pid(text: str) -> int:
    return int(re.search(r"pid=(\d+)", text).group(1))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A child not yet reaped is a zombie: it no longer runs.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_the_servers_tools_are_offered_and_its_answers_go_back(fake_openai, monkeypatch, tmp_path):
    """The listed tools (only those `tools` names) are offered with the server's schemas; each call reaches
    the one server process every conversation shares, started with `env` ({{env:NAME}} filled) and `cwd`;
    the runner stops it when the run ends."""
    monkeypatch.setenv("MCP_TEST_TOKEN", "tok-123")
    fake_openai.rule("Who is there?", Reply(tool_calls=[{"name": "whoami", "arguments": {}}]))
    fake_openai.rule("Forecast?", Reply(tool_calls=[{"name": "get_forecast", "arguments": {"city": "Oslo"}}]))
    server = _stdio(
        f", env: {{WEATHER_TOKEN: '{{{{env:MCP_TEST_TOKEN}}}}'}}, cwd: {tmp_path},"
        " tools: [get_weather, whoami, get_forecast]"
    )
    evals = "".join(
        f"  - prompt: {prompt}\n    checks: [{{contains: '{expected}'}}]\n"
        for prompt, expected in [
            ("Weather in Paris?", "Paris: 21°C, clear"),
            ("Weather in London?", "London: 14°C, rain"),
            ("Who is there?", "token=tok-123"),
            ("Who is there? Again", f"cwd={tmp_path}"),
            ("Forecast?", '"high": 21'),
        ]
    )
    report = _run(fake_openai, _suite(server, evals))

    assert [ev.status for ev in report.evals] == ["passed"] * 5, [ev.verdict for ev in report.evals]
    first = fake_openai.chat_requests(first_user="Weather in Paris?")[0]
    offered = _offered(first)
    assert list(offered) == ["get_weather", "whoami", "get_forecast"]  # explode, slow, crash: not named
    assert offered["get_weather"]["description"] == "Current weather for a city."
    assert offered["get_weather"]["parameters"]["properties"]["city"]["type"] == "string"
    assert offered["get_weather"]["parameters"]["required"] == ["city"]
    call = report.evals[0].turns[0].tool_calls[0]
    assert (call.name, call.arguments, call.result, call.source, call.error) == (
        "get_weather", {"city": "Paris"}, "Paris: 21°C, clear", "mcp", None,
    )  # fmt: skip
    pids = {_pid(ev.turns[0].tool_calls[0].result) for ev in report.evals[2:4]}
    assert len(pids) == 1  # one server for every conversation, not one per call
    assert not _alive(pids.pop())  # closed as the runner's loop ended


def test_an_error_result_and_a_timeout_are_the_tools_errors(fake_openai):
    """A tool that fails (isError) and one that answers after the server's `timeout`: the model is told the
    error and the conversation goes on to its answer."""
    fake_openai.rule("Break it", Reply(tool_calls=[{"name": "explode", "arguments": {"reason": "storm"}}]))
    fake_openai.rule("Wait", Reply(tool_calls=[{"name": "slow", "arguments": {"seconds": 30}}]))
    evals = (
        "  - prompt: Break it\n    checks: [{contains: station is down}]\n"
        "  - prompt: Wait\n    checks: [{contains: no answer within}]\n"
    )
    report = _run(fake_openai, _suite(_stdio(", timeout: 1"), evals))

    assert [ev.status for ev in report.evals] == ["passed", "passed"], [ev.verdict for ev in report.evals]
    broken = report.evals[0].turns[0].tool_calls[0]
    assert "the weather station is down: storm" in broken.error
    assert broken.result == f"Error: {broken.error}" and broken.source == "mcp" and not broken.mistake
    late = report.evals[1].turns[0].tool_calls[0]
    assert late.error == "no answer within 1 s (the MCP server's `timeout`)"
    sent = fake_openai.chat_requests(first_user="Break it")[1]["messages"][-1]
    assert sent["role"] == "tool" and "the weather station is down: storm" in sent["content"]


def test_a_server_that_cannot_start_ends_the_conversation_in_error(fake_openai, tmp_path):
    """A program that is not there, and one that exits at once: an error naming the server and why, not a
    FAIL; the model is never asked."""
    missing = tmp_path / "missing.py"
    evals = "  - prompt: Weather in Paris?\n    checks: [{contains: Paris}]\n"
    for command, why in [
        ("[no-such-mcp-server]", "no program no-such-mcp-server"),
        (f"[python, {missing}]", "can't open file"),
    ]:
        report = _run(fake_openai, _suite(f"{{command: {command}}}", evals))
        (ev,) = report.evals
        assert ev.status == "error"
        assert "could not start" in ev.error and why in ev.error, ev.error
        assert ev.verdict.startswith("error on turn 1: MCP server `")
    assert fake_openai.chat_requests() == []


def test_a_tool_named_that_the_server_does_not_list_is_an_error(fake_openai):
    report = _run(
        fake_openai,
        _suite(_stdio(", tools: [get_weather, get_tides]"), "  - prompt: Hi\n    checks: [{contains: x}]\n"),
    )
    (ev,) = report.evals
    assert ev.status == "error" and "has no tool `get_tides` (it lists: get_weather, " in ev.error


def test_a_server_that_dies_ends_the_conversation_in_error(fake_openai):
    fake_openai.rule("Crash", Reply(tool_calls=[{"name": "crash", "arguments": {}}]))
    report = _run(fake_openai, _suite(_stdio(), "  - prompt: Crash\n    checks: [{contains: x}]\n"))
    (ev,) = report.evals
    assert ev.status == "error"
    assert re.fullmatch(r"MCP server `python .*weather_server.py` stopped: its connection closed", ev.error)


def test_the_inline_path_plays_a_server_too(fake_openai):
    """run_eval (no event loop of its own) starts the server for the call and stops it after."""
    suite = load_suite(_suite(_stdio(), "  - prompt: Weather in Paris?\n    checks: [{contains: '21°C'}]\n"))
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    agent = OpenAIClient(
        EndpointConfig(name="fake", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    )
    ctx = EngineContext(agent=agent, model="m", judge=agent, judge_model="m", defaults=Defaults.of(suite))
    result = run_eval(suite.evals[0], 0, "e0", ctx)
    assert result.status == "passed", result.verdict
    assert result.turns[0].tool_calls[0].result == "Paris: 21°C, clear"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server(tmp_path):
    """The same server over streamable HTTP on 127.0.0.1, in a process of its own."""
    port = _free_port()
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert process.poll() is None, (tmp_path / "server.log").read_text()
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait(timeout=10)
    log.close()


def test_a_server_at_a_url(fake_openai, http_server, monkeypatch):
    monkeypatch.setenv("MCP_TEST_HEADER", "h-1")
    server = f"{{url: '{http_server}', headers: {{X-Test: '{{{{env:MCP_TEST_HEADER}}}}'}}}}"
    report = _run(
        fake_openai, _suite(server, "  - prompt: Weather in London?\n    checks: [{contains: rain}]\n")
    )
    (ev,) = report.evals
    assert ev.status == "passed", ev.verdict
    assert ev.turns[0].tool_calls[0].source == "mcp"
    assert "get_weather" in _offered(fake_openai.chat_requests()[0])


def test_a_server_started_by_command_is_refused_where_code_graders_are():
    """A deployer who has not allowed code graders refuses a suite that starts an MCP server by `command`
    (it runs a program); a server reached by `url` runs nothing here."""
    stdio = load_suite(
        _suite(
            _stdio(),
            "  - prompt: Hi\n    checks: [{contains: x}]\n    tools:\n      - mcp: {command: [npx, srv]}\n",
        )
    )
    refusal = policy.launch_refusal(stdio)
    assert refusal.startswith("this suite has MCP servers started by `command`, which run a program (")
    assert "tools[0].mcp.command" in refusal and "eval `" in refusal
    assert "EVALSITE_CODE_GRADERS=1" in refusal and "`evalsite run`" in refusal
    problems = policy.refusals(stdio)
    assert [problem.path for problem in problems] == ["tools[0].mcp.command", "evals[0].tools[0].mcp.command"]
    assert all("runs a program, as code graders do" in problem.message for problem in problems)
    assert (
        policy.launch_refusal(
            load_suite(
                _suite("{url: 'http://127.0.0.1:1/mcp'}", "  - prompt: Hi\n    checks: [{contains: x}]\n")
            )
        )
        is None
    )


def test_a_process_that_refuses_programs_starts_no_server(fake_openai, monkeypatch, tmp_path):
    """Where programs are refused (a worker without code graders sets it), a `command` server is not started;
    the conversation ends in error saying why."""
    from engine.tools import mcp

    monkeypatch.setattr(mcp, "commands_refused", mcp.COMMANDS_OFF)
    marker = tmp_path / "started"
    command = f'{{command: [python, -c, \'open("{marker}", "w")\']}}'
    report = _run(fake_openai, _suite(command, "  - prompt: Hi\n    checks: [{contains: x}]\n"))
    (ev,) = report.evals
    assert (
        ev.status == "error" and "was not started: a server started by `command` runs a program" in ev.error
    )
    assert not marker.exists()


def test_a_server_that_ended_between_conversations_is_started_again(fake_openai):
    """A shared server whose program ended while no call was out (killed after the first conversation): the
    next conversation starts it again rather than ending in error."""
    fake_openai.rule("Who is there?", Reply(tool_calls=[{"name": "whoami", "arguments": {}}]))
    # The second conversation's first answer waits a moment, so the ended connection has been noticed.
    fake_openai.rule("Who else?", Reply(tool_calls=[{"name": "whoami", "arguments": {}}], latency=0.5))
    evals = "".join(
        f"  - prompt: {p}\n    checks: [{{contains: pid}}]\n" for p in ("Who is there?", "Who else?")
    )
    killed = []

    def kill_the_server(result) -> None:
        if not killed:
            killed.append(_pid(result.turns[0].tool_calls[0].result))
            os.kill(killed[0], signal.SIGKILL)

    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(
        name="default", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0
    )
    report = run_suite(
        load_suite(_suite(_stdio(), evals)), EndpointRegistry(config), model="agent", concurrency=1,
        on_result=kill_the_server,
    )  # fmt: skip
    assert [ev.status for ev in report.evals] == ["passed", "passed"], [ev.error for ev in report.evals]
    assert _pid(report.evals[1].turns[0].tool_calls[0].result) != killed[0]
