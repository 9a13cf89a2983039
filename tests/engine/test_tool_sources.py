"""The tool result sources that run something: a `code` handler (run as code checks are), an `llm` that plays
the tool (with what it said earlier in the conversation), and `replay` of an earlier run's stored calls; played
against the fake endpoint, which calls the first offered tool with the city the user names."""

from __future__ import annotations

import json
import os

import pytest

from engine.clients import EndpointConfig, OpenAIClient
from engine.codegrade.policy import launch_refusal
from engine.codegrade.run import CodeRunner
from engine.conversation import Defaults, EngineContext, run_eval
from engine.loader import file_references, load_saved_suite, load_suite
from engine.results import RESULTS_FORMAT
from engine.schema import Suite
from engine.source import SuiteError
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.fakeopenai import Reply

TOOL_MODEL = "You play the tool `get_weather`"


def _evals(*prompts: str, key: str = "prompt") -> str:
    return "".join(f"  - {key}: {prompt}\n    checks: [{{contains: Tool results}}]\n" for prompt in prompts)


def _suite(tool: str, evals: str = _evals("Weather in Paris?")) -> str:
    return (
        f"name: tools\ntools:\n  - name: get_weather\n    description: Current weather for a city, as JSON\n"
        "    parameters: {type: object, properties: {city: {type: string}}, required: [city]}\n"
        f"{tool}evals:\n{evals}"
    )


def _client(fake) -> OpenAIClient:
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    return OpenAIClient(
        EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    )


def _play(fake, source: str, files=None, *, code: CodeRunner | None = None, index: int = 0, eval_id="e"):
    suite = load_suite(source, files=files or {})
    agent = _client(fake)

    def resolve(ref: str):
        return agent, ref.split("/", 1)[-1]

    ctx = EngineContext(
        agent=agent, model="m", judge=agent, judge_model="judge-m", resolve=resolve, files=files or {},
        defaults=Defaults.of(suite), code=code,
    )  # fmt: skip
    return run_eval(suite.evals[index], index, eval_id, ctx)


def _tool_model_requests(fake) -> list[dict]:
    return [
        request
        for request in fake.chat_requests()
        if request["messages"][0]["role"] == "system" and TOOL_MODEL in request["messages"][0]["content"]
    ]


# --- code ------------------------------------------------------------------------------------------------

PROGRAM = """\
import json, sys
call = json.load(sys.stdin)
if call["arguments"]["city"] == "Lyon":
    print("no station in Lyon", file=sys.stderr)
    sys.exit(3)
users = [m["content"] for m in call["messages"] if m["role"] == "user"]
print(json.dumps({"tool": call["name"], "city": call["arguments"]["city"], "asked": users[-1],
                  "units": call["config"]["units"]}))
"""

HANDLERS = """\
def get_weather(call):
    if call["arguments"]["city"] == "Lyon":
        raise LookupError("no station in Lyon")
    return {"temperature": 21, "city": call["arguments"]["city"], "eval": call["eval_id"]}
"""


def test_a_program_handler_reads_the_call_on_stdin_and_its_stdout_is_the_result(fake_openai, tmp_path):
    source = _suite("    code: {command: [python3, weather.py], config: {units: C}}\n")
    result = _play(
        fake_openai, source, {"weather.py": PROGRAM}, code=CodeRunner(files={"weather.py": PROGRAM})
    )
    (call,) = result.turns[0].tool_calls
    assert (call.source, call.error) == ("code", None)
    assert json.loads(call.result) == {"tool": "get_weather", "city": "Paris", "asked": "Weather in Paris?",
                                       "units": "C"}  # fmt: skip
    assert fake_openai.chat_requests()[-1]["messages"][-1]["content"] == call.result
    assert result.status == "passed"


def test_a_handler_that_exits_with_an_error_is_the_tools_error_not_the_conversations(fake_openai):
    source = _suite("    code: [python3, weather.py]\n", _evals("Weather in Lyon?"))
    result = _play(
        fake_openai, source, {"weather.py": PROGRAM}, code=CodeRunner(files={"weather.py": PROGRAM})
    )
    (call,) = result.turns[0].tool_calls
    assert call.error == "exited with status 3: no station in Lyon" and not call.mistake
    assert call.result == "Error: exited with status 3: no station in Lyon"
    assert result.status == "passed"


def test_a_callable_handler_gets_the_call_and_its_exception_is_the_tools_error(fake_openai, tmp_path):
    (tmp_path / "handlers.py").write_text(HANDLERS)
    source = _suite(
        "    code: handlers:get_weather\n",
        _evals("Weather in Paris?", "Weather in Lyon?"),
    )
    runner = CodeRunner(folder=tmp_path)
    paris = _play(fake_openai, source, {"handlers.py": HANDLERS}, code=runner, eval_id="paris")
    assert json.loads(paris.turns[0].tool_calls[0].result) == {
        "temperature": 21,
        "city": "Paris",
        "eval": "paris",
    }
    lyon = _play(fake_openai, source, {"handlers.py": HANDLERS}, code=runner, index=1)
    (call,) = lyon.turns[0].tool_calls
    assert (call.source, call.error) == ("code", "LookupError: no station in Lyon")
    assert lyon.status == "passed"


