"""The retry layer against the real fake server: a time budget, not a count; Retry-After in its three forms;
waits reported and cut short by a cancel; a 429 pausing the endpoint for every caller, in-process and across
processes through the database."""

from __future__ import annotations

import email.utils
import threading
import time

import pytest

from engine.clients import EndpointConfig, EndpointError, EndpointRegistry, OpenAIClient
from engine.clients.answers import retry_after
from engine.loader import load_suite
from engine.retries import LocalPauseBoard, RetryStopped, retry_hooks
from engine.runner import run_suite
from tests.engine.test_clients import KEY_ENV, FakeTime, client_for
from tests.fakeopenai import FakeOpenAI

ASK = [{"role": "user", "content": "x"}]


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-client")
    with FakeOpenAI(api_key="sk-client") as server:
        yield server


def test_the_budget_is_time_not_a_count(fake):
    """A failing endpoint is retried until the time budget is spent, with growing, capped waits."""
    fake.fail_next(10_000, status=503)
    sleeps: list[float] = []
    with pytest.raises(EndpointError, match=r"HTTP 503 from fake: .*\(gave up after \d+ attempts in \d+ s\)"):
        client_for(fake, sleeps, retry_seconds=120, retry_max_wait=20).complete("m", ASK)
    attempts = len(fake.chat_requests())
    assert attempts == len(sleeps) + 1
    assert attempts > 8  # the old budget was 4 attempts in all
    assert sum(sleeps) <= 120
    assert all(delay <= 20 for delay in sleeps)
    assert max(sleeps[-3:]) > max(sleeps[:3])  # exponential: the window widens


def test_an_outage_shorter_than_the_budget_is_ridden_out(fake):
    fake.fail_next(12, status=503)
    sleeps: list[float] = []
    completion = client_for(fake, sleeps, retry_seconds=300).complete("m", ASK)
    assert completion.text == "OK"
    assert len(fake.chat_requests()) == 13
    assert len(sleeps) == 12


def test_the_budget_holds_in_real_time(fake):
    """2 s of budget against a dead endpoint: several attempts, all inside the budget, then the error."""
    fake.down()
    config = EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, retry_seconds=2)
    started = time.monotonic()
    with pytest.raises(EndpointError, match="HTTP 503"):
        OpenAIClient(config, pauses=LocalPauseBoard()).complete("m", ASK)
    elapsed = time.monotonic() - started
    arrivals = [request["at"] for request in fake.requests]
    assert len(arrivals) >= 3
    assert arrivals[-1] - arrivals[0] <= 2
    assert elapsed < 2.5


def test_a_count_cap_still_applies_when_set(fake):
    fake.fail_next(100, status=500)
    with pytest.raises(EndpointError, match="gave up after 2 attempts"):
        client_for(fake, [], retry_seconds=300, max_retries=1).complete("m", ASK)
    assert len(fake.chat_requests()) == 2


def test_retry_after_is_capped_per_wait_and_never_overruns_the_budget(fake):
    fake.fail_next(1, status=429, retry_after=500)
    sleeps: list[float] = []
    assert client_for(fake, sleeps, retry_seconds=300, retry_max_wait=60).complete("m", ASK).text == "OK"
    assert sleeps == [60]

    fake.fail_next(1, status=429, retry_after=30)
    sleeps = []
    with pytest.raises(EndpointError, match="HTTP 429"):
        client_for(fake, sleeps, retry_seconds=10).complete("m", ASK)
    assert sleeps == []  # waiting 30 s would overrun a 10 s budget: give up now, not after a useless wait


@pytest.mark.parametrize(
    ("name", "setting"),
    [("default", "EVALSITE_RETRY_SECONDS"), ("fake", "the endpoint's retry for in the admin, else EVALSITE_RETRY_SECONDS")],
)  # fmt: skip
def test_a_retry_after_longer_than_the_budget_gives_up_saying_why_and_pauses_no_one(fake, name, setting):
    """The call cannot wait that long, so it errors at once; holding every other call back for a wait no one
    makes would only idle them."""
    fake.fail_next(1, status=429, retry_after=40)
    board = LocalPauseBoard()
    config = EndpointConfig(name=name, base_url=fake.base_url, api_key_env=KEY_ENV, retry_seconds=20)
    fake_time = FakeTime([])
    client = OpenAIClient(config, sleep=fake_time.sleep, clock=fake_time.clock, pauses=board)
    with pytest.raises(EndpointError) as raised:
        client.complete("m", ASK)
    assert str(raised.value) == (
        f"HTTP 429 from {name}: Too Many Requests (fakeopenai); "
        f"Retry-After 40 s is longer than the 20 s retry budget ({setting})"
    )
    assert fake_time.sleeps == [] and board.paused_until(name) == 0
    assert client.complete("m", ASK).text == "OK"  # the next call goes at once


def test_a_retry_after_longer_than_what_is_left_of_the_budget_says_so(fake):
    fake.fail_next(1, status=503, retry_after=6)
    fake.fail_next(1, status=429, retry_after=25)
    sleeps: list[float] = []
    left = r"Retry-After 25 s is longer than the 24 s left of the 30 s retry budget \(.*\) \(gave up after 2"
    with pytest.raises(EndpointError, match=left):
        client_for(fake, sleeps, retry_seconds=30).complete("m", ASK)
    assert sleeps == [6]


