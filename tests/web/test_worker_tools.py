"""Tool rounds in the worker runtime (runs.worker): they run on the pump's event loop with the model calls and
write nothing of their own; the turn's one write carries them. Played in-process through a Pump against the
fake OpenAI server, as tests/web/test_worker_loop.py plays conversations."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engine.results import TurnRecord
from runs import services
from runs.models import Status
from runs.worker.pump import Pump
from suites.services import create_suite

TOOLS = """\
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    returns: mild
"""


def _suite(tools: bool) -> str:
    return (
        f"name: weather-{'tools' if tools else 'plain'}\nmodel: fake/m\n"
        + (TOOLS if tools else "")
        + "evals:\n  - input: [Weather in Paris?, Weather in Rome?, Weather in Oslo?]\n"
        + "    checks: [{contains: 'results'}]\n"
    )


def _writes(queries) -> list[str]:
    """The statements that write the run's rows, their values left out (an executemany is logged as "N times:
    <statement>").
    """
    statements = [re.sub(r"^\s*\d+ times: ", "", query["sql"]) for query in queries]
    return [
        re.sub(r"\s+", " ", re.sub(r"'[^']*'|\b\d+\b", "?", sql)).strip()
        for sql in statements
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")) and "runs_worker" not in sql
    ]


def _play(user, published, tools: bool):
    version = create_suite(owner=user, source=_suite(tools)).latest_version
    run = services.create_run(version=version, user=user, concurrency=1)
    pump = Pump(capacity=1)
    assert all(pump.offer(pk) for pk in published)
    published.clear()
    with CaptureQueriesContext(connection) as queries:
        pump.serve(until_idle=True)
    return run.conversations.get(), queries.captured_queries


@pytest.fixture
def published(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("runs.worker.tasks.run_conversation.delay", sent.append)
    return sent


@pytest.mark.django_db(transaction=True)
def test_three_tool_rounds_per_turn_write_no_more_than_a_conversation_without_tools(
    user, fake_endpoint, fake_openai, published
):
    fake_openai.default_reply = "No tool, so no results."
    plain, plain_queries = _play(user, published, tools=False)
    fake_openai.tool_rounds = 3
    with_tools, tool_queries = _play(user, published, tools=True)

    assert plain.status == with_tools.status == Status.PASSED
    records = [TurnRecord.model_validate(turn.record) for turn in with_tools.turns.order_by("position")]
    assert [len(record.tool_rounds) for record in records] == [3, 3, 3]
    assert [call.arguments["city"] for call in records[1].tool_calls] == ["Rome"] * 3
    assert len(fake_openai.chat_requests()) == 3 + 3 * 4  # the tool rounds were played
    # The same statements, turn for turn: the conversation's claim, one write per turn, its end. (The first
    # pump of the process also registers its worker; heartbeats come when they are due.)
    assert _writes(tool_queries) == _writes(plain_queries)
    assert sum("INSERT INTO runs_turn" in sql for sql in _writes(tool_queries)) == 3