def test_an_inline_program_that_runs_out_of_time_is_the_tools_error(fake_openai):
    source = _suite('    code: {command: [python3, -c, "import time; time.sleep(30)"], timeout: 0.5}\n')
    result = _play(fake_openai, source, code=CodeRunner())
    (call,) = result.turns[0].tool_calls
    assert (call.source, call.error) == ("code", "timed out after 0.5 s")
    inline = _suite('    code: [python3, -c, "import sys; print(sys.stdin.read().upper())"]\n')
    (call,) = _play(fake_openai, inline, code=CodeRunner()).turns[0].tool_calls
    assert json.loads(call.result)["ARGUMENTS"] == {"CITY": "PARIS"}


def test_a_handler_where_code_may_not_run_makes_the_conversation_an_error_that_says_why(fake_openai):
    source = _suite("    code: handlers:get_weather\n")
    result = _play(fake_openai, source, {"handlers.py": HANDLERS}, code=None)
    assert result.status == "error"
    assert "tool `get_weather`" in result.verdict and "code graders are not enabled here" in result.verdict
    assert "EVALSITE_CODE_GRADERS" in result.error


def test_a_handler_that_cannot_be_loaded_makes_the_conversation_an_error(fake_openai, tmp_path):
    (tmp_path / "handlers.py").write_text(HANDLERS)
    source = _suite("    code: handlers:get_forecast\n")
    result = _play(fake_openai, source, {"handlers.py": HANDLERS}, code=CodeRunner(folder=tmp_path))
    assert result.status == "error" and "cannot load handlers:get_forecast" in result.verdict


def test_a_server_without_code_graders_refuses_a_suite_with_a_code_tool_at_launch():
    suite = load_suite(_suite("    code: handlers:get_weather\n"), files={"handlers.py": HANDLERS})
    refusal = launch_refusal(suite)
    assert refusal is not None and "tools[0].code" in refusal
    # Named as what it is: a tool, not a check.
    assert "tools answered by `code` (tools[0].code)" in refusal and "code checks" not in refusal


def test_a_handlers_file_must_be_attached_and_grading_keys_are_refused():
    with pytest.raises(SuiteError) as missing:
        load_suite(_suite("    code: handlers:get_weather\n"))
    assert "file `handlers.py` is not attached" in str(missing.value)
    with pytest.raises(SuiteError) as graded:
        load_suite(
            _suite("    code: {function: handlers:get_weather, threshold: 0.5}\n"), files={"handlers.py": ""}
        )
    assert "tools[0].code.threshold" in str(graded.value)


# --- llm -------------------------------------------------------------------------------------------------


def test_the_judge_plays_the_tool_from_its_description_and_its_tokens_count(fake_openai):
    fake_openai.rule(TOOL_MODEL, '```json\n{"temperature": 18, "sky": "rain"}\n```', where="system")
    source = _suite("    llm: true\n")
    result = _play(fake_openai, source)
    (asked,) = _tool_model_requests(fake_openai)
    assert asked["model"] == "judge-m" and "tools" not in asked
    system = asked["messages"][0]["content"]
    assert "Current weather for a city, as JSON" in system and '"required": ["city"]' in system
    assert asked["messages"][1:] == [{"role": "user", "content": '{"city": "Paris"}'}]
    (turn,) = result.turns
    (call,) = turn.tool_calls
    assert (call.source, call.result) == ("llm", '{"temperature": 18, "sky": "rain"}')
    assert turn.response == 'Tool results: {"temperature": 18, "sky": "rain"}'
    assert call.usage is not None and call.usage.total_tokens > 0
    assert turn.judge_usage.total_tokens == call.usage.total_tokens
    assert result.totals.judge_tokens == call.usage.total_tokens


def test_the_tool_model_sees_its_earlier_calls_and_answers_in_the_conversation(fake_openai):
    # Keyed by the call's arguments; the answer depends on how many of its own answers it is shown.
    fake_openai.script('{"city": "Paris"}', ["order 7 booked", "order 7 is still booked"])
    source = _suite("    llm: true\n", _evals("[Weather in Paris?, And again in Paris?]", key="input"))
    result = _play(fake_openai, source)
    first, second = (turn.tool_calls[0].result for turn in result.turns)
    assert (first, second) == ("order 7 booked", "order 7 is still booked")
    later = _tool_model_requests(fake_openai)[-1]["messages"][1:]
    assert later == [
        {"role": "user", "content": '{"city": "Paris"}'},
        {"role": "assistant", "content": "order 7 booked"},
        {"role": "user", "content": '{"city": "Paris"}'},
    ]


