"""The tools' tool evals, imported: AgentV's tool-trajectory grader, trajectory:* assertions and
expected_tool_calls as tool checks, Letta's tool_arguments / tool_output extractors, vibecheck's MCP server as
a `tools` item, promptfoo's provider tools, histories with tool exchanges; and, played on the fake endpoint
with scripted tool calls (and a real MCP server), the converted suites failing what the originals failed (an
in_order trajectory out of order, an exact one with an extra call, wrong arguments, a tool result that does not
match)."""

from __future__ import annotations

import yaml

from engine.imports import convert
from engine.loader import load_suite
from tests.engine.import_fixtures import _run_on_fake, folder, has, one
from tests.engine.test_tool_mcp import http_server  # noqa: F401 (a fixture)
from tests.fakeopenai import Reply


def _with_results(source: str, results: dict[str, object]) -> str:
    """The converted suite with a stub result for each declared tool, as its user is told to give."""
    raw = yaml.safe_load(source)
    for tool in raw["tools"]:
        tool["returns"] = results[tool["name"]]
    return yaml.safe_dump(raw, sort_keys=False)


def _calls(*names_and_args: tuple[str, dict]) -> list[Reply]:
    return [Reply(tool_calls=[{"name": name, "arguments": args}]) for name, args in names_and_args]


# --- AgentV ----------------------------------------------------------------------------------------------


def test_agentv_tool_trajectory_modes_become_tool_checks_and_the_tools_are_declared():
    result = convert(folder("agentv-trajectory"))
    raw = yaml.safe_load(result.source)
    forecast, pipeline = raw["evals"]
    assert {name: grader["check"] for name, grader in forecast["graders"].items()} == {
        "coverage-geocode": {"tool_called": {"name": "geocode", "min": 1}},
        "coverage-forecast": {"tool_called": {"name": "forecast", "min": 1}},
        "workflow": {
            "tool_sequence": {
                "calls": [{"name": "geocode", "args": {"city": "Paris"}}, "forecast"],
                "mode": "in_order",
            }
        },
    }
    # any_order scores the share of tools meeting their minimum: each tool an equal share of the grader
    assert forecast["pass_rule"] == {
        "weighted_average": {"coverage-geocode": 0.5, "coverage-forecast": 0.5, "workflow": 1.0},
        "threshold": 0.8,
    }
    assert pipeline["graders"]["pipeline"]["check"] == {
        "tool_sequence": {"calls": ["geocode", "forecast"], "mode": "strict"}
    }
    assert [tool["name"] for tool in raw["tools"]] == ["geocode", "forecast"]
    assert raw["tools"][0]["parameters"] == {"type": "object", "properties": {"city": {"type": "string"}}}
    # only the latency bound is lost; what grades tool calls is carried
    assert len(result.lost) == 1 and has(result.lost, "max_duration_ms", "latency bound on forecast")
    assert has(result.unmapped, "AgentV compares the whole arguments", "allowing others")
    assert has(result.unmapped, "the tools geocode, forecast", "give each a result source")
    assert "tool calls, which evalsite" not in result.source


def test_agentv_v2_evaluators_and_conversation_turns_read_the_trajectory_too():
    source = """
evalcases:
  - id: lookup
    outcome: Finds the order
    input_messages: [{role: user, content: Where is order 12?}]
    evaluators:
      - name: trajectory
        type: tool_trajectory
        mode: superset
        expected: [{tool: find_order, args: {id: 12}}]
tests:
"""
    result = convert({"orders.yaml": source.replace("tests:\n", "")})
    raw = yaml.safe_load(result.source)
    (lookup,) = raw["evals"]
    checks = lookup.get("checks") or [g["check"] for g in lookup["graders"].values()]
    assert {
        "tool_sequence": {"calls": [{"name": "find_order", "args": {"id": 12}}], "mode": "superset"}
    } in checks
    assert [tool["name"] for tool in raw["tools"]] == ["find_order"]
    assert not has(result.lost, "trajectory")

    turns = """
tests:
  - id: chat
    turns:
      - input: Book a table for two
        assertions:
          - type: tool-trajectory
            mode: subset
            expected: [{tool: book}, {tool: check_availability}]
"""
    raw = yaml.safe_load(convert({"chat.eval.yaml": turns}).source)
    assert raw["evals"][0]["turns"][0]["checks"] == [
        {"tool_sequence": {"calls": ["book", "check_availability"], "mode": "subset"}}
    ]


