"""The terminal commands: evalvalidate and evalrun, as a user runs them, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAKE_KEY, ROOT
from tests.fakeopenai import FakeOpenAI

# Not the demo suite: vibecheck's metadata form, with a provider's model name the test checks is sent whole
# to the default endpoint.
SUITE = """\
metadata:
  name: cli-math
  model: default/anthropic/claude-3.5-sonnet
  system_prompt: You are a calculator.
evals:
  - prompt: What is 15 * 7?
    checks:
      - match: "*105*"
      - prompt: That answer is incorrect. Please recalculate 15 multiplied by 7.
        checks:
          - match: "*105*"
  - prompt: What is 2 + 2?
    checks:
      - match: "*4*"
"""


def manage(*args: str, env: dict | None = None, var_dir: Path) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DEV": "1",
                "EVALSITE_VAR_DIR": str(var_dir), **(env or {})}  # fmt: skip
    full_env.pop("DATABASE_URL", None)  # the CLI uses its own embedded database here
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-var")
    result = manage("migrate", "-v0", var_dir=path)
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture
def fake(monkeypatch):
    with FakeOpenAI(api_key=FAKE_KEY) as server:
        yield server


def test_evalvalidate_ok_and_located_problems(tmp_path, var_dir):
    good = tmp_path / "good.yaml"
    good.write_text(SUITE)
    bad = tmp_path / "bad.yaml"
    bad.write_text(SUITE.replace("checks:", "chekcs:", 1))
    ok = manage("evalvalidate", str(good), var_dir=var_dir)
    assert ok.returncode == 0 and "ok — suite 'cli-math', 2 evals" in ok.stdout
    broken = manage("evalvalidate", str(good), str(bad), var_dir=var_dir)
    assert broken.returncode == 2  # invalid suite
    assert f"{bad}:7:5 evals[0].chekcs: unknown key `chekcs` (did you mean `checks`?)" in broken.stderr
    assert broken.stderr.endswith("manage.py evalvalidate: 1 of 2 files has problems\n")


def test_evalrun_default_endpoint_report_json_and_exit_code(tmp_path, var_dir, fake):
    """A model id with a slash of its own goes whole to the default endpoint after `default/`."""
    fake.script("What is 15 * 7?", ["100", "105"])
    fake.script("What is 2 + 2?", ["5"])
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out.json"
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY}
    # --verbose: every turn of every conversation, the passing one's too (the default prints it on a line).
    result = manage("evalrun", str(suite), "--json", str(out), "--verbose", env=env, var_dir=var_dir)
    assert result.returncode == 1, result.stderr  # the second eval fails
    report = result.stdout
    assert "Eval 1: What is 15 * 7?\n  Turn 1:\n    Prompt: What is 15 * 7?\n    Response: 100\n" in report
    assert '❌ FAIL match "*105*"' in report
    assert "Overall: ✅ PASS (succeeded on turn 2)" in report
    assert "Overall: ❌ FAIL (after 1 turn)" in report
    assert {body["model"] for body in fake.chat_requests()} == {"anthropic/claude-3.5-sonnet"}

    data = json.loads(out.read_text())
    assert data["format"] == "evalsite.results/1" and data["status"] == "failed"
    first = data["evals"][0]
    assert (first["status"], first["score"], first["passed_on_turn"]) == ("passed", 1.0, 2)
    assert [turn["prompt"] for turn in first["turns"]][1].startswith("That answer is incorrect")
    assert first["turns"][0]["usage"] == {"prompt_tokens": 9, "completion_tokens": 1, "estimated": False}
    assert first["turns"][0]["checks"][0] == {
        "type": "match", "label": 'match "*105*"', "passed": False, "score": 0.0,
        "reason": "reply does not match", "raw": None, "parsed_from": None, "read_from": None,
        "first_answer": None, "children": [], "judged": None, "judge_reason": None, "scale_note": None,
        "overridden": False, "matched_calls": None, "matched_earlier_calls": None,
    }  # fmt: skip
    assert data["totals"]["evals"] == 2 and data["totals"]["failed"] == 1 and data["totals"]["turns"] == 3


def test_evalrun_refuses_a_prefix_that_names_no_endpoint_off_a_gateway(tmp_path, var_dir):
    """`anthropic/…` names no endpoint, and the default endpoint (OpenAI's own API here) is no gateway that
    takes such an id whole: refused in one line before anything is sent, as a launch on the server is."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.replace("default/anthropic/", "anthropic/"))
    env = {"OPENAI_BASE_URL": "https://api.openai.com/v1", "OPENAI_API_KEY": FAKE_KEY}
    result = manage("evalrun", str(suite), env=env, var_dir=var_dir)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "manage.py evalrun: metadata.model `anthropic/claude-3.5-sonnet`: there is no endpoint named "
        "`anthropic`; the endpoints "
        "are `mock`, `default` (`default/anthropic/claude-3.5-sonnet` sends `anthropic/claude-3.5-sonnet` "
        "whole to the default endpoint)"
    ]


def test_evalrun_model_override_to_mock_exits_0_when_all_pass(tmp_path, var_dir):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: m\nmodel: gpt-4o\nmock:\n  rules: [{when: '*', reply: '105 and 4'}]\nevals:"
        + SUITE.split("evals:")[1]
    )
    result = manage("evalrun", str(suite), "--model", "mock", var_dir=var_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[mock endpoint]" in result.stdout and "2 passed, 0 failed" in result.stdout


def test_evalrun_dead_endpoint_is_an_error_not_a_crash(tmp_path, var_dir):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x", "EVALSITE_MAX_RETRIES": "0"}
    result = manage("evalrun", str(suite), env=env, var_dir=var_dir)
    assert result.returncode == 3  # the endpoint failed
    assert "Traceback" not in result.stderr
    assert "💥 ERROR (cannot reach default at http://127.0.0.1:9/v1" in result.stdout


def test_evalrun_invalid_suite_exits_2(tmp_path, var_dir):
    suite = tmp_path / "suite.yaml"
    suite.write_bytes(b"name: caf\xe9\n")
    result = manage("evalrun", str(suite), var_dir=var_dir)
    assert result.returncode == 2
    assert "not UTF-8" in result.stderr and "nothing was run" in result.stderr


@pytest.mark.parametrize("command", ["evalrun", "evalvalidate"])
def test_evals_of_the_wrong_shape_are_a_located_problem_not_a_crash(tmp_path, var_dir, command):
    # Reading the files a suite attaches walks `evals` before validation does; a number there crashed it.
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: x\nmodel: mock\nevals: 5\n")
    result = manage(command, str(suite), var_dir=var_dir)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{suite}:3:8 evals: expected a list of evals; found the number 5" in result.stderr
