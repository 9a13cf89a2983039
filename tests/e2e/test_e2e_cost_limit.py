"""End-to-end for the cost limit: a run with `max_cost` played by a real Celery worker against the fake
OpenAI server with prices set stops starting conversations once its spend reaches the limit; the
conversations that finished (and those playing then) are kept, the rest cancelled, and the run says why,
whichever of two workers sees the spend first."""

from __future__ import annotations

import pytest

from engine.options import RunOptions
from runs import services
from runs.models import Status
from runs.selectors import report
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

TWENTY = "name: budget-e2e\nmodel: fake/test-model\nevals:\n" + "".join(
    f"  - id: e{n}\n    input: question {n}\n    checks: [{{contains: OK}}]\n" for n in range(20)
)


def test_a_run_over_budget_stops_with_its_finished_conversations_kept(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_endpoint.price_output = 100_000  # USD per million: each one-token "OK" costs $0.10
    fake_endpoint.save()
    fake_openai.latency = 0.5  # five rounds of 0.5 s: the run outlasts the checks a second apart
    start_worker(concurrency=2)  # two workers, each summing the run's spend on its own
    start_worker(concurrency=2)
    suite = create_suite(owner=user, source=TWENTY)
    run = services.create_run(
        version=suite.latest_version, user=user, concurrency=4, options=RunOptions(max_cost=0.45)
    )
    run = wait_for_run(run)
    assert run.status == Status.CANCELLED, list(run.conversations.values_list("cost", "status"))[:5]
    assert run.stop_reason == "cost limit $0.45 reached"
    statuses = dict(run.conversations.values_list("index", "status"))
    played = [index for index, status in statuses.items() if status == Status.PASSED]
    cancelled = [index for index, status in statuses.items() if status == Status.CANCELLED]
    # The fifth call reaches the limit; the calls out then finish, at most one per conversation playing (4).
    assert 5 <= len(played) < 5 + 4 and len(played) + len(cancelled) == 20, statuses
    assert len(fake_openai.chat_requests()) == len(played)
    assert sum(run.conversations.values_list("cost", flat=True)) == pytest.approx(0.1 * len(played))

    results = report(run)
    assert results.status == "cancelled" and results.stop_reason == "cost limit $0.45 reached"
    kept = [e for e in results.evals if e.status == "passed"]
    assert len(kept) == len(played) and all(e.turns[0].response == "OK" for e in kept)
    assert {e.verdict for e in results.evals if e.status == "cancelled"} == {
        "not started: cost limit $0.45 reached"
    }


def test_a_run_under_its_limit_plays_everything(user, fake_endpoint, fake_openai, start_worker):
    fake_endpoint.price_output = 100_000
    fake_endpoint.save()
    start_worker()
    suite = create_suite(
        owner=user, source=TWENTY.replace("name: budget-e2e", "name: budget-e2e\nmax_cost: 5")
    )
    run = wait_for_run(services.create_run(version=suite.latest_version, user=user, concurrency=4))
    assert run.status == Status.PASSED and run.stop_reason == ""
    assert run.conversations.filter(status=Status.PASSED).count() == 20
