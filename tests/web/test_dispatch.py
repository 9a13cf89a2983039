"""Dispatch: how many conversations a run may have in flight, per run and per endpoint; and the queued ones a run
stopped short never sends.

No worker here: inside a test transaction the tasks dispatch would send on commit are never sent, so these
tests read what dispatch marked as sent. tests/e2e/test_e2e_worker.py checks the same limits with a real worker.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from endpoints.models import Endpoint
from runs import services
from runs.models import Conversation, Status
from runs.worker import scheduling
from suites.services import create_suite

pytestmark = pytest.mark.django_db


def suite(evals: int, model: str = "capped/model-x") -> str:
    suite.count = getattr(suite, "count", 0) + 1  # suite names are unique per owner
    lines = [f"name: dispatch {suite.count}", f"model: {model}", "evals:"]
    lines += [f"  - {{id: e{i}, prompt: question {i}, checks: [{{contains: x}}]}}" for i in range(evals)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def capped():
    return Endpoint.objects.create(
        name="capped", base_url="http://127.0.0.1:9/v1", api_key_env="CAPPED_KEY", max_concurrency=4
    )


def launch(user, evals: int, concurrency: int, model: str = "capped/model-x"):
    version = create_suite(owner=user, source=suite(evals, model)).latest_version
    return services.create_run(version=version, user=user, concurrency=concurrency)


def sent(run) -> list[str]:
    return list(
        run.conversations.filter(dispatched_at__isnull=False)
        .order_by("index")
        .values_list("eval_id", flat=True)
    )


def end(run, eval_id: str) -> None:
    Conversation.objects.filter(run=run, eval_id=eval_id).update(status=Status.PASSED)


def test_a_run_gets_its_concurrency_first_in_suite_order_and_a_slot_per_ended_conversation(user, capped):
    run = launch(user, evals=6, concurrency=3)
    assert scheduling.dispatch(run.pk) == 3
    assert sent(run) == ["e0", "e1", "e2"]
    assert scheduling.dispatch(run.pk) == 0  # all three still in flight
    end(run, "e1")
    assert scheduling.dispatch(run.pk) == 1
    assert sent(run) == ["e0", "e1", "e2", "e3"]


def test_the_endpoint_cap_holds_across_runs(user, capped):
    first = launch(user, evals=5, concurrency=4)  # each may ask for the whole cap; together they share it
    second = launch(user, evals=5, concurrency=4)
    assert scheduling.dispatch(first.pk) == 4
    assert scheduling.dispatch(second.pk) == 0
    end(first, "e0")
    assert scheduling.dispatch(second.pk) == 1
    assert len(sent(first)) + len(sent(second)) - 1 == 4  # in flight: the cap, counting e0 as ended


def test_more_in_flight_than_allowed_sends_nothing(user, capped):
    """A cap lowered while conversations run leaves more in flight than it allows; the room is negative
    then, and must count as none (SQLite would read a negative LIMIT as no limit)."""
    first = launch(user, evals=5, concurrency=4)
    assert scheduling.dispatch(first.pk) == 4
    Endpoint.objects.filter(pk=capped.pk).update(max_concurrency=1)
    second = launch(user, evals=5, concurrency=1)
    assert scheduling.dispatch(second.pk) == 0
    assert scheduling.dispatch(first.pk) == 0
    assert sent(second) == []


def test_an_ended_run_sends_nothing(user, capped):
    run = launch(user, evals=3, concurrency=2)
    assert services.cancel(run)
    assert scheduling.dispatch(run.pk) == 0
    assert sent(run) == []


def test_the_mock_has_no_endpoint_cap_only_the_runs_concurrency(user):
    runs = [launch(user, evals=30, concurrency=20, model="mock") for _ in range(3)]
    assert [scheduling.dispatch(run.pk) for run in runs] == [20, 20, 20]


def test_cancelling_the_queued_conversations_leaves_the_claimed_and_the_ended_and_may_say_why(user, capped):
    """The one update a user's cancel, a refused setting (runs.worker.stopping) and the cost limit (runs.worker.budget)
    share: only what no worker holds is cancelled, and only the cost limit's say they were not started."""
    run = launch(user, evals=4, concurrency=4)
    end(run, "e0")
    Conversation.objects.filter(run=run, eval_id="e1").update(status=Status.RUNNING)
    now = timezone.now()
    assert scheduling.cancel_queued(run.pk, now) == 2
    cancelled = run.conversations.filter(status=Status.CANCELLED)
    assert sorted(cancelled.values_list("eval_id", flat=True)) == ["e2", "e3"]
    assert set(cancelled.values_list("finished_at", "verdict", "reason")) == {(now, "", "")}
    assert dict(run.conversations.values_list("eval_id", "status"))["e1"] == Status.RUNNING
    assert scheduling.cancel_queued(run.pk, now, reason="cost limit $1.00 reached") == 0  # none left

    other = launch(user, evals=1, concurrency=1)
    assert scheduling.cancel_queued(other.pk, now, reason="cost limit $1.00 reached") == 1
    said = other.conversations.values_list("verdict", "reason").get()
    assert said == ("not started: cost limit $1.00 reached",) * 2


@pytest.mark.e2e  # so that make test-pg, which runs the e2e tests on PostgreSQL, runs it too
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_dispatch_outside_a_transaction_locks_marks_and_commits_in_one_trip(
    user, capped, monkeypatch
):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the one-trip dispatch is PostgreSQL's; make test-pg runs this")
    tasks: list[int] = []
    # No worker here: the tasks are recorded instead of published, so none outlives this test.
    monkeypatch.setattr("runs.worker.tasks.run_conversation.delay", tasks.append)
    first = launch(user, evals=5, concurrency=4)  # dispatched when the launch commits
    assert sorted(tasks) == sorted(first.conversations.filter(index__lt=4).values_list("pk", flat=True))
    assert connection.get_autocommit() and connection.connection.info.transaction_status == 0  # idle
    second = launch(user, evals=5, concurrency=4)
    assert sent(second) == [] and len(tasks) == 4
    end(first, "e0")
    assert scheduling.dispatch(second.pk) == 1
    assert sent(second) == ["e0"] and tasks[-1] == second.conversations.get(index=0).pk


def test_a_worker_reuses_the_endpoints_it_read_for_a_moment_and_the_web_never(monkeypatch):
    from runs import endpoints

    endpoints.build_registry()
    monkeypatch.setattr(endpoints, "reuse_for", 60.0)  # as a worker: runs.worker.tasks sets it at startup
    before = endpoints.build_registry()
    Endpoint.objects.create(name="later", base_url="http://127.0.0.1:9/v1", api_key_env="LATER_KEY")
    assert endpoints.build_registry() is before and "later" not in before.named
    monkeypatch.setattr(endpoints, "reuse_for", 0.0)  # web processes and the CLI read the rows every time
    assert "later" in endpoints.build_registry().named
