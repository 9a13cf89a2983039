"""The database pause board (runs/pauses.py): a 429's pause shared between worker processes, read sparingly."""

from __future__ import annotations

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
