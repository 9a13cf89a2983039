"""Generation settings through a real worker: a launch's settings reach the endpoint, and a setting the endpoint
refuses stops the run with the reason: the conversation that said it kept as an error, those in flight refused
alike stopped, the ones not yet started cancelled as such."""

from __future__ import annotations

import time

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
    start_worker(concurrency=3)
    suite = create_suite(owner=user, source=SUITE)
    options = RunOptions(model_settings=ModelSettings(seed=7))
    launched = services.create_run(version=suite.latest_version, user=user, options=options, concurrency=3)
    run = wait_for_run(launched, timeout=90)
    # The refusal stops the run at once, as a cancel does; the conversations in flight then end.
    deadline = time.monotonic() + 60
    while run.conversations.filter(status__in=[Status.QUEUED, Status.RUNNING]).exists():
        assert time.monotonic() < deadline, list(run.conversations.values_list("index", "status"))
        time.sleep(0.1)
    reason = "the endpoint refused model_settings.seed: Unrecognized request argument supplied: seed"
    assert (run.status, run.stop_reason) == (Status.CANCELLED, reason)
    ended = list(run.conversations.order_by("index"))
    errored = [c for c in ended if c.status == Status.ERROR]
    stopped = [c for c in ended if c.verdict == f"stopped at its first call: {reason}"]
    unplayed = [c for c in ended if c.verdict == f"not started: {reason}"]
    # One error says it; the other two sent with it were refused alike and stopped there; the rest never asked.
    assert len(errored) == 1 and errored[0].error == reason
    assert len(stopped) == 2 and len(unplayed) == QUESTIONS - 3, [(c.status, c.verdict) for c in ended]
    assert {(c.status, c.turn_count) for c in stopped + unplayed} == {(Status.CANCELLED, 0)}
    assert len(fake_openai.chat_requests()) == 3


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
