"""End-to-end for the cost limit: a run with `max_cost` played by a real Celery worker against the fake
OpenAI server with prices set stops starting conversations once its spend reaches the limit; the
conversations that finished (and those playing then) are kept, the rest cancelled, and the run says why,
whichever of two workers sees the spend first."""

from __future__ import annotations

import re

import pytest

from engine.options import RunOptions
from runs import services
from runs.models import Run, RunMatrix, Status
from runs.selectors import report
from runs.tokens import create_token
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run
from tests.e2e.test_e2e_ci import evalsite

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


EIGHT = TWENTY.replace("name: budget-e2e", "name: budget-cli").split("  - id: e8\n")[0]
STOPPED = re.compile(
    r"stopped: cost limit \$0\.25 reached \(spent \$(\d\.\d\d); (\d) of 8 conversations played, the rest not "
    r"started\)"
)


def test_evalsite_run_on_a_server_says_the_estimate_first_and_how_far_the_limit_let_it_go(
    live_server, user, fake_endpoint, fake_openai, start_worker, tmp_path
):
    """As a run here says them: what the run may cost, once the server has launched it, before its progress;
    and at the end, what it spent and how many it played. The server works the estimate out: it knows the
    endpoints' prices, which the terminal does not."""
    fake_endpoint.price_output = 100_000  # each one-token "OK" costs $0.10
    fake_endpoint.save()
    start_worker()
    _, token = create_token(user, "ci")
    suite = tmp_path / "budget.yaml"
    suite.write_text(EIGHT)
    result = evalsite(
        str(suite), "--server", live_server.url, "--max-cost", "0.25", "--concurrency", "1",
        token=token, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    (cost,) = [n for n, line in enumerate(lines) if line.startswith("cost: ")]
    assert lines[cost] == (
        "cost: ≈ $160.00 (up to $640.00): 8 conversations × 1 turn, ~3 prompt + 200 completion tokens a call at "
        "$0.00/$100000.00 per M · limit $0.25"
    )
    run = Run.objects.get()
    assert lines[cost - 1].startswith(f"Run {run.pk} of budget-cli v1")  # said once launched
    assert all("conversations done" not in line for line in lines[:cost])  # before any progress
    played = run.conversations.exclude(status=Status.CANCELLED)
    (spent, count) = STOPPED.search(lines[-1]).groups()
    assert int(count) == played.count() >= 3, result.stderr
    assert float(spent) == pytest.approx(0.1 * played.count())


def test_a_matrix_on_a_server_says_each_variants_estimate_and_what_its_limit_left_unplayed(
    live_server, user, fake_endpoint, fake_openai, start_worker, tmp_path
):
    """Each variant's run has the limit of its own: the estimate says so, as a matrix played here does; each
    variant's end counts what it never started and says why; and a variant stopped by its limit is no cancel
    on the server."""
    fake_endpoint.price_output = 100_000
    fake_endpoint.save()
    start_worker()
    _, token = create_token(user, "ci")
    suite = tmp_path / "budget.yaml"
    suite.write_text(EIGHT)
    result = evalsite(
        str(suite), "--server", live_server.url, "--model", "fake/test-model,fake/test-model@seed=1",
        "--max-cost", "0.25", "--concurrency", "1", token=token, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    costs = [line for line in result.stderr.splitlines() if line.startswith("cost: ")]
    assert [line.split(": ")[1] for line in costs] == [
        "fake/test-model",
        "fake/test-model seed=1",
        "both variants",
    ]
    assert costs[2] == "cost: both variants: ≈ $320.00 (up to $1,280.00) · limit $0.25 a variant"
    matrix = RunMatrix.objects.get()
    for number, run in enumerate(matrix.runs.order_by("created_at"), 1):
        label = run.options["label"]
        played = run.conversations.exclude(status=Status.CANCELLED).count()
        assert run.stop_reason == "cost limit $0.25 reached" and played >= 3
        ends = f"[{number}/2] {label}: {played} passed, 0 failed, 0 errors, {8 - played} not started"
        assert f"{ends} (cost limit $0.25 reached) of 8" in result.stdout.splitlines(), result.stdout
        assert STOPPED.search(
            next(line for line in result.stderr.splitlines() if line.startswith(f"{label}: stopped: "))
        )
    assert "cancelled on the server" not in result.stdout + result.stderr