def test_the_tool_model_remembers_earlier_calls_of_the_same_round(fake_openai):
    fake_openai.script(
        "Weather in Paris?",
        [Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}},
                           {"name": "get_weather", "arguments": {"city": "Rome"}}]), "done"],
    )  # fmt: skip
    source = _suite("    llm: {instructions: It rains everywhere.}\n")
    _play(fake_openai, source)
    first, second = _tool_model_requests(fake_openai)
    assert "Instructions: It rains everywhere." in first["messages"][0]["content"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][-1]["content"] == '{"city": "Rome"}'


def test_a_named_tool_model_is_resolved_as_a_judges_model(fake_openai):
    source = _suite("    llm: {model: fake/tool-model}\n")
    _play(fake_openai, source)
    (asked,) = _tool_model_requests(fake_openai)
    assert asked["model"] == "tool-model"


def test_a_tool_model_that_fails_makes_the_conversation_an_error(fake_openai):
    fake_openai.fail_next(1, status=500, first_user='{"city": "Paris"}')
    result = _play(fake_openai, _suite("    llm: true\n"))
    assert result.status == "error" and result.verdict.startswith("error on turn 1")


# --- replay ----------------------------------------------------------------------------------------------


def _recorded(*results) -> str:
    return json.dumps({"format": RESULTS_FORMAT, "evals": [r.model_dump(mode="json") for r in results]})


def test_replay_sends_the_stored_result_and_no_tool_model_is_called(fake_openai):
    fake_openai.rule(TOOL_MODEL, "18 degrees and rain", where="system")
    recorded = _play(fake_openai, _suite("    llm: true\n"))
    fake_openai.reset()
    files = {"recorded.json": _recorded(recorded)}
    replayed = _play(fake_openai, _suite("    replay: recorded.json\n    llm: true\n"), files)
    assert _tool_model_requests(fake_openai) == []
    (call,) = replayed.turns[0].tool_calls
    assert (call.source, call.result) == ("replay", "18 degrees and rain")
    assert replayed.turns[0].response == recorded.turns[0].response
    assert replayed.turns[0].judge_usage.total_tokens == 0


def test_a_call_that_was_not_recorded_goes_to_the_next_source(fake_openai):
    fake_openai.rule(TOOL_MODEL, "sunny", where="system")
    files = {"recorded.json": _recorded(_play(fake_openai, _suite("    llm: true\n")))}
    lyon = _evals("Weather in Lyon?")
    passed_on = _play(fake_openai, _suite("    replay: recorded.json\n    returns: mild\n", lyon), files)
    assert passed_on.turns[0].tool_calls[0].source == "returns"
    alone = _play(fake_openai, _suite("    replay: recorded.json\n", lyon), files)
    assert alone.turns[0].tool_calls[0].error == "`get_weather` has no result for these arguments"


def test_replay_prefers_the_same_eval_and_gives_a_stored_error_as_an_error(fake_openai):
    fake_openai.rule(TOOL_MODEL, "from elsewhere", where="system")
    other = _play(fake_openai, _suite("    llm: true\n"), eval_id="other")
    stub = _suite("    error: the station is down\n")
    same = _play(fake_openai, stub, eval_id="mine")
    files = {"recorded.json": _recorded(other, same)}
    replayed = _play(fake_openai, _suite("    replay: recorded.json\n"), files, eval_id="mine")
    (call,) = replayed.turns[0].tool_calls
    assert (call.source, call.error) == ("replay", "the station is down")
    elsewhere = _play(fake_openai, _suite("    replay: recorded.json\n"), files, eval_id="third")
    assert elsewhere.turns[0].tool_calls[0].result == "from elsewhere"


def test_a_replayed_file_must_be_attached_and_be_a_results_document():
    source = _suite("    replay: recorded.json\n")
    assert "recorded.json" in file_references(source)
    with pytest.raises(SuiteError) as missing:
        load_suite(source)
    assert "tools[0].replay" in str(missing.value) and "file `recorded.json` is not attached" in str(
        missing.value
    )
    with pytest.raises(SuiteError) as other:
        load_suite(source, files={"recorded.json": '{"evals": []}'})
    assert "recorded.json: it is not an `evalsite.results/1` document" in str(other.value)


def test_the_recorded_calls_are_read_on_loading_and_travel_with_a_stored_parse(fake_openai):
    fake_openai.rule(TOOL_MODEL, "sunny", where="system")
    files = {"recorded.json": _recorded(_play(fake_openai, _suite("    llm: true\n")))}
    source = _suite("    replay: recorded.json\n")
    saved = load_saved_suite(source, files)
    (call,) = saved.tools[0].recorded
    assert (call.name, call.arguments, call.result, call.prompt) == (
        "get_weather",
        {"city": "Paris"},
        "sunny",
        "Weather in Paris?",
    )
    # What a worker reads back: the parse stored as JSON, without the attached files.
    stored = Suite.model_validate_json(saved.model_dump_json(exclude_defaults=True))
    assert stored.tools[0].recorded == saved.tools[0].recorded
    assert saved.files_used() == ["recorded.json"]  # the suite's page asks before the file is removed
    with pytest.raises(SuiteError) as by_hand:
        load_suite(_suite("    recorded: []\n"))
    assert "tools[0].recorded" in str(by_hand.value)
