"""The terminal report (engine/report.py) of a turn with tool calls: each call on a line under the prompt, its
result or what went wrong, and tokens and cost that count every round; against the fake endpoint."""

from __future__ import annotations

import os

from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.loader import load_suite
from engine.report import format_eval, format_report
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.fakeopenai import Reply

SUITE = """\
name: agent
model: m
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    responses:
      - when: {city: Paris}
        returns: {temperature: 21}
      - when: {city: Lyon}
        error: no station there
evals:
  - prompt: Weather in Paris and Lyon?
    checks:
      - contains: "21"
"""


def _registry(fake) -> EndpointRegistry:
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    # A price per token, so the cost of every round shows in the totals too.
    default = EndpointConfig(name=DEFAULT, base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0,
                             price_input=1000.0, price_output=1000.0)  # fmt: skip
    return EndpointRegistry(default=default)


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def test_the_report_shows_each_call_under_its_turn_and_the_totals_count_every_round(fake_openai):
    fake_openai.script(
        "Weather in Paris and Lyon?",
        [
            Reply(tool_calls=[_call("get_weather", city="Paris"), _call("get_weather", city="Lyon")],
                  usage={"prompt_tokens": 100, "completion_tokens": 10}),
            Reply(tool_calls=[_call("get_forecast", city="Paris"), _call("get_weather", town="Paris")],
                  usage={"prompt_tokens": 200, "completion_tokens": 20}),
            Reply(text="It is 21 in Paris.", usage={"prompt_tokens": 300, "completion_tokens": 30}),
        ],
    )  # fmt: skip
    report = run_suite(load_suite(SUITE), _registry(fake_openai))

    block = format_eval(report.evals[0]).splitlines()
    start = block.index("    Prompt: Weather in Paris and Lyon?")
    assert block[start + 1 : start + 7] == [
        "    Tool calls: 4 in 2 rounds",
        '      1 → get_weather {"city": "Paris"} → {"temperature": 21}',
        '      1 → get_weather {"city": "Lyon"} ⚠ error: no station there',
        '      2 → get_forecast {"city": "Paris"} ⚠ mistake: there is no tool named `get_forecast` (offered: get_weather)',
        '      2 → get_weather {"town": "Paris"} ⚠ mistake: the arguments break the schema: \'city\' is a required '
        "property",
        "    Response: It is 21 in Paris.",
    ]
    # Every round's tokens and cost: 100 + 200 + 300 in, 10 + 20 + 30 out, at $1,000 a million each.
    assert "    Tokens: 600 in / 60 out, cost $0.660000" in block
    assert report.totals.total_tokens == 660 and round(report.totals.cost, 6) == 0.66
    assert "1 turn, 660 tokens, $0.660000" in format_report(report)


def test_a_long_result_is_cut_to_one_line_in_the_report(fake_openai):
    long_suite = SUITE.replace("returns: {temperature: 21}", f'returns: "{"sunny and warm. " * 20}\\nmore"')
    fake_openai.script(
        "Weather in Paris and Lyon?",
        [Reply(tool_calls=[_call("get_weather", city="Paris")]), Reply(text="21")],
    )
    report = run_suite(load_suite(long_suite), _registry(fake_openai))
    [line] = [line for line in format_eval(report.evals[0]).splitlines() if "→ get_weather" in line]
    assert line.startswith(
        '      → get_weather {"city": "Paris"} → sunny and warm. sunny'
    )  # one round: no number
    assert line.endswith("…") and len(line.split(" → ")[-1]) == 120 and "more" not in line
