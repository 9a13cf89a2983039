"""End-to-end through a real Celery worker process and the fake OpenAI server.

These run on SQLite + the filesystem broker in the default pass, and again on PostgreSQL + Redis in
`make test-pg`.
"""

from __future__ import annotations

import time

import pytest

from endpoints.models import Endpoint
from runs import services
from runs.models import Conversation, Status, Turn
from tests.e2e.conftest import wait_for_run
from tests.factories import ADD_EVAL, CAPITAL_THINK_AGAIN_EVAL, MULTIPLY_EVAL, demo_suite, launch

pytestmark = [pytest.mark.e2e]

# The demo suite with ids that name the outcome each eval reaches, and a second follow-up on the capital.
TREE_SUITE = demo_suite(
    "\nname: arithmetic\nmodel: fake/test-model\nsystem: You are a calculator.\n",
    (
        ADD_EVAL.replace("id: add", "id: first-try"),
        MULTIPLY_EVAL.replace("id: multiply", "id: second-try"),
        CAPITAL_THINK_AGAIN_EVAL.replace("id: capital", "id: never")
        + '          - prompt: "Hint: purpose-built."\n            checks:\n              - contains: Canberra\n',
    ),
)


def test_tree_outcomes_and_followups_carry_the_conversation(user, fake_endpoint, fake_openai, start_worker):
    """Pass on turn 1, pass on turn 2, fail after 3 turns; every follow-up request carries all prior turns."""
    fake_openai.script("What is 2 + 2?", ["4"])
    fake_openai.script("What is 15 * 7?", ["100", "105"])
    fake_openai.script("What is the capital of Australia?", ["Sydney", "Sydney", "Melbourne"])
    start_worker()
    run = wait_for_run(launch(user, TREE_SUITE))

    assert run.status == Status.FAILED
    verdicts = {c.eval_id: (c.status, c.verdict, c.turn_count) for c in run.conversations.all()}
    assert verdicts == {
        "first-try": ("passed", "passed on turn 1", 1),
        "second-try": ("passed", "passed on turn 2", 2),
        "never": ("failed", "failed after 3 turns", 3),
    }
    follow_up = fake_openai.chat_requests(first_user="What is 15 * 7?")[1]
    assert follow_up["messages"] == [
        {"role": "system", "content": "You are a calculator."},
        {"role": "user", "content": "What is 15 * 7?"},
        {"role": "assistant", "content": "100"},
        {"role": "user", "content": "That answer is incorrect. Please recalculate 15 multiplied by 7."},
    ]
    assert follow_up["model"] == "test-model"
    # A request sent again (a retry, a hand-over on a loaded machine) is the same request: count each once.
    asked = []
    for request in fake_openai.chat_requests(first_user="What is the capital of Australia?"):
        if request["messages"] not in [earlier["messages"] for earlier in asked]:
            asked.append(request)
    third = asked[2]
    assert [m["content"] for m in third["messages"]][-1] == "Hint: purpose-built."
    assert len(third["messages"]) == 6
    second = run.conversations.get(eval_id="second-try")
    records = [turn.record for turn in second.turns.all()]
    assert records[1]["followup_reason"] == 'match "*105*" failed on turn 1'
    # Usage comes from the endpoint's `usage`: the fake counts words (4 of system + 5 of prompt).
    assert records[0]["usage"] == {"prompt_tokens": 9, "completion_tokens": 1, "estimated": False}
    assert second.prompt_tokens == sum(r["usage"]["prompt_tokens"] for r in records)


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("closed_port", "cannot reach fake"),
        ("bad_key", "HTTP 401"),
        ("timeout", "timed out after 0.5s"),
        ("server_errors", "HTTP 500"),
    ],
)
def test_dead_endpoint_marks_conversation_error_and_run_finishes(
    user, fake_endpoint, fake_openai, start_worker, setup, expected
):
    """Endpoint down / 401 / timeout / persistent 5xx: that conversation is `error` with the reason."""
    if setup == "closed_port":
        Endpoint.objects.filter(pk=fake_endpoint.pk).update(base_url="http://127.0.0.1:9/v1")
    elif setup == "bad_key":
        fake_openai.api_key = "sk-something-else"
    elif setup == "timeout":
        Endpoint.objects.filter(pk=fake_endpoint.pk).update(timeout=0.5)
        fake_openai.fail_next(100, hang=3, first_user="What is 2 + 2?")
    elif setup == "server_errors":
        fake_openai.fail_next(100, status=500, first_user="What is 2 + 2?")
    fake_openai.script("What is 15 * 7?", ["105"])
    start_worker()
    try:
        run = wait_for_run(launch(user, TREE_SUITE), timeout=90)
    finally:
        fake_openai.api_key = "sk-test-fake"
    assert run.status == Status.ERROR
    first = run.conversations.get(eval_id="first-try")
    assert first.status == Status.ERROR
    assert expected in first.error
    assert first.turns.count() == 0
    if setup in ("timeout", "server_errors"):
        # Only that conversation's requests fail; the others still get answers.
        assert run.conversations.get(eval_id="second-try").status == Status.PASSED
        assert "gave up after 3 attempts" in first.error


