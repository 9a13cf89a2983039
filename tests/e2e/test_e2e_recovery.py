"""Workers that die, stop or lose their broker: the run goes on within seconds, every turn written once.

Real `celery worker` processes against the fake OpenAI server. The default lease (60 s) is kept on purpose:
recovery must come from the workers' beats, hand-backs and resends, not from a lapsed lease.
"""

from __future__ import annotations

import shutil
import time
from contextlib import contextmanager

import pytest
from django.conf import settings

from runs import services
from runs.models import Conversation, Status, Turn, Worker
from suites.services import create_suite
from tests.e2e.conftest import _purge_broker, wait_for_run
from tests.live_services import RedisServer

pytestmark = [pytest.mark.e2e]

TURNS = 5


def _suite(evals: int, turns: int = TURNS) -> str:
    """Each eval passes on its last turn only: every conversation plays `turns` turns."""
    body = ""
    for i in range(evals):
        body += f"  - prompt: count {i}\n    checks:\n"
        for depth in range(turns):
            pad = " " * (6 + 4 * depth)
            body += f"{pad}- match: '*done*'\n"
            if depth < turns - 1:
                body += f"{pad}- prompt: next\n{pad}  checks:\n"
    return f"name: long\nmodel: fake/m\nevals:\n{body}"


def _script(fake_openai, evals: int, turns: int = TURNS) -> None:
    for i in range(evals):
        fake_openai.script(f"count {i}", [*(f"step {n}" for n in range(1, turns)), "done"])


def _launch(user, source: str, concurrency: int):
    suite = create_suite(owner=user, source=source)
    return services.create_run(version=suite.latest_version, user=user, concurrency=concurrency)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _held_by(worker, run) -> set[int]:
    """The run's conversations this worker process is playing now (a worker's name carries its pid)."""
    return {
        pk
        for pk, name in Conversation.objects.filter(run=run, status=Status.RUNNING).values_list(
            "pk", "worker"
        )
        if f":{worker.process.pid}:" in name
    }


def _playing(workers, run, turns_at_least: int = 6):
    """Wait until the run is under way and one of the workers holds some of it: that worker, the other, and
    what it holds. Which worker the broker hands each conversation to is chance, so either may be it."""
    found: list = []

    def one_holds() -> bool:
        if Turn.objects.filter(conversation__run=run).count() < turns_at_least:
            return False
        for worker in workers:
            held = _held_by(worker, run)
            if held:
                found[:] = [worker, next(w for w in workers if w is not worker), held]
                return True
        return False

    _wait(one_holds, 30, "a worker to play part of the run")
    return tuple(found)


def _assert_every_turn_once(run, turns: int = TURNS) -> None:
    for conversation in run.conversations.all():
        positions = list(conversation.turns.values_list("position", flat=True))
        assert positions == list(range(1, turns + 1)), f"{conversation.eval_id}: {positions}"
        assert conversation.verdict == f"passed on turn {turns}"


def _longest_pause(run) -> float:
    """The longest time with no turn written, from the run's first turn to its last."""
    stamps = sorted(Turn.objects.filter(conversation__run=run).values_list("created_at", flat=True))
    return max((later - earlier).total_seconds() for earlier, later in zip(stamps, stamps[1:], strict=False))


def test_a_killed_worker_is_taken_over_within_seconds_not_after_its_lease(
    user, fake_endpoint, fake_openai, start_worker
):
    """kill -9 one of two workers mid-run: the other takes its conversations over once it stops beating
    (5 s), not when their 60 s leases lapse; no turn is lost or written twice."""
    fake_openai.latency = 0.3
    _script(fake_openai, 8)
    workers = [start_worker(), start_worker()]
    run = _launch(user, _suite(8), concurrency=6)
    first, second, held = _playing(workers, run)
    first.kill()

    run = wait_for_run(run, timeout=40)

    assert run.status == Status.PASSED
    _assert_every_turn_once(run)
    assert _longest_pause(run) < 10, "the run stalled until the dead worker's leases lapsed"
    resumed = Conversation.objects.filter(pk__in=held)
    assert all(c.attempt >= 2 for c in resumed), "the dead worker's conversations were resumed by another"
    assert second.alive
    # The dead worker's row is gone; the live one's remains.
    assert not Worker.objects.filter(name__contains=f":{first.process.pid}:").exists()
    assert Worker.objects.filter(name__contains=f":{second.process.pid}:").exists()


