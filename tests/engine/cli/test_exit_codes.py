"""`evalsite run` as a CI job runs it: exit codes, what stderr says, user errors in one line, Ctrl-C.

Every command runs in a subprocess with the venv's `evalsite` script and a fresh shell's environment."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from tests.conftest import FAKE_KEY
from tests.engine.standalone import (
    EVALSITE,
    SUITE,
    as_from_a_terminal,
    assert_one_line_error,
    evalsite,
    fresh_env,
    run_on,
)
from tests.fakeopenai import Reply


def test_exit_0_when_every_eval_passes(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    assert run_on(fake, suite).returncode == 0


def test_exit_1_when_an_eval_fails(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["5"])
    result = run_on(fake, suite)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""


def test_exit_1_when_a_gate_fails_though_every_eval_passed(tmp_path):
    path = tmp_path / "gated.yaml"
    path.write_text(
        SUITE.replace(
            "model: gpt-test",
            "model: mock\nmock: {default: '105 and 4'}\ngates: [{metric: avg, op: '<', value: 1}]",
        )
    )
    result = evalsite("run", str(path), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 passed, 0 failed" in result.stdout and "Gate avg < 1: ❌ FAIL" in result.stdout


def test_a_wait_to_retry_is_said_on_stderr(fake, suite):
    """Calls retry for minutes now: the terminal says what it waits for instead of looking hung."""
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    fake.fail_next(1, status=429, retry_after=1, first_user="What is 2 + 2?")
    result = run_on(fake, suite)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "default: waiting for rate limit, retrying in 1 s" in result.stderr


def test_exit_3_on_a_reply_cut_off_says_so_not_the_key(fake, suite):
    """A reply that did not finish is an error, not a FAIL, and the advice is the suite's rule, not the key."""
    fake.script("What is 15 * 7?", [Reply("15 * 7 is", finish_reason="length")])
    fake.script("What is 2 + 2?", ["4"])
    result = run_on(fake, suite)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "⚠ Not a finished reply: reply cut off at the token limit (finish_reason: length)" in result.stdout
    assert "1 of 2 conversations ended at a reply that did not finish" in result.stderr
    assert "endpoint error" not in result.stderr and "OPENAI_API_KEY" not in result.stderr


def test_exit_3_on_401(fake, suite):
    result = run_on(fake, suite, key="sk-wrong")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "💥 ERROR (HTTP 401 from default" in result.stdout
    assert "Traceback" not in result.stderr
    assert "2 of 2 conversations ended in an endpoint error" in result.stderr
    assert "OPENAI_API_KEY" in result.stderr


def test_exit_3_on_a_rate_limit_and_a_refused_request_advises_on_each_not_the_key(fake, suite):
    """A 429 whose Retry-After is past the retry budget says why it was not waited out, and neither it nor
    a 400 is a matter of the endpoint's URL or key."""
    fake.fail_next(50, status=429, retry_after=40, first_user="What is 15 * 7?")
    fake.script("What is 2 + 2?", [Reply(status=400, text="unknown parameter: top_k")])
    result = run_on(fake, suite, EVALSITE_RETRY_SECONDS="20")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Retry-After 40 s is longer than the 20 s retry budget (EVALSITE_RETRY_SECONDS)" in result.stdout
    limited, refused = result.stderr.splitlines()
    assert limited.startswith("1 of 2 conversations ended in an endpoint error (HTTP 429 from default")
    assert limited.endswith("; the endpoint kept rate-limiting: lower --concurrency (or the endpoint's "
                            "concurrency), allow a longer retry budget (EVALSITE_RETRY_SECONDS, or the "
                            "endpoint's retry for), or check the account's rate limits and quota")  # fmt: skip
    assert refused.startswith("1 of 2 conversations ended in an endpoint error (HTTP 400 from default")
    assert (
        "the endpoint refused the request: check the model's name and the suite's model_settings" in refused
    )
    assert "OPENAI_API_KEY" not in result.stderr


def test_exit_3_when_the_endpoint_is_unreachable(tmp_path, suite):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x", "EVALSITE_MAX_RETRIES": "0"}
    result = evalsite("run", str(suite), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path), **env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot reach default at http://127.0.0.1:9/v1" in result.stdout