def test_agentv_promptfoo_style_trajectory_assertions_become_tool_checks():
    result = convert(folder("agentv-trajectory-today"))
    raw = yaml.safe_load(result.source)
    checks = {name: grader["check"] for name, grader in raw["evals"][0]["graders"].items()}
    assert checks == {
        "looked-up": {"tool_called": {"name": "geocode", "min": 1}},
        "no-delete": {"tool_not_called": "delete_city"},
        "workflow": {"tool_sequence": {"calls": ["geocode", "forecast"], "mode": "in_order"}},
        "paris-args": {"tool_called": {"name": "geocode", "args": {"city": "Paris"}}},
        "goal": {
            "llm_judge": {
                "criteria": "The agent achieved this goal, judging by its tool calls, their results and its "
                "answer: Give tomorrow's forecast for Paris",
                "scope": "trajectory",
            }
        },
    }
    assert result.lost == []
    assert [tool["name"] for tool in raw["tools"]] == ["geocode", "delete_city", "forecast"]


def test_agentv_trajectory_that_cannot_be_carried_is_a_located_loss():
    source = """
tests:
  - id: t
    input: Go
    criteria: Goes
    assertions:
      - {name: bad-mode, type: tool-trajectory, mode: sideways, expected: [{tool: a}]}
      - {name: inverted, type: tool-trajectory, mode: exact, expected: [{tool: a}], negate: true}
      - {name: by-pattern, type: contains, value: Go}
"""
    result = convert({"t.eval.yaml": source})
    assert has(result.lost, "assertion bad-mode (tool-trajectory)", "mode sideways")
    assert has(result.lost, "assertion inverted (tool-trajectory)", "negated tool-trajectory")
    assert "tools" not in yaml.safe_load(result.source)


def test_agentv_in_order_fails_a_trajectory_out_of_order_and_exact_fails_an_extra_call(fake_openai):
    result = convert(folder("agentv-trajectory"))
    suite = load_suite(_with_results(result.source, {"geocode": "48.86,2.35", "forecast": "sunny"}))
    paris, lyon = "What's the weather in Paris tomorrow?", "Weather for Lyon?"
    # in order, then out of order: AgentV's in_order scores 1 then 0.5 (the case fails at 0.75)
    fake_openai.script(paris, [*_calls(("geocode", {"city": "Paris"}), ("forecast", {})), "Sunny tomorrow."])
    fake_openai.script(lyon, [*_calls(("geocode", {"city": "Lyon"}), ("forecast", {})), "Sunny."])
    report = _run_on_fake(fake_openai, suite)
    assert {r.id: r.status for r in report.evals} == {"forecast-paris": "passed", "exact-pipeline": "passed"}

    fake_openai.reset()
    fake_openai.script(paris, [*_calls(("forecast", {}), ("geocode", {"city": "Paris"})), "Sunny tomorrow."])
    fake_openai.script(
        lyon,
        [*_calls(("geocode", {"city": "Lyon"}), ("forecast", {}), ("geocode", {"city": "Lyon"})), "Sunny."],
    )
    report = _run_on_fake(fake_openai, suite)
    assert {r.id: r.status for r in report.evals} == {"forecast-paris": "failed", "exact-pipeline": "failed"}
    paris_result = next(r for r in report.evals if r.id == "forecast-paris")
    assert [call.name for call in paris_result.turns[0].tool_calls] == ["forecast", "geocode"]


def test_agentv_tool_used_and_args_match_fail_when_the_tool_is_not_called_with_those_arguments(fake_openai):
    result = convert(folder("agentv-trajectory-today"))
    raw = yaml.safe_load(
        _with_results(result.source, {"geocode": "x", "delete_city": "gone", "forecast": "sunny"})
    )
    for grader in raw["evals"][0]["graders"].values():
        grader.pop("threshold", None)
    raw["evals"][0]["graders"].pop("goal")  # the judge is another test's
    raw["evals"][0]["pass_rule"]["weighted_average"].pop("goal")
    raw["evals"][0]["pass_rule"]["threshold"] = 1.0
    suite = load_suite(yaml.safe_dump(raw, sort_keys=False))
    paris = "What's the weather in Paris tomorrow?"
    fake_openai.script(paris, [*_calls(("geocode", {"city": "Lyon"}), ("forecast", {})), "Sunny."])
    report = _run_on_fake(fake_openai, suite)
    (only,) = report.evals
    assert only.status == "failed"  # geocode was called, but not with city Paris