def test_rate_limit_is_retried_honouring_retry_after(user, fake_endpoint, fake_openai, start_worker):
    """A 429 with Retry-After is retried after that delay, once, by the engine's single retry layer."""
    fake_openai.script("What is 2 + 2?", ["4"])
    fake_openai.fail_next(1, status=429, retry_after=0.7, first_user="What is 2 + 2?")
    start_worker()
    run = wait_for_run(
        launch(
            user,
            "name: one\nmodel: fake/m\nevals:\n  - prompt: What is 2 + 2?\n    checks: [{match: '*4*'}]\n",
        )
    )
    assert run.status == Status.PASSED
    logged = [r for r in fake_openai.requests if r["path"] == "/v1/chat/completions"]
    assert [r["status"] for r in logged] == [429, 200]
    assert logged[1]["at"] - logged[0]["at"] >= 0.7


def test_endpoint_cap_limits_conversations_in_flight(user, fake_endpoint, fake_openai, start_worker):
    """Two runs ask for 2 at once each; the endpoint allows 2 across runs, so never more than 2 requests are in
    flight."""
    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=2)
    fake_openai.latency = 0.2
    evals = "".join(f"  - prompt: question {i}\n    checks: [{{match: '*'}}]\n" for i in range(8))
    start_worker(concurrency=10)
    runs = [launch(user, f"name: capped {n}\nmodel: fake/m\nevals:\n{evals}", concurrency=2) for n in (1, 2)]
    assert [wait_for_run(run).status for run in runs] == [Status.PASSED, Status.PASSED]
    assert fake_openai.max_in_flight == 2


def test_run_concurrency_limits_conversations_in_flight(user, fake_endpoint, fake_openai, start_worker):
    """The run's own concurrency (3) caps parallel conversations even when workers have more threads."""
    fake_openai.latency = 0.2
    evals = "".join(f"  - prompt: question {i}\n    checks: [{{match: '*'}}]\n" for i in range(9))
    start_worker(concurrency=10)
    run = wait_for_run(launch(user, f"name: three\nmodel: fake/m\nevals:\n{evals}", concurrency=3))
    assert run.status == Status.PASSED
    assert fake_openai.max_in_flight == 3


def test_cancel_stops_the_run(user, fake_endpoint, fake_openai, start_worker):
    """Cancel: queued conversations never start, running ones stop before their next turn."""
    fake_openai.latency = 0.5
    evals = "".join(
        f"  - prompt: q{i}\n    checks:\n      - equals: never\n      - prompt: again\n        checks: [{{equals: never}}]\n"
        for i in range(6)
    )
    start_worker()
    run = launch(user, f"name: slow\nmodel: fake/m\nevals:\n{evals}", concurrency=2)
    deadline = time.monotonic() + 30
    while not Turn.objects.filter(conversation__run=run).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert services.cancel(run)
    run = wait_for_run(run)
    assert run.status == Status.CANCELLED
    time.sleep(1.5)  # let in-flight turns land
    statuses = list(run.conversations.values_list("status", flat=True))
    assert Status.QUEUED not in statuses and Status.RUNNING not in statuses
    assert statuses.count(Status.CANCELLED) >= 4
    assert len(fake_openai.chat_requests()) < 12


