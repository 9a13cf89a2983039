"""Generation settings through a real worker: a launch's settings reach the endpoint, and a setting the endpoint
refuses stops the run with the reason, the conversations not yet started cancelled."""

from __future__ import annotations

import pytest

from engine.options import RunOptions
from engine.schema.settings import ModelSettings
from runs import services
from runs.models import Run, Status
from runs.tokens import create_token
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run
from tests.e2e.test_e2e_ci import evalsite
from tests.factories import MOCK_CI_SUITE

pytestmark = [pytest.mark.e2e]

QUESTIONS = 8
SUITE = (
    "name: settings-worker\nmodel: fake/test-model\nmodel_settings: {max_tokens: 100}\nevals:\n"
    + "".join(
        f"  - {{id: q{n}, prompt: 'Question {n}?', checks: [{{contains: OK}}]}}\n" for n in range(QUESTIONS)
    )
)


@pytest.mark.timeout(120)
def test_a_launchs_settings_are_sent_over_the_suites(user, fake_endpoint, fake_openai, start_worker):
    start_worker(concurrency=2)
    suite = create_suite(owner=user, source=SUITE)
    options = RunOptions(model_settings=ModelSettings(temperature=0.3, extra_headers={"X-Run": "e2e"}))
    run = wait_for_run(
        services.create_run(version=suite.latest_version, user=user, options=options), timeout=90
    )
    assert run.status == Status.PASSED
    bodies = fake_openai.chat_requests()
    assert len(bodies) == QUESTIONS
    assert {(body["temperature"], body["max_tokens"]) for body in bodies} == {(0.3, 100)}
    assert {headers.get("x-run") for headers in fake_openai.chat_headers()} == {"e2e"}


@pytest.mark.timeout(120)
def test_a_refused_setting_stops_the_run_once(user, fake_endpoint, fake_openai, start_worker):
    fake_openai.refuse("seed", "unrecognized")
    fake_openai.latency = 0.2
    start_worker(concurrency=1)
    suite = create_suite(owner=user, source=SUITE)
    options = RunOptions(model_settings=ModelSettings(seed=7))
    launched = services.create_run(version=suite.latest_version, user=user, options=options, concurrency=1)
    run = wait_for_run(launched, timeout=90)
    reason = "the endpoint refused model_settings.seed: Unrecognized request argument supplied: seed"
    assert (run.status, run.stop_reason) == (Status.CANCELLED, reason)
    statuses = [c.status for c in run.conversations.order_by("index")]
    errored = [c for c in run.conversations.all() if c.status == Status.ERROR]
    assert errored and all(reason in c.error for c in errored)
    assert statuses.count(Status.CANCELLED) >= QUESTIONS - 2  # the rest never asked the endpoint
    # Each says why, as a cost limit's do, not a bare "cancelled".
    unplayed = run.conversations.filter(status=Status.CANCELLED, turn_count=0)
    assert {c.verdict for c in unplayed} == {f"not started: {reason}"}
    assert len(fake_openai.chat_requests()) == len(errored)


def test_evalsite_run_on_a_server_sends_its_settings_with_the_launch(
    live_server, user, start_worker, tmp_path
):
    start_worker()
    _, token = create_token(user, "ci")
    suite = tmp_path / "suite.yaml"
    suite.write_text(MOCK_CI_SUITE.format(name="with-settings"))
    result = evalsite(str(suite), "--server", live_server.url, "--set", "temperature=0.2", "--set", "judge.seed=1",
                      token=token, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    run = Run.objects.get()
    assert run.options == {"model_settings": {"temperature": 0.2}, "judge_settings": {"seed": 1}}