# --- Letta -----------------------------------------------------------------------------------------------


def test_letta_tool_output_extractor_is_carried_and_the_agent_files_tool_is_offered():
    result = convert(folder("letta-tools"))
    raw = yaml.safe_load(result.source)
    assert raw["grader"] == "regex_match"
    assert raw["extractor"] == {"tool_output": "get_weather"}
    assert raw["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city"}},
                "required": ["city"],
            },
        }
    ]
    assert result.lost == []
    assert has(result.mapped, "the agent file's tool get_weather", "→ tools")
    assert has(result.unmapped, "the tools get_weather: Letta ran their code", "give each a result source")


def test_letta_tool_arguments_beside_another_grader_and_a_tool_extractor_without_a_tool_name():
    files = folder("letta-tools")
    files["suite.yaml"] = files["suite.yaml"].replace(
        "gate:",
        "  asked_for_paris:\n    kind: tool\n    function: contains\n    extractor: tool_arguments\n"
        "    extractor_config:\n      tool_name: get_weather\n"
        "  nameless:\n    kind: tool\n    function: contains\n    extractor: tool_output\n"
        "gate:",
    )
    result = convert(files)
    raw = yaml.safe_load(result.source)
    assert raw["graders"]["asked_for_paris"]["extractor"] == {"tool_arguments": "get_weather"}
    assert raw["graders"]["weather_result"]["extractor"] == {"tool_output": "get_weather"}
    assert has(result.lost, "graders.nameless", "needs `tool_name`")
    assert [tool["name"] for tool in raw["tools"]] == ["get_weather"]


def test_letta_tool_output_grades_the_tools_result_as_letta_did(fake_openai):
    result = convert(folder("letta-tools"))
    source = _with_results(result.source, {"get_weather": "sunny, 21C"})
    suite = load_suite(source, files=result.files)
    fake_openai.script(
        "What's the weather in Paris?", [*_calls(("get_weather", {"city": "Paris"})), "Sunny."]
    )
    fake_openai.script("Weather in Oslo please", ["It is probably cold."])  # no tool call: nothing to extract
    report = _run_on_fake(fake_openai, suite)
    statuses = sorted(r.status for r in report.evals)
    assert statuses == ["failed", "passed"]


# --- vibecheck -------------------------------------------------------------------------------------------


def test_vibecheck_mcp_server_with_a_written_token_never_puts_the_token_in_the_suite():
    text = """
metadata:
  name: tracker
  model: openai/gpt-4o-mini
  system_prompt: You manage issues.
  mcp_server:
    url: https://mcp.tracker.example/mcp
    name: linear
    authorization_token: lin_api_s3cr3tvalue
evals:
  - prompt: List my issues
    checks:
      - min_tokens: 3
"""
    result = convert({"tracker.yaml": text})
    assert "s3cr3t" not in result.source and not any(
        "s3cr3t" in line for line in result.mapped + result.unmapped
    )
    suite = load_suite(result.source)
    (item,) = suite.tools
    assert item.mcp.url == "https://mcp.tracker.example/mcp"
    assert item.mcp.headers == {"Authorization": "Bearer {{env:LINEAR_TOKEN}}"}
    assert has(result.mapped, "not copied into the suite", "set the environment variable LINEAR_TOKEN")
    assert result.lost == []


def test_vibecheck_mcp_server_tools_are_called_on_the_server_with_the_token_from_the_environment(
    fake_openai,
    http_server,  # noqa: F811 (the fixture imported above)
    monkeypatch,
):
    text = f"""
metadata:
  name: weather
  model: openai/gpt-4o-mini
  system_prompt: You report the weather.
  mcp_server:
    url: {http_server}
    name: weather
    authorization_token: "{{{{secret('weather.token')}}}}"
evals:
  - prompt: Weather in London?
    checks:
      - match: "*rain*"
"""
    result = convert({"weather.yaml": text})
    assert result.lost == [] and "weather.token" not in result.source
    monkeypatch.setenv("WEATHER_TOKEN", "t-1")
    report = _run_on_fake(fake_openai, load_suite(result.source))
    (ev,) = report.evals
    assert ev.status == "passed", ev.verdict
    (call,) = ev.turns[0].tool_calls
    assert call.source == "mcp" and "rain" in call.result