def test_a_stopping_worker_hands_its_conversations_back_at_once(
    user, fake_endpoint, fake_openai, start_worker
):
    """SIGTERM: the worker releases what it is playing and the other resumes it now, after the last stored
    turn, instead of the stopping worker playing every conversation to its end first."""
    fake_openai.latency = 0.7
    turns = 6  # 4 s per conversation: far longer than a hand-back takes
    _script(fake_openai, 6, turns)
    workers = [start_worker(), start_worker()]
    run = _launch(user, _suite(6, turns), concurrency=6)
    first, second, held = _playing(workers, run)

    stopped_in = first.terminate()

    assert stopped_in < 10
    run = wait_for_run(run, timeout=40)
    assert run.status == Status.PASSED
    _assert_every_turn_once(run, turns)
    assert _longest_pause(run) < 5
    for conversation in Conversation.objects.filter(pk__in=held):
        assert conversation.attempt >= 2, f"{conversation.eval_id} was not handed over"
        assert f":{second.process.pid}:" in conversation.worker
    assert not Worker.objects.filter(name__contains=f":{first.process.pid}:").exists()


def test_a_worker_that_starts_sends_again_what_was_sent_but_never_claimed(
    user, fake_endpoint, fake_openai, start_worker
):
    """Messages lost with the broker (here: purged before any worker took them) do not leave a run waiting
    for two leases: the next worker to start sends them again at once."""
    _script(fake_openai, 4, 2)
    run = _launch(user, _suite(4, 2), concurrency=4)
    assert run.conversations.filter(dispatched_at__isnull=False).count() == 4
    _purge_broker()

    start_worker()
    run = wait_for_run(run, timeout=20)

    assert run.status == Status.PASSED
    _assert_every_turn_once(run, 2)


# --- a Redis restart -------------------------------------------------------------------------------------


@contextmanager
def _publishing_to(url: str):
    """This test process sends its tasks to `url` too (the run's first conversations are sent from here).
    Celery's configuration holds the broker under its own names and the Django settings' (CELERY_...)."""
    from evalsite.celery import app

    redis = {
        "broker_url": url, "broker_read_url": url, "broker_write_url": url, "CELERY_BROKER_URL": url,
        "broker_transport": None, "CELERY_BROKER_TRANSPORT": None,
        "broker_transport_options": {}, "CELERY_BROKER_TRANSPORT_OPTIONS": {},
    }  # fmt: skip
    saved = {key: app.conf.get(key) for key in redis}
    app.conf.update(redis)
    app._pool, app.amqp._producer_pool = None, None
    try:
        yield
    finally:
        app.conf.update(saved)
        app._pool, app.amqp._producer_pool = None, None


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
def test_workers_survive_a_redis_restart_and_the_run_finishes(user, fake_endpoint, fake_openai, start_worker):
    """Kill redis-server mid-run and start it again 3.5 s later: both workers live on, reconnect, and the
    conversations whose messages died with Redis are sent again, so the run finishes without waiting for
    two leases."""
    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        pytest.skip("runs once, in the SQLite pass: it brings its own redis-server")
    redis = RedisServer()
    redis.start()
    try:
        fake_openai.latency = 0.2
        _script(fake_openai, 24, 3)
        workers = [start_worker(concurrency=5, CELERY_BROKER_URL=redis.url) for _ in range(2)]
        with _publishing_to(redis.url):
            run = _launch(user, _suite(24, 3), concurrency=8)
            _wait(lambda: Turn.objects.filter(conversation__run=run).count() >= 10, 30, "the run to start")
            redis.kill()
            time.sleep(3.5)
            redis.start()

            run = wait_for_run(run, timeout=60)

        dead = [worker for worker in workers if not worker.alive]
        assert not dead, "a worker died with the broker; the end of its log:\n" + "\n".join(
            worker.log_path.read_text(errors="replace")[-4000:] for worker in dead
        )
        assert run.status == Status.PASSED
        _assert_every_turn_once(run, 3)
        assert _longest_pause(run) < 30
    finally:
        redis.kill()
