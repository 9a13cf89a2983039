"""The cost limit in `evalsite run`'s runner, on long conversations against the fake endpoint with prices and
latency: the spend counts each turn as it is played (the live line moves before any conversation ends), and
once it reaches the limit the conversations in flight stop before their next model call, their turns kept,
also between the calls of one turn's judges. The run passes its limit by at most the calls out when it was
reached: one per conversation playing."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest

from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.loader import load_suite
from engine.outcomes import Status
from engine.runner import run_suite
from evalsite import terminal
from evalsite.cli import main
from tests.conftest import FAKE_KEY
from tests.fakeopenai import FakeOpenAI

EVALS, TURNS = 8, 6
PLAYING = 4  # conversations at once, so model calls out at once
PRICE_OUTPUT = 100_000  # USD per million completion tokens: each one-token "OK" costs CALL
CALL = PRICE_OUTPUT / 1_000_000
LIMIT = 1.05  # reached on the eleventh call, in the third of six turns
REASON = f"cost limit ${LIMIT:.2f} reached"

LONG = f"name: budget-long\nmodel: gpt-test\nmax_cost: {LIMIT}\nevals:\n" + "".join(
    f"  - id: e{n}\n    turns:\n"
    + "".join(f"      - input: question {n} turn {t}\n" for t in range(1, TURNS + 1))
    + "    checks: [{contains: OK}]\n"
    for n in range(EVALS)
)


@pytest.fixture
def fake():
    with FakeOpenAI(latency=0.2, api_key=FAKE_KEY) as server:
        yield server


def test_the_runner_stops_conversations_in_flight_at_the_limit_and_counts_spend_turn_by_turn(
    fake, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    registry = EndpointRegistry(
        default=EndpointConfig(
            name=DEFAULT, base_url=fake.base_url, api_key_env="OPENAI_API_KEY", price_output=PRICE_OUTPUT
        )
    )
    told: list[tuple[float, int]] = []  # (the spend so far, conversations ended), at each amount spent
    ended: list = []

    def spend(amount: float) -> None:
        told.append(((told[-1][0] if told else 0.0) + amount, len(ended)))

    report = run_suite(
        load_suite(LONG), registry, concurrency=PLAYING, on_spend=spend, on_result=ended.append
    )
    calls = len(fake.chat_requests())
    spent = report.totals.cost
    figures = f"spent ${spent:.2f} on {calls} calls for a limit of ${LIMIT:.2f}: {spent / LIMIT:.2f}x"
    # Reached, and passed by at most the calls out when it was.
    assert LIMIT <= spent < LIMIT + PLAYING * CALL, figures
    assert report.status == Status.CANCELLED and report.stop_reason == REASON
    # The spend moved turn by turn, long before the first conversation ended, and adds up to the report's.
    assert told[0] == (pytest.approx(CALL), 0) and told[-1][0] == pytest.approx(spent)
    assert sum(1 for _, done in told if done == 0) >= PLAYING, told
    # Every call paid for is a turn of the report.
    assert calls == report.totals.turns and spent == pytest.approx(calls * CALL)
    stopped = [e for e in report.evals if e.status == Status.CANCELLED and e.turns]
    unplayed = [e for e in report.evals if e.status == Status.CANCELLED and not e.turns]
    assert stopped and unplayed and len(stopped) + len(unplayed) == EVALS, figures
    for e in stopped:
        assert 0 < len(e.turns) < TURNS and e.verdict == f"stopped after {len(e.turns)} turns: {REASON}"
    assert {e.verdict for e in unplayed} == {f"not started: {REASON}"}


def test_evalsite_run_shows_the_spend_as_turns_are_played_and_exits_3_at_the_limit(
    fake, tmp_path, monkeypatch, settings
):
    monkeypatch.setattr(terminal, "active", terminal.active)  # the command sets it; put it back after
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    settings.OPENAI_BASE_URL = fake.base_url
    settings.EVALSITE_DEFAULT_PRICE_INPUT = 0
    settings.EVALSITE_DEFAULT_PRICE_OUTPUT = PRICE_OUTPUT
    path = tmp_path / "long.yaml"
    path.write_text(LONG.replace(f"max_cost: {LIMIT}\n", ""))
    out = tmp_path / "out.json"
    args = ["--max-cost", str(LIMIT), "--concurrency", str(PLAYING), "--progress-every", "0.05"]
    with redirect_stdout(io.StringIO()) as stdout, redirect_stderr(io.StringIO()) as stderr:
        code = main(["run", str(path), *args, "--json", str(out)])
    printed, said = stdout.getvalue(), stderr.getvalue()
    assert code == 3, printed + said

    # The plain progress line (stderr not a terminal) shows money spent while no conversation has ended.
    lines = re.findall(r"^progress: (\d+)/8 .* · \$(\d+\.\d{4}) · ", said, re.MULTILINE)
    assert any(done == "0" and float(cost) > 0 for done, cost in lines), said

    calls = len(fake.chat_requests())
    report = json.loads(out.read_text())
    spent = report["totals"]["cost"]
    figures = f"spent ${spent:.2f} on {calls} calls for a limit of ${LIMIT:.2f}: {spent / LIMIT:.2f}x"
    assert LIMIT <= spent < LIMIT + PLAYING * CALL and spent == pytest.approx(calls * CALL), figures
    assert report["status"] == "cancelled" and report["stop_reason"] == REASON
    statuses = [e["status"] for e in report["evals"]]
    stopped = sum(1 for e in report["evals"] if e["status"] == "cancelled" and e["turns"])
    assert statuses == ["cancelled"] * EVALS and 0 < stopped < EVALS, statuses
    assert (
        f"stopped: {REASON} (spent ${spent:.2f}; 0 of 8 conversations played, {stopped} stopped mid-way, "
        "the rest not started)"
    ) in said
    assert (
        f"Summary: 0 passed, 0 failed, 0 errors, {stopped} stopped, {EVALS - stopped} not started of "
        in printed
    )
    assert f"\nOverall: ⏹ STOPPED ({REASON})\n" in printed


VERDICT = '{"score": 1, "reason": "ok"}'  # four words: four completion tokens, each call 4 * CALL
JUDGES = 5
JUDGED_LIMIT = 0.6  # passed by the model's reply and the first judge's answer, 0.8 together


def judged(limit: float) -> str:
    """One turn whose reply five judges grade, a call each, under a cost limit."""
    checks = "".join(f"      - llm_judge: {{criteria: Criterion {n}}}\n" for n in range(JUDGES))
    return f"name: judged\nmodel: gpt-test\nmax_cost: {limit}\nevals:\n  - prompt: Question\n    checks:\n{checks}"


def test_the_limit_is_checked_between_the_calls_of_one_turns_judges(fake, monkeypatch):
    """The limit is reached by the first judge's call: the four others are not made, and the conversation stops
    with its turn kept, ungraded, with what it cost; without the check all five judge it, four times over."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    fake.default_reply = VERDICT  # the model's reply too: every call costs the same
    registry = EndpointRegistry(
        default=EndpointConfig(
            name=DEFAULT, base_url=fake.base_url, api_key_env="OPENAI_API_KEY", price_output=PRICE_OUTPUT
        )
    )
    report = run_suite(load_suite(judged(JUDGED_LIMIT)), registry)
    each = 4 * CALL
    assert len(fake.chat_requests()) == 2  # the model's, then one judge's
    reason = f"cost limit ${JUDGED_LIMIT:.2f} reached"
    assert report.status == Status.CANCELLED and report.stop_reason == reason
    (result,) = report.evals
    assert result.status == Status.CANCELLED and result.verdict == f"stopped after 1 turn: {reason}"
    (turn,) = result.turns
    assert turn.passed is None and turn.checks == []  # no verdict on a reply half its judges graded
    assert (turn.cost, turn.judge_cost) == (pytest.approx(each), pytest.approx(each))
    assert report.totals.cost == pytest.approx(2 * each)


def test_under_the_limit_every_judge_grades_the_turn(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    fake.default_reply = VERDICT
    registry = EndpointRegistry(
        default=EndpointConfig(
            name=DEFAULT, base_url=fake.base_url, api_key_env="OPENAI_API_KEY", price_output=PRICE_OUTPUT
        )
    )
    report = run_suite(load_suite(judged(10.0)), registry)
    assert len(fake.chat_requests()) == 1 + JUDGES
    assert report.status == Status.PASSED and len(report.evals[0].turns[0].checks) == JUDGES