def test_vibecheck_mcp_server_without_a_url_is_lost():
    text = one("vibecheck/tools-and-variables.yaml")
    (name,) = text
    broken = text[name].replace('url: "https://mcp.tracker.example/mcp"', "url: 42")
    result = convert({name: broken})
    assert has(result.lost, "metadata.mcp_server.url: 42", "run without the server's tools")
    assert "tools" not in yaml.safe_load(result.source)


# --- promptfoo -------------------------------------------------------------------------------------------


def test_promptfoo_provider_tools_are_offered_to_the_model():
    text = """
prompts: ["{{question}}"]
providers:
  - id: openai:gpt-4o-mini
    config:
      tools:
        - type: function
          function:
            name: get_weather
            description: Current weather for a city
            parameters: {type: object, properties: {city: {type: string}}, required: [city]}
        - name: lookup
          input_schema: {type: object, properties: {q: {type: string}}}
        - {type: code_interpreter}
tests:
  - vars: {question: Weather in Paris?}
    assert:
      - type: contains
        value: Paris
"""
    result = convert({"promptfooconfig.yaml": text})
    raw = yaml.safe_load(result.source)
    assert raw["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        {
            "name": "lookup",
            "description": "",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    ]
    assert has(result.unmapped, "providers[0].config.tools[2]", "not a function tool")
    assert has(result.mapped, "providers[0].config.tools → tools")
    suite = load_suite(result.source)
    assert [tool.name for tool in suite.tools] == ["get_weather", "lookup"]


def test_agentv_expected_tool_calls_evaluator_reads_the_expected_messages_tool_calls():
    source = """
$schema: agentv-eval-v2
evalcases:
  - id: metrics
    expected_outcome: Gets the CPU metrics
    input_messages: [{role: user, content: CPU and memory for prod-1?}]
    expected_messages:
      - role: assistant
        content: I'll check the system metrics.
        tool_calls:
          - tool: getCpuMetrics
            input: {server: prod-1}
          - tool: getMemoryMetrics
    execution:
      evaluators:
        - name: tool-calls-validator
          type: expected_tool_calls
"""
    result = convert({"metrics.yaml": source})
    raw = yaml.safe_load(result.source)
    (metrics,) = raw["evals"]
    checks = metrics.get("checks") or [g["check"] for g in metrics["graders"].values()]
    assert checks == [
        {
            "tool_sequence": {
                "calls": [{"name": "getCpuMetrics", "args": {"server": "prod-1"}}, "getMemoryMetrics"],
                "mode": "in_order",
            }
        }
    ]
    assert [tool["name"] for tool in raw["tools"]] == ["getCpuMetrics", "getMemoryMetrics"]
    assert not has(result.lost, "expected_tool_calls")


# --- given histories with tool exchanges -----------------------------------------------------------------


def test_agentv_and_promptfoo_histories_keep_their_tool_calls_and_answers():
    agentv = """
tests:
  - id: follow-up
    criteria: Uses the looked-up weather
    input:
      - role: user
        content: Weather in Paris?
      - role: assistant
        tool_calls:
          - {tool: get_weather, input: {city: Paris}, output: {temperature: 21}, id: c1}
      - role: assistant
        content: It is 21 degrees.
      - role: assistant
        content: Let me check Oslo too.
        tool_calls:
          - {tool: get_weather, input: {city: Oslo}}
      - role: user
        content: And tomorrow?
"""
    result = convert({"t.eval.yaml": agentv})
    suite = load_suite(result.source, files=result.files)
    sent = [m.model_dump(exclude_none=True) for m in suite.evals[0].messages]
    assert sent[1] == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "content": '{"temperature": 21}', "tool_call_id": "c1"}
    # a call nothing answers would be refused by the endpoint: the call is left out, the text kept
    assert sent[4] == {"role": "assistant", "content": "Let me check Oslo too."}
    assert has(result.unmapped, "tool calls with no tool message answering them")

    promptfoo = """
prompts:
  - id: file://chat.json
tests:
  - vars: {q: Weather in Paris?}
    assert: [{type: contains, value: "21"}]
"""
    chat = """[
  {"role": "user", "content": "{{q}}"},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
  {"role": "user", "content": "So?"}
]"""
    result = convert({"promptfooconfig.yaml": promptfoo, "chat.json": chat})
    suite = load_suite(result.source, files=result.files)
    sent = [m.model_dump(exclude_none=True) for m in suite.evals[0].messages]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert sent[2] == {"role": "tool", "content": "21C", "tool_call_id": "call_1"}
