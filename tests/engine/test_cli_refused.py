"""`evalsite run` when the endpoint refuses a generation setting, three conversations at a time, against the fake
endpoint: the first refusal is the one error and says the endpoint's words; the two conversations in flight with
it, whose calls were sent and refused alike, are stopped, not "not started" nor errors again; the rest never
started. The summary, the lines before it, the stderr line and the JSON all count them so. The same for a
refused `judge_settings` or `user_settings` key, named by its role. (In this process, so that it runs this
checkout's code: tests/engine/cli runs the installed script.)"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from evalsite import terminal
from evalsite.cli import main
from tests.conftest import FAKE_KEY
from tests.fakeopenai import FakeOpenAI

EVALS, AT_ONCE = 12, 3
WORDS = "Unsupported parameter: 'max_tokens' is not supported with this model."

CHECKED = "checks: [{contains: OK}]"
JUDGED = "checks: [{llm_judge: {criteria: Says OK}}]"
SIMULATED = "simulate: {persona: You are a customer., max_turns: 3}, checks: [{contains: OK}]"


@pytest.fixture
def fake(monkeypatch, settings):
    monkeypatch.setattr(terminal, "active", terminal.active)  # the command sets it; put it back after
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeOpenAI(latency=0.2, api_key=FAKE_KEY) as server:
        settings.OPENAI_BASE_URL = server.base_url
        yield server


def run(tmp_path, given: str, eval_keys: str, *args: str) -> tuple[int, str, str, dict]:
    evals = "".join(f"  - {{id: e{n}, prompt: 'question {n}', {eval_keys}}}\n" for n in range(EVALS))
    path = tmp_path / "suite.yaml"
    path.write_text(f"name: refused\nmodel: gpt-test\n{given}evals:\n{evals}")
    out = tmp_path / "out.json"
    argv = ["run", str(path), "--concurrency", str(AT_ONCE), "--json", str(out), *args]
    with redirect_stdout(io.StringIO()) as stdout, redirect_stderr(io.StringIO()) as stderr:
        code = main(argv)
    return code, stdout.getvalue(), stderr.getvalue(), json.loads(out.read_text())


@pytest.mark.parametrize(
    ("given", "eval_keys", "where", "stopped_at"),
    [
        ("model_settings: {max_tokens: 50}\n", CHECKED, "model_settings.max_tokens", "at its first call"),
        # The model answered; its judge's call, or the simulated user's, was refused: the turn is kept.
        ("judge_settings: {max_tokens: 50}\n", JUDGED, "judge_settings.max_tokens", "after 1 turn"),
        ("user_settings: {max_tokens: 50}\n", SIMULATED, "user_settings.max_tokens", "after 1 turn"),
    ],
)
def test_conversations_refused_in_flight_are_stopped_and_the_refusal_said_once(
    fake, tmp_path, given, eval_keys, where, stopped_at
):
    fake.refuse("max_tokens")
    code, printed, said, report = run(tmp_path, given, eval_keys)
    assert code == 3, printed + said
    reason = f"the endpoint refused {where}: {WORDS}"

    # Each refused request is one conversation's: the one error, or one of the stopped.
    refused = [body for body in fake.chat_requests() if "max_tokens" in body]
    statuses = [(e["status"], e["verdict"]) for e in report["evals"]]
    errors = [e for e in report["evals"] if e["status"] == "error"]
    stopped = [e for e in report["evals"] if e["verdict"] == f"stopped {stopped_at}: {reason}"]
    unplayed = [e for e in report["evals"] if e["verdict"] == f"not started: {reason}"]
    assert len(errors) == 1 and errors[0]["error"] == reason, statuses
    assert len(stopped) == AT_ONCE - 1 and len(unplayed) == EVALS - AT_ONCE, statuses
    assert len(refused) == AT_ONCE
    assert {e["status"] for e in stopped + unplayed} == {"cancelled"}
    assert report["stop_reason"] == reason

    assert f"Summary: 0 passed, 0 failed, 1 error, 2 stopped, 9 not started of {EVALS} evals" in printed
    assert f"\nOverall: ⏹ STOPPED (the endpoint refused {where})\n" in printed
    assert printed.count(f"Overall: ⏹ STOPPED ({stopped_at}: the endpoint refused {where})") == AT_ONCE - 1
    assert f"⏹ STOPPED not started (the endpoint refused {where}): Eval " in printed
    # The endpoint's words once on each stream: the error on stdout, and on stderr with what to do.
    assert printed.count(WORDS) == 1
    assert said.splitlines()[-1] == (
        f"{reason.rstrip('.')}; no more conversations were started: remove or change {where} "
        "(in the suite, or the --set that gives it) and run again"
    )


def test_a_refused_setting_given_with_set_is_counted_alike_in_the_quiet_summary(fake, tmp_path):
    fake.refuse("seed", "unrecognized")
    code, printed, said, _ = run(tmp_path, "", CHECKED, "--set", "seed=7", "--quiet")
    assert code == 3, printed + said
    assert len(fake.chat_requests()) == AT_ONCE  # the first wave, each refused; no other asked
    assert printed.splitlines()[0].startswith(
        f"Summary: 0 passed, 0 failed, 1 error, 2 stopped, 9 not started of {EVALS} evals"
    )
    assert printed.splitlines()[1] == "Overall: ⏹ STOPPED (the endpoint refused model_settings.seed)"
