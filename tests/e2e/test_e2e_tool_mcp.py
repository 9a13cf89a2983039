"""A real MCP server as a tool source, through a real Celery worker: the suite starts the small stdio server
written with the SDK (tests/fixtures/mcp/weather_server.py), its tools are offered to the model, the calls are
answered by it and stored with the turn. A server that runs a program is allowed only where the deployer
allows code graders (EVALSITE_CODE_GRADERS)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runs.models import Run, Status, Turn
from runs.services import LaunchError
from tests.e2e.conftest import wait_for_run
from tests.factories import launch
from tests.fakeopenai import Reply

pytestmark = [pytest.mark.e2e]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"
SUITE = f"""\
name: weather agent
model: fake/test-model
system: You answer with the tools you are given.
tools:
  - mcp: {{command: [python, weather_server.py], cwd: {FIXTURES}, tools: [get_weather, whoami]}}
evals:
  - id: paris
    prompt: Weather in Paris?
    checks:
      - contains: "21°C, clear"
  - id: london
    prompt: Weather in London?
    checks:
      - contains: "14°C"
  - id: who
    prompt: Who is there?
    checks:
      - contains: "cwd={FIXTURES}"
"""


def test_a_worker_plays_a_suite_with_a_real_mcp_server(
    user, fake_endpoint, fake_openai, start_worker, settings
):
    settings.EVALSITE_CODE_GRADERS = True  # the launch's check; the worker gets the same switch below
    fake_openai.rule("Who is there?", Reply(tool_calls=[{"name": "whoami", "arguments": {}}]))
    start_worker(EVALSITE_CODE_GRADERS="1")
    run = wait_for_run(launch(user, SUITE), timeout=120)

    verdicts = {c.eval_id: (c.status, c.error) for c in run.conversations.all()}
    assert run.status == Status.PASSED, verdicts
    first = fake_openai.chat_requests(first_user="Weather in Paris?")[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["get_weather", "whoami"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city"]
    answered = fake_openai.chat_requests(first_user="Weather in Paris?")[1]["messages"][-1]
    assert answered["role"] == "tool" and answered["content"] == "Paris: 21°C, clear"
    calls = {
        turn.conversation.eval_id: turn.record["tool_rounds"][0]["calls"][0]
        for turn in Turn.objects.filter(conversation__run=run).select_related("conversation")
    }
    assert calls["paris"]["name"] == "get_weather" and calls["paris"]["arguments"] == {"city": "Paris"}
    assert calls["paris"]["source"] == "mcp" and calls["paris"]["result"] == "Paris: 21°C, clear"
    assert calls["london"]["result"] == "London: 14°C, rain"
    assert re.fullmatch(r"token= cwd=\S+ pid=\d+", calls["who"]["result"])


def test_a_server_without_code_graders_refuses_to_start_one(user, fake_endpoint, settings):
    settings.EVALSITE_CODE_GRADERS = False
    with pytest.raises(LaunchError) as refused:
        launch(user, SUITE)
    message = str(refused.value)
    assert "MCP servers started by `command`, which run a program (tools[0].mcp.command)" in message
    assert "EVALSITE_CODE_GRADERS=1" in message and "evalsite run" in message
    assert not Run.objects.exists()


def test_a_worker_without_code_graders_starts_no_server_program(user, fake_endpoint, start_worker, settings):
    """A run launched where code graders were allowed, played by a worker where they are not: its
    conversations end in error saying why, and no program is started."""
    settings.EVALSITE_CODE_GRADERS = True
    start_worker(EVALSITE_CODE_GRADERS="0")
    run = wait_for_run(launch(user, SUITE), timeout=120)

    errors = set(run.conversations.values_list("status", "error"))
    assert errors == {
        (
            Status.ERROR,
            "MCP server `python weather_server.py` was not started: a server started by `command` runs a "
            "program, as code graders do, and they are not enabled here (set EVALSITE_CODE_GRADERS=1 to "
            "allow them)",
        )
    }