def test_one_conversation_meeting_a_long_retry_after_does_not_idle_the_others(fake):
    """The others go on at once, and the one that met it says why it gave up, on the asyncio path too."""
    fake.fail_next(50, status=429, retry_after=40, first_user="R1 2+2?")
    source = "name: ra\nmodel: fake/m\nevals:\n" + "".join(
        f"  - {{id: r{n}, prompt: 'R{n} 2+2?', checks: [{{contains: OK}}]}}\n" for n in (1, 2, 3)
    )
    config = EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, retry_seconds=20)
    registry = EndpointRegistry(config, {"fake": config}, pauses=LocalPauseBoard())
    started = time.monotonic()
    report = run_suite(load_suite(source), registry, concurrency=1)
    assert time.monotonic() - started < 10  # not the 40 s the 429 asked for
    assert [result.status for result in report.evals] == ["error", "passed", "passed"]
    assert report.evals[0].error.endswith("Retry-After 40 s is longer than the 20 s retry budget (the endpoint's "
                                          "retry for in the admin, else EVALSITE_RETRY_SECONDS)")  # fmt: skip


def test_retry_after_in_milliseconds_seconds_or_as_a_date():
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "2"}) == 2
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 <= retry_after({"retry-after": in_ten}) <= 10
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_waits_are_reported_with_their_reason(fake):
    fake.fail_next(1, status=429, retry_after=2)
    fake.fail_next(1, status=503, retry_after=3)
    waits = []
    with retry_hooks(on_wait=waits.append):
        assert client_for(fake, []).complete("m", ASK).text == "OK"
    assert [(wait.reason, wait.seconds, wait.attempts) for wait in waits] == [
        ("waiting for rate limit", 2, 1),
        ("endpoint unavailable (HTTP 503)", 3, 2),
    ]


def test_an_unreachable_endpoint_is_reported_as_such(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    config = EndpointConfig(
        name="gone", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV, retry_seconds=20
    )
    fake_time = FakeTime([])
    client = OpenAIClient(config, sleep=fake_time.sleep, clock=fake_time.clock, pauses=LocalPauseBoard())
    waits = []
    with retry_hooks(on_wait=waits.append), pytest.raises(EndpointError, match="cannot reach gone"):
        client.complete("m", ASK)
    assert waits and {wait.reason for wait in waits} == {"cannot reach endpoint"}
    assert all(wait.seconds >= 1 for wait in waits)  # shorter jitter waits are not worth reporting


def test_a_cancel_cuts_a_wait_short(fake):
    fake.fail_next(1, status=429, retry_after=30)
    asked = []

    def should_stop() -> bool:
        asked.append(True)
        return len(asked) > 2

    sleeps: list[float] = []
    with retry_hooks(should_stop=should_stop), pytest.raises(RetryStopped):
        client_for(fake, sleeps).complete("m", ASK)
    assert sleeps == [1, 1]  # slept in slices, asking before each
    assert len(fake.chat_requests()) == 1


def test_one_429_pauses_the_endpoint_for_every_thread(fake):
    """8 threads call in a loop; one call gets a 429 with Retry-After: 1. No other request arrives until
    the pause is over, and then they all go on."""
    fake.latency = 0.05
    board = LocalPauseBoard()
    config = EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, retry_seconds=30)
    stop = threading.Event()
    errors = []

    def caller() -> None:
        client = OpenAIClient(config, pauses=board)
        while not stop.is_set():
            try:
                client.complete("m", ASK)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(0.4)
    fake.fail_next(1, status=429, retry_after=1)
    time.sleep(2.2)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)

    assert not errors
    logged = [request for request in fake.requests if request["status"] is not None]
    limited = [request for request in logged if request["status"] == 429]
    assert len(limited) == 1
    pause_from = limited[0]["at"] + fake.latency + 0.1  # the 429's answer is out and read
    pause_to = limited[0]["at"] + 1
    during = [request for request in logged if pause_from < request["at"] < pause_to]
    assert during == [], f"{len(during)} requests arrived while the endpoint was paused"
    after = [request for request in logged if request["at"] >= pause_to]
    assert len(after) >= 8  # every thread went on after the pause


def test_a_conversation_waiting_to_retry_reports_the_wait_and_stops_when_cancelled(fake):
    """run_eval passes its on_wait and should_stop to every model call it makes: the wait is reported, and a
    cancel during it ends the conversation as cancelled, not as an error after minutes of retrying."""
    from engine.conversation import EngineContext, run_eval
    from engine.loader import load_suite

    spec = load_suite("name: s\nmodel: m\nevals:\n  - prompt: x\n    checks: [{contains: OK}]\n")
    client = client_for(fake, [])
    ctx = EngineContext(agent=client, model="m", judge=client, judge_model="m")
    fake.fail_next(1, status=429, retry_after=30)
    waits = []
    answers = iter([False, False, True])  # before the turn; during the wait: go on, then stop
    result = run_eval(
        spec.evals[0], 0, "x", ctx, on_wait=waits.append, should_stop=lambda: next(answers, True)
    )
    assert result.status == "cancelled"
    assert [(wait.reason, wait.seconds) for wait in waits] == [("waiting for rate limit", 30)]
    assert len(fake.chat_requests()) == 1
