"""After an outage, calls backing off retry as soon as the endpoint answers anyone, in this process and,
through the database board, in others; a wait the server asked for (Retry-After) is still honoured whole;
our own backoff is capped. Against the real fake server (tests/fakeopenai/)."""

from __future__ import annotations

import threading
import time

import pytest

from engine.clients import BACKOFF_MAX_WAIT, EndpointConfig, OpenAIClient
from engine.retries import LocalPauseBoard
from tests.engine.test_clients import KEY_ENV, client_for
from tests.fakeopenai import FakeOpenAI

ASK = [{"role": "user", "content": "x"}]


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-client")
    with FakeOpenAI(api_key="sk-client") as server:
        yield server


def _config(fake, **overrides) -> EndpointConfig:
    return EndpointConfig(
        name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, retry_seconds=60, **overrides
    )


def _callers(config, board, count: int) -> tuple[list[threading.Thread], list[float], list[Exception]]:
    done: list[float] = []
    errors: list[Exception] = []

    def caller() -> None:
        try:
            OpenAIClient(config, pauses=board).complete("m", ASK)
            done.append(time.monotonic())
        except Exception as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, done, errors


def test_one_answer_after_an_outage_sends_every_waiting_call_again_at_once(fake):
    """8 calls back off through a 4 s outage (waits of up to 8 s by then); the first answer after it tells
    them all to retry, and they finish within a moment of it, not when their backoffs end."""
    fake.down()
    board = LocalPauseBoard()
    config = _config(fake)
    threads, done, errors = _callers(config, board, 8)
    time.sleep(4)
    fake.up()
    OpenAIClient(config, pauses=board).complete("m", ASK)  # answered: a call that never failed
    answered = time.monotonic()
    for thread in threads:
        thread.join(timeout=30)

    assert not errors
    assert len(done) == 8
    assert max(done) - answered < 1.0, f"the last waiting call retried {max(done) - answered:.1f} s later"


def test_a_retry_after_is_waited_out_whole_even_when_the_endpoint_answers_others(fake):
    board = LocalPauseBoard()
    config = _config(fake)
    fake.fail_next(1, status=503, retry_after=2)
    threads, done, errors = _callers(config, board, 1)
    time.sleep(0.5)
    OpenAIClient(config, pauses=board).complete("m", ASK)  # answered while the first call waits
    for thread in threads:
        thread.join(timeout=10)

    assert not errors
    answered = [request for request in fake.requests if request["status"] is not None]
    assert [request["status"] for request in answered] == [503, 200, 200]
    failed, retried = answered[0]["at"], answered[-1]["at"]
    assert retried - failed >= 1.9, "the server's Retry-After was cut short"


def test_our_own_backoff_is_capped_and_a_retry_after_may_be_longer(fake):
    fake.fail_next(30, status=503)
    sleeps: list[float] = []
    client_for(fake, sleeps, retry_seconds=600, retry_max_wait=60).complete("m", ASK)
    assert max(sleeps) <= BACKOFF_MAX_WAIT
    assert max(sleeps) > BACKOFF_MAX_WAIT / 4  # it did grow

    fake.reset()
    fake.fail_next(1, status=503, retry_after=30)
    sleeps = []
    client_for(fake, sleeps, retry_seconds=600, retry_max_wait=60).complete("m", ASK)
    assert sleeps == [30]


@pytest.mark.django_db
def test_the_database_board_tells_other_processes_the_endpoint_is_back():
    from runs.pauses import DatabasePauseBoard

    here = DatabasePauseBoard(local=LocalPauseBoard(), refresh=0)
    there = DatabasePauseBoard(local=LocalPauseBoard(), refresh=0)
    assert there.recovered_at("fake") == 0
    back = time.time()
    here.recovered("fake", back)
    assert there.recovered_at("fake") == pytest.approx(back, abs=0.001)
    assert there.paused_until("fake") < time.time()  # a recovery row pauses nothing

    here.pause("fake", back + 5)  # a later 429 keeps the recovery time
    assert there.paused_until("fake") == pytest.approx(back + 5, abs=0.001)
    assert there.recovered_at("fake") == pytest.approx(back, abs=0.001)


@pytest.mark.django_db
def test_the_database_board_writes_a_recovery_at_most_once_a_refresh(django_assert_num_queries):
    from runs.pauses import DatabasePauseBoard

    board = DatabasePauseBoard(local=LocalPauseBoard(), refresh=60)
    board.recovered("fake", time.time())
    with django_assert_num_queries(0):
        board.recovered("fake", time.time())