def test_killed_worker_loses_no_turn_and_duplicates_none(user, fake_endpoint, fake_openai, start_worker):
    """SIGKILL mid-run; a new worker resumes after the last stored turn. Stored turns stay as they were."""
    fake_openai.latency = 0.4
    evals = ""
    for i in range(4):
        prompt = f"count {i}"
        fake_openai.script(prompt, ["one", "two", "three", "four", "done"])
        evals += (
            f"  - prompt: {prompt}\n    checks:\n      - match: '*done*'\n      - prompt: next\n        checks:\n"
            "          - match: '*done*'\n          - prompt: next\n            checks:\n"
            "              - match: '*done*'\n              - prompt: next\n                checks:\n"
            "                  - match: '*done*'\n                  - prompt: next\n                    checks:\n"
            "                      - match: '*done*'\n"
        )
    lease = {"EVALSITE_LEASE_SECONDS": "2", "EVALSITE_SWEEP_SECONDS": "0.5"}
    first = start_worker(**lease)
    run = launch(user, f"name: long\nmodel: fake/m\nevals:\n{evals}", concurrency=4)
    deadline = time.monotonic() + 30
    while Turn.objects.filter(conversation__run=run).count() < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    first.kill()
    before = {
        (t.conversation_id, t.position): (t.pk, t.record) for t in Turn.objects.filter(conversation__run=run)
    }
    assert 6 <= len(before) < 20, "the kill should land mid-run"

    start_worker(**lease)
    run = wait_for_run(run, timeout=90)

    assert run.status == Status.PASSED
    for conversation in run.conversations.all():
        positions = list(conversation.turns.values_list("position", flat=True))
        assert positions == [1, 2, 3, 4, 5], f"{conversation.eval_id}: {positions}"
        assert conversation.verdict == "passed on turn 5"
        assert conversation.attempt >= 1
    after = {
        (t.conversation_id, t.position): (t.pk, t.record) for t in Turn.objects.filter(conversation__run=run)
    }
    for key, value in before.items():
        assert after[key] == value, "a stored turn was rewritten"
    assert Conversation.objects.filter(run=run, attempt__gte=2).exists(), "someone had to resume"


@pytest.mark.django_db(transaction=True)
def test_worker_sessions_commit_without_waiting_for_the_flush_and_the_web_does_not():
    """On PostgreSQL a worker's sessions relax synchronous_commit (see settings), every one its connection
    pool opens; others keep the default."""
    from django.db import connections

    from runs.worker.tasks import configure_worker_connections

    def settings_of_new_sessions() -> set[str]:
        # Three at once, so a pool must open more sessions than the ones it already holds.
        sessions = [connections.create_connection("default") for _ in range(3)]
        try:
            values = set()
            for session in sessions:
                with session.cursor() as cursor:
                    cursor.execute("SHOW synchronous_commit")
                    values.add(cursor.fetchone()[0])
            return values
        finally:
            for session in sessions:
                session.close()

    if connections["default"].vendor != "postgresql":
        pytest.skip("synchronous_commit is a PostgreSQL setting; make test-pg runs this")
    assert settings_of_new_sessions() == {"on"}  # a web process never sent worker_init
    options = connections["default"].settings_dict["OPTIONS"]
    before = dict(options)
    from runs import endpoints

    reuse_for = endpoints.reuse_for
    configure_worker_connections()
    try:
        assert settings_of_new_sessions() == {"off"}
    finally:
        options.clear()
        options.update(before)
        endpoints.reuse_for = reuse_for  # later tests must read the endpoints they just changed
        connections["default"].close()
        connections["default"].close_pool()
    assert settings_of_new_sessions() == {"on"}


def test_a_worker_keeps_its_database_connections_from_one_conversation_to_the_next(
    user, fake_endpoint, fake_openai, start_worker
):
    # Celery's Django fixup would close them after every task (CELERY_DB_REUSE_MAX is why it does not), and
    # the pool hands them back at the end of each task, which keeps them open for the next one: on
    # PostgreSQL a closed connection means each conversation starts a new server process.
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL sessions; make test-pg runs this")

    def sessions_so_far() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
            return cursor.fetchone()[0]

    start_worker(concurrency=2)
    time.sleep(1.5)  # the worker's startup sessions (sweeper, first threads) are counted before we start
    before = sessions_so_far()
    evals = "\n".join(
        f"  - {{id: q{i}, prompt: question {i}, checks: [{{contains: OK}}]}}" for i in range(12)
    )
    run = wait_for_run(launch(user, f"name: reuse\nmodel: fake/test-model\nevals:\n{evals}\n", concurrency=2))
    assert run.status == Status.PASSED
    time.sleep(1.5)  # a session is counted when its process reports statistics, at the latest when it ends
    # Two threads play the 12 conversations; closing after each would have opened 12 sessions or more.
    assert sessions_so_far() - before <= 4
