"""Suite variables (`vars:` and `{{var:NAME}}`, filled when a run is launched) and secrets (`{{secret:NAME}}`,
read from the environment at each model call and never stored)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import suitevars
from engine.clients import EndpointError, with_secrets
from engine.loader import load_suite
from engine.source import SuiteError
from tests.conftest import FAKE_KEY
from tests.fakeopenai import FakeOpenAI

EVALSITE = Path(sys.executable).parent / "evalsite"
SECRET_VALUE = "vars-test-secret-4821-abcdef"

SUITE = """\
name: vars
model: gpt-test
vars:
  project: null
  greeting: Hello
system: "You work on {{var:project}}. Authenticate with {{secret:VARS_TEST_TOKEN}}."
evals:
  - id: issues
    prompt: "{{var:greeting}}, list the issues of {{var:project}}"
    checks:
      - match: "*{{ var:project }}-*"
      - regex: "{{var:project}}-[0-9]+"
      - llm_judge: {criteria: "lists issues of {{var:project}}"}
        prompt: "And the newest in {{var:project}}?"
        checks:
          - contains: "{{var:project}}"
"""


def test_bind_fills_every_text_and_keeps_the_declaration():
    suite = suitevars.bind(load_suite(SUITE), {"project": "ALPHA"})
    assert suite.system == "You work on ALPHA. Authenticate with {{secret:VARS_TEST_TOKEN}}."
    ev = suite.evals[0]
    assert ev.prompt == "Hello, list the issues of ALPHA"
    assert ev.checks[0].match == "*ALPHA-*"
    assert ev.checks[1].regex == "ALPHA-[0-9]+"
    assert ev.checks[2].llm_judge.criteria == "lists issues of ALPHA"
    assert ev.checks[2].prompt == "And the newest in ALPHA?"
    assert ev.checks[2].checks[0].contains == "ALPHA"
    assert suite.vars == {"project": None, "greeting": "Hello"}


def test_a_given_value_wins_over_the_default():
    suite = suitevars.bind(load_suite(SUITE), {"project": "A", "greeting": "Hi"})
    assert suite.evals[0].prompt == "Hi, list the issues of A"


def test_a_variable_without_value_or_default_is_an_error_naming_it():
    with pytest.raises(suitevars.VarsError, match="no value for the suite's variable project"):
        suitevars.bind(load_suite(SUITE), {})


def test_a_value_for_an_undeclared_variable_is_refused():
    with pytest.raises(suitevars.VarsError, match="declares no variable projet"):
        suitevars.bind(load_suite(SUITE), {"project": "A", "projet": "B"})


def test_a_value_that_breaks_a_regex_is_reported_at_launch():
    with pytest.raises(ValueError, match="regex"):
        suitevars.bind(load_suite(SUITE), {"project": "(unclosed"})


def test_a_value_with_braces_in_a_rubric_stays_literal():
    suite = load_suite(
        "name: r\nvars: {word: null}\ngrader: llm_judge\nrubric: 'Says {{var:word}} about {input}'\n"
        "evals:\n  - input: hi\n    ground_truth: x\n"
    )
    bound = suitevars.bind(suite, {"word": "{a}"})
    assert bound.rubric.format(input="Q") == "Says {a} about Q"


def test_an_undeclared_reference_is_a_located_validation_error():
    with pytest.raises(SuiteError) as caught:
        load_suite("name: u\nevals:\n  - prompt: 'about {{var:team}}'\n    checks:\n      - contains: x\n")
    problem = caught.value.problems[0]
    assert (problem.line, problem.path) == (3, "evals[0].prompt")
    assert "{{var:team}} is not declared in `vars`" in problem.message


def test_a_secret_name_must_be_an_environment_variable_name():
    with pytest.raises(SuiteError, match="letters, digits and _"):
        load_suite("name: s\nsystem: '{{secret:linear.apiKey}}'\nevals:\n  - prompt: hi\n    checks:\n"
                   "      - contains: x\n")  # fmt: skip


def test_a_bad_variable_name_is_refused():
    with pytest.raises(SuiteError, match="is not a variable name"):
        load_suite(
            "name: s\nvars: {'9 lives': x}\nevals:\n  - prompt: hi\n    checks:\n      - contains: x\n"
        )


def test_secrets_are_filled_in_the_sent_copy_only(monkeypatch):
    monkeypatch.setenv("VARS_TEST_TOKEN", SECRET_VALUE)
    messages = [
        {"role": "system", "content": "key {{secret:VARS_TEST_TOKEN}}"},
        {"role": "user", "content": "hi"},
    ]
    sent = with_secrets(messages)
    assert sent[0]["content"] == f"key {SECRET_VALUE}"
    assert messages[0]["content"] == "key {{secret:VARS_TEST_TOKEN}}"


def test_secrets_are_filled_in_content_parts_too(monkeypatch):
    monkeypatch.setenv("VARS_TEST_TOKEN", SECRET_VALUE)
    parts = [{"type": "text", "text": "key {{secret:VARS_TEST_TOKEN}}"}]
    assert with_secrets([{"role": "user", "content": parts}])[0]["content"] == [
        {"type": "text", "text": f"key {SECRET_VALUE}"}
    ]
    assert parts[0]["text"] == "key {{secret:VARS_TEST_TOKEN}}"


def test_an_unset_secret_is_an_endpoint_error_naming_the_variable(monkeypatch):
    monkeypatch.delenv("VARS_TEST_TOKEN", raising=False)
    with pytest.raises(EndpointError, match="environment variable VARS_TEST_TOKEN, which is not set"):
        with_secrets([{"role": "user", "content": "{{secret:VARS_TEST_TOKEN}}"}])


def test_parse_assignments():
    assert suitevars.parse_assignments(["a=1", "b.c=x=y", "e="]) == {"a": "1", "b.c": "x=y", "e": ""}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        suitevars.parse_assignments(["nothing"])


# --- the command line, on the fake endpoint ------------------------------------------------------------------


def run(fake: FakeOpenAI, suite: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {
        "PATH": "/usr/bin:/bin", "HOME": str(suite.parent), "EVALSITE_VAR_DIR": str(suite.parent),
        "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY, "EVALSITE_MAX_RETRIES": "1", **env,
    }  # fmt: skip
    return subprocess.run(
        [str(EVALSITE), "run", str(suite), *args], cwd=suite.parent, env=environ, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def fake():
    with FakeOpenAI(api_key=FAKE_KEY) as server:
        yield server


def test_cli_run_sends_the_values_and_never_stores_the_secret(fake, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    # The model echoes the key it was given: the reply is stored redacted.
    fake.script(
        "Hello, list the issues of ALPHA",
        [f"ALPHA-1 and ALPHA-2 (I was told {SECRET_VALUE})", "ALPHA-2 is the newest"],
    )
    fake.rule("lists issues of ALPHA", '{"score": 1, "reason": "it lists them"}', where="any")
    out = tmp_path / "results.json"
    ran = run(fake, suite, "--var", "project=ALPHA", "--json", str(out), VARS_TEST_TOKEN=SECRET_VALUE)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    agent = fake.chat_requests("Hello, list the issues of ALPHA")
    assert agent[0]["messages"][0] == {
        "role": "system", "content": f"You work on ALPHA. Authenticate with {SECRET_VALUE}."
    }  # fmt: skip
    judged = [body for body in fake.chat_requests() if "lists issues of ALPHA" in json.dumps(body)]
    assert len(judged) == 1, "the judge saw the filled criteria"
    # Only the model under test is given the key: the judge sees the conversation as stored.
    assert SECRET_VALUE not in json.dumps(judged)
    assert "Authenticate with {{secret:VARS_TEST_TOKEN}}." in judged[0]["messages"][-1]["content"]

    text = out.read_text()
    assert SECRET_VALUE not in text and SECRET_VALUE not in ran.stdout + ran.stderr
    report = json.loads(text)
    assert report["vars"] == {"project": "ALPHA", "greeting": "Hello"}
    assert report["status"] == "passed"
    result = report["evals"][0]
    assert result["turns"][0]["prompt"] == "Hello, list the issues of ALPHA"
    assert result["system"] == "You work on ALPHA. Authenticate with {{secret:VARS_TEST_TOKEN}}."
    assert "(I was told …cdef)" in result["turns"][0]["response"]


def test_cli_run_without_a_needed_value_names_it_and_sends_nothing(fake, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    ran = run(fake, suite, VARS_TEST_TOKEN=SECRET_VALUE)
    assert ran.returncode == 2
    assert "no value for the suite's variable project" in ran.stderr
    assert fake.chat_requests() == []


def test_cli_run_with_an_unset_secret_is_an_error_not_a_failure(fake, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "results.json"
    ran = run(fake, suite, "--var", "project=ALPHA", "--json", str(out))
    assert ran.returncode == 3, ran.stdout + ran.stderr
    result = json.loads(out.read_text())["evals"][0]
    assert result["status"] == "error"
    assert "environment variable VARS_TEST_TOKEN" in result["error"]
    assert fake.chat_requests() == []


def test_a_secret_outside_what_the_model_is_sent_is_refused():
    with pytest.raises(SuiteError) as caught:
        load_suite("name: s\nevals:\n  - prompt: hi\n    checks:\n      - not_match: '*{{secret:CODE}}*'\n")
    problem = caught.value.problems[0]
    assert problem.path == "evals[0].checks[0].not_match"
    assert "only sent to the model under test" in problem.message
    # Where the model under test is sent it, it is fine.
    load_suite(
        "name: s\nsystem: '{{secret:CODE}}'\nevals:\n  - input: ['a {{secret:CODE}}']\n    ground_truth: x\n"
        "  - turns: [{input: 'b {{secret:CODE}}', checks: [{contains: x}]}]\n"
        "  - prompt: 'c {{secret:CODE}}'\n    checks:\n      - contains: x\n"
        "      - prompt: 'd {{secret:CODE}}'\n        checks: [{contains: y}]\n"
    )


def test_validate_passes_without_values_and_says_which_to_give(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    checked = subprocess.run(
        [str(EVALSITE), "validate", str(suite)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "EVALSITE_VAR_DIR": str(tmp_path)},
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.endswith(
        "ok — suite 'vars', 1 eval; give project when launching (--var NAME=VALUE)\n"
    )
