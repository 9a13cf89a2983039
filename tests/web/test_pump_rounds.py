"""A worker's pump under load holds its rounds a little, so that more messages share each; a light load is
never held."""

from __future__ import annotations

import threading
import time

from runs.worker.pump import Pump


def _noop() -> None:
    """A message the pump's round carries out and nothing else."""


def serving(monkeypatch) -> tuple[Pump, list[tuple[float, int]], list[float], threading.Thread]:
    """A pump serving in a thread, its rounds recorded (when each started, how many messages) but not done,
    and the waits its thread slept."""
    pump = Pump(capacity=10)
    rounds: list[tuple[float, int]] = []
    monkeypatch.setattr(
        pump, "_round", lambda messages, poll: rounds.append((time.monotonic(), len(messages)))
    )
    monkeypatch.setattr(pump, "_note_slow_calls", lambda: None)
    thread = threading.Thread(target=pump.serve, daemon=True)
    slept: list[float] = []
    sleep = time.sleep

    def recorded(seconds: float) -> None:
        if threading.current_thread() is thread:
            slept.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", recorded)
    thread.start()
    return pump, rounds, slept, thread


def test_a_light_load_is_never_held(monkeypatch):
    """One message at a time, more often than ROUND_SECONDS: each round starts at once, never held."""
    pump, rounds, slept, thread = serving(monkeypatch)
    for _ in range(5):
        pump.post(_noop)
        time.sleep(Pump.ROUND_SECONDS / 2)
    pump.stop()
    thread.join(timeout=5)
    assert [size for _, size in rounds[:5]] == [1] * 5
    assert slept == []


def test_under_load_rounds_start_at_most_every_round_seconds_and_gather_what_came(monkeypatch):
    pump, rounds, slept, thread = serving(monkeypatch)
    for _ in range(Pump.BUSY_ROUND * 2):  # a busy round: everything at once
        pump.post(_noop)
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:  # then a message every millisecond
        pump.post(_noop)
        time.sleep(0.001)
    pump.stop()
    thread.join(timeout=5)
    busy = [(start, size) for start, size in rounds if size >= Pump.BUSY_ROUND]
    assert len(busy) >= 3, rounds
    gaps = [later - earlier for (earlier, _), (later, _) in zip(busy, busy[1:], strict=False)]
    assert min(gaps) >= Pump.ROUND_SECONDS * 0.9, gaps
    assert slept and max(slept) <= Pump.ROUND_SECONDS
    assert len(rounds) < 50  # not a round per message (about 200 of them)
