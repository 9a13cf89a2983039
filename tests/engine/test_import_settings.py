"""Generation settings imported from promptfoo's provider `config` (and its grading provider's) are what the
model and the judge are sent: checked on the request bodies and headers the fake endpoint received."""

from __future__ import annotations

from engine.imports import convert
from engine.loader import load_suite
from tests.engine.promptfoo_play import play, project, verdict


def test_promptfoo_provider_config_becomes_model_and_judge_settings_and_is_sent(fake_openai):
    result = convert(project("promptfoo-settings"))
    suite = load_suite(result.source, files=result.files)
    assert suite.model_settings.model_dump(exclude_none=True) == {
        "temperature": 0.1,
        "max_tokens": 256,
        "top_p": 0.9,
        "seed": 42,
        "stop": ["###"],
        "response_format": {"type": "json_object"},
        "extra_body": {"frequency_penalty": 0.5, "store": False},
        "extra_headers": {"X-Team": "evals"},
    }
    assert suite.judge_settings.model_dump(exclude_none=True) == {"temperature": 0.0, "max_tokens": 100}
    assert (
        "providers.config.temperature → model_settings.temperature" not in result.mapped
    )  # two providers: numbered
    assert "providers[0].config.temperature → model_settings.temperature" in result.mapped
    assert any("settings of another model" in line for line in result.unmapped)

    fake_openai.script("Answer briefly: What is the capital of France?", ["Paris"])
    fake_openai.rule("Names Paris", verdict(1.0))
    report = play(fake_openai, result)
    assert report.evals[0].status == "passed", report.evals[0].verdict
    judging = [entry for entry in fake_openai.requests if "judge" in entry["body"]["messages"][0]["content"]]
    agent = [entry for entry in fake_openai.requests if entry not in judging]
    (sent,) = [entry["body"] for entry in agent]
    assert (sent["temperature"], sent["max_tokens"], sent["seed"], sent["stop"]) == (0.1, 256, 42, ["###"])
    assert (sent["frequency_penalty"], sent["store"], sent["response_format"]) == (
        0.5,
        False,
        {"type": "json_object"},
    )
    assert agent[0]["headers"]["x-team"] == "evals"
    judge = judging
    assert judge and all(
        entry["body"]["temperature"] == 0 and entry["body"]["max_tokens"] == 100 for entry in judge
    )
    assert all("x-team" not in entry["headers"] and "seed" not in entry["body"] for entry in judge)


TARGETS = """\
targets:
  - name: default
    provider: openai
    model: gpt-4.1
  - name: azure_base
    provider: azure
    endpoint: ${{ AZURE_OPENAI_ENDPOINT }}
    api_key: ${{ AZURE_OPENAI_API_KEY }}
    model: gpt-4.1-mini
    temperature: 0.2
    max_output_tokens: 400
"""


def test_the_agentv_target_an_eval_file_names_gives_its_settings(fake_openai):
    files = {**project("agentv-today"), ".agentv/targets.yaml": TARGETS}
    result = convert(files)
    suite = load_suite(result.source, files=result.files)
    assert suite.model_settings.model_dump(exclude_none=True) == {"temperature": 0.2, "max_tokens": 400}
    assert (
        ".agentv/targets.yaml targets[1] (azure_base).max_output_tokens → model_settings.max_tokens"
        in result.mapped
    )
    assert not any("targets.yaml: uploaded" in line for line in result.unmapped)
    report = play(fake_openai, result)
    assert report.evals
    agent = [r for r in fake_openai.chat_requests() if "judge" not in r["messages"][0]["content"]]
    assert agent and all((r["temperature"], r["max_tokens"]) == (0.2, 400) for r in agent)


PROMPTFOO_SCHEMA = """\
description: structured answers
prompts: ["Answer as JSON: {{question}}"]
providers:
  - id: openai:chat:gpt-4o-mini
    config:
      temperature: 0.2
      max_tokens: true
      response_format: file://schema.json
tests:
  - vars: {question: What is the capital of France?}
    assert:
      - type: is-json
"""
SCHEMA = '{"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}'


def test_a_promptfoo_response_format_file_is_read_and_one_bad_setting_leaves_the_others_kept():
    result = convert({"promptfooconfig.yaml": PROMPTFOO_SCHEMA, "schema.json": SCHEMA})
    suite = load_suite(result.source, files=result.files)
    assert suite.model_settings.model_dump(exclude_none=True) == {
        "temperature": 0.2,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}},
        },
    }
    assert any("max_tokens" in line and "not taken" in line for line in result.unmapped)
    assert not result.lost  # the schema file was read, not left over
    missing = convert({"promptfooconfig.yaml": PROMPTFOO_SCHEMA})
    assert load_suite(missing.source).model_settings.temperature == 0.2
    assert any("file://schema.json — the file was not given" in line for line in missing.unmapped)


def test_a_key_in_a_providers_headers_is_left_out_unrepeated_and_the_other_headers_kept():
    source = PROMPTFOO_SCHEMA.replace(
        "      response_format: file://schema.json\n",
        "      headers: {Authorization: Bearer sk-live-123456, X-Team: evals}\n",
    )
    result = convert({"promptfooconfig.yaml": source})
    assert load_suite(result.source).model_settings.extra_headers == {"X-Team": "evals"}
    (said,) = [line for line in result.unmapped if "headers.Authorization" in line]
    assert "write it as {{secret:NAME}}" in said and "sk-live" not in said and "sk-live" not in result.source


PROMPTFOO_WITH_KEYS = """\
providers:
  - id: openai:gpt-4o-mini
    config:
      apiKey: sk-proj-abcdefghijklmnop1234567890
      temperature: 0.3
      headers:
        Authorization: Bearer abcdefghij0123456789
defaultTest:
  options:
    provider:
      id: openai:gpt-4o
      config: {apiKey: plainsecretvalue0987654321, temperature: 0}
tests:
  - vars: {question: hi}
    assert:
      - type: contains
        value: hello
prompts: ["{{question}}"]
"""


def test_a_providers_key_in_clear_reaches_neither_the_report_nor_the_suite():
    result = convert({"promptfooconfig.yaml": PROMPTFOO_WITH_KEYS})
    written = "\n".join([result.source, *result.mapped, *result.unmapped, *result.needs_files])
    for secret in ("abcdefghijklmnop1234567890", "abcdefghij0123456789", "plainsecretvalue0987654321"):
        assert secret[:12] not in written, secret
    assert "providers[0].config.temperature → model_settings.temperature" in result.mapped or (
        "providers.config.temperature → model_settings.temperature" in result.mapped
    )
    assert "defaultTest.options.provider.config.temperature → judge_settings.temperature" in result.mapped