def test_exit_3_outranks_1_when_evals_fail_and_others_error(fake, suite):
    fake.script("What is 15 * 7?", ["100"])  # fails
    fake.script("What is 2 + 2?", [Reply(status=500, text="overloaded")])  # errors after its retry
    out = suite.parent / "out.json"
    result = run_on(fake, suite, "--json", str(out))
    assert result.returncode == 3, result.stdout + result.stderr
    assert re.search(r"Summary: 0 passed, 1 failed, 1 errors? of 2 evals", result.stdout)
    assert "1 of 2 conversations ended in an endpoint error" in result.stderr
    assert json.loads(out.read_text())["status"] == "error"  # the results are still written


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["run", "nope.yaml"], ["nope.yaml: no such file", "relative to"]),
        (["validate", "nope.yaml"], ["nope.yaml: no such file"]),
        (["run", "."], [".: is a folder; give a suite file, e.g."]),
        (["run", "good.yaml", "--model", ""], ["--model is empty"]),
        (["run", "good.yaml", "--model", " "], ["--model is empty"]),
        (["run", "good.yaml", "--model", "fake/x"], ["no endpoint named `fake`", "make setup"]),
        (["run", "good.yaml", "--model", "fake/"], ["--model `fake/`: write a model id, `endpoint/model`"]),
        (["run", "good.yaml", "--json", "subdir"], ["--json subdir: is a folder"]),
        (["run", "good.yaml", "--json", "no/such/out.json"], ["there is no folder no/such"]),
    ],
)
def test_user_errors_are_one_line_with_exit_2(folder, args, fragments):
    result = evalsite(*args, cwd=folder, EVALSITE_VAR_DIR=str(folder))
    lines = result.stderr.splitlines()
    if args[0] == "validate":  # the file's own line, then the count
        assert lines[-1] == "evalsite: 1 of 1 file has problems"
        lines = lines[:-1]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert all(fragment in lines[0] for fragment in fragments), lines[0]
    assert result.stdout == ""


def test_every_model_the_suite_names_is_checked_before_anything_runs(fake, tmp_path):
    """A judge or simulated user on an endpoint that is not there is refused up front, whether or not
    OPENAI_BASE_URL is set: the run would send it whole to the default endpoint, a typo or not. Written after
    `default/`, the id goes whole to the default endpoint."""
    path = tmp_path / "refs.yaml"
    path.write_text(
        "name: refs\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n"
        "      - llm_judge: {criteria: polite, model: faek/judge}\n"
    )
    default = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY}
    for env in ({}, default):
        refused = evalsite("run", str(path), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path), **env)
        assert_one_line_error(
            refused, 2, "evals[0].checks[0].llm_judge.model `faek/judge`: ", "no endpoint named `faek`",
            "`default/faek/judge` sends `faek/judge` whole to the default endpoint",
        )  # fmt: skip
    assert fake.chat_requests() == []

    fake.rule("polite", '{"score": 1, "reason": "polite"}', where="any")
    path.write_text(path.read_text().replace("model: faek/judge", "model: default/faek/judge"))
    sent = evalsite("run", str(path), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path), **default)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert sent.stderr == ""
    assert {body["model"] for body in fake.chat_requests()} == {"faek/judge"}


@pytest.mark.parametrize(
    ("suite", "expected"),
    [
        (
            "missing-data.yaml",
            [
                "missing-data.yaml:4:10 dataset: file `rows.jsonl` is not attached (attached: none)",
                "missing-data.yaml: attached files are read from its folder ({folder}), which has no file "
                "rows.jsonl",
            ],
        ),
        ("bad-data.yaml", ["bad.jsonl:2: not valid JSON: "]),
        ("bad-csv.yaml", ["rows.csv:1: the header has no `input` column (columns: question, answer)"]),
    ],
)
@pytest.mark.parametrize("command", ["run", "validate"])
def test_unreadable_dataset_names_the_file_and_line(folder, suite, expected, command):
    """Problems in an attached file are located in that file (next to the suite), not in the suite."""
    result = evalsite(command, suite, cwd=folder, EVALSITE_VAR_DIR=str(folder))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    for line, wanted in zip(lines, expected, strict=False):
        assert line.startswith(wanted.format(folder=folder)), result.stderr
    assert len(lines) == len(expected) + 1  # and the summary line


def test_ctrl_c_stops_the_run_with_one_line(fake, suite):
    """Interrupting a run is the user's choice, not a crash: one line, exit 130, no traceback."""
    fake.script("What is 15 * 7?", [Reply(text="105", latency=30)])
    fake.script("What is 2 + 2?", [Reply(text="4", latency=30)])
    env = {
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": FAKE_KEY,
        "EVALSITE_VAR_DIR": str(suite.parent),
    }
    process = subprocess.Popen(
        [str(EVALSITE), "run", str(suite)], cwd=suite.parent, env=fresh_env(**env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not fake.requests and time.monotonic() < deadline:  # a conversation is in flight
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert time.monotonic() - interrupted < 15  # not after the replies in flight (30 s)
    assert (
        err.strip()
        == "evalsite: interrupted; 0 of 2 conversations had ended, an unknown amount spent (no prices for "
        "endpoint default); no summary was written"
    )
