"""The database pause board (runs/pauses.py): a 429's pause shared between worker processes, read sparingly."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.retries import LocalPauseBoard


@pytest.mark.django_db
def test_the_database_board_shares_a_pause_between_processes():
    """Two boards with their own in-process state stand for two worker processes."""
    from runs.pauses import DatabasePauseBoard

    first = DatabasePauseBoard(local=LocalPauseBoard(), refresh=0)
    second = DatabasePauseBoard(local=LocalPauseBoard(), refresh=0)
    assert second.paused_until("fake") == 0
    until = time.time() + 5
    first.pause("fake", until)
    assert second.paused_until("fake") == pytest.approx(until, abs=0.01)
    second.pause("fake", until - 3)  # a shorter pause does not cut a longer one short
    assert first.paused_until("fake") == pytest.approx(until, abs=0.01)
    assert first.paused_until("other") == 0


@pytest.mark.django_db
def test_the_database_board_is_read_at_most_once_a_second(django_assert_num_queries):
    from runs.pauses import DatabasePauseBoard

    board = DatabasePauseBoard(local=LocalPauseBoard())
    with django_assert_num_queries(1):
        for _ in range(50):
            board.paused_until("fake")


def _eventually(read, expected: float) -> float:
    deadline = time.monotonic() + 10
    while (value := read()) != pytest.approx(expected, abs=0.01) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


@pytest.mark.django_db(transaction=True)
def test_on_an_event_loop_the_board_shares_a_pause_through_a_thread_of_its_own():
    """A worker's model calls run on an event loop (runs.worker.loop), where a query would raise (Django refuses
    them there) and hold every conversation of the process: the board writes and reads the database aside,
    and the loop's own process knows its pause at once."""
    from runs.pauses import DatabasePauseBoard

    worker = DatabasePauseBoard(local=LocalPauseBoard(), refresh=0)
    other = DatabasePauseBoard(local=LocalPauseBoard(), refresh=0)
    until = time.time() + 30

    async def a_call_meets_a_rate_limit() -> float:
        worker.pause("fake", until)
        return worker.paused_until("fake")

    assert asyncio.run(a_call_meets_a_rate_limit()) == pytest.approx(until, abs=0.01)
    assert _eventually(lambda: other.paused_until("fake"), until) == pytest.approx(until, abs=0.01)

    # The other way round: a pause another process wrote reaches the loop with the board's next read.
    later = until + 30
    other.pause("fake", later)

    async def read_on_the_loop() -> float:
        first = worker.paused_until("fake")  # what was read before: no query here
        assert first == pytest.approx(until, abs=0.01)
        deadline = time.monotonic() + 10
        while worker.paused_until("fake") < later - 0.01 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return worker.paused_until("fake")

    assert asyncio.run(read_on_the_loop()) == pytest.approx(later, abs=0.01)
