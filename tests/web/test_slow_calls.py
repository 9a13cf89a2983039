"""A hung endpoint is visible and bounded on the web: the run page and its poll say "N calls waiting on the
model for 45 s" while a worker's calls hang and drop it once they are answered; the admin's timeout cuts a
hung call short and it is retried. Played by a worker's pump against the fake endpoint's hang faults."""

from __future__ import annotations

import html
import re
import threading
import time

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from evalsite.cli import remote
from runs import services
from runs.models import Status
from runs.tokens import create_token
from runs.worker.pump import Pump
from suites.services import create_suite
from tests.factories import bearer
from tests.fakeopenai import Reply

# The notes are written and read with hand-written SQL (runs.worker.sql) and a filtered aggregate: PostgreSQL too.
pytestmark = pytest.mark.sql

WAITING = re.compile(r"(\d+) calls? waiting on the model for (\d+) s")


@pytest.fixture
def published(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("runs.worker.tasks.run_conversation.delay", sent.append)
    return sent


def _launch(user, source: str):
    version = create_suite(owner=user, source=source).latest_version
    return services.create_run(version=version, user=user, concurrency=4)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def _serve(published: list[int]) -> threading.Thread:
    pump = Pump(capacity=4)
    for pk in published:
        pump.offer(pk)

    def serve() -> None:
        try:
            pump.serve(until_idle=True)
        finally:
            connection.close()  # this thread's: its session would outlive the test's database

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_the_page_says_calls_are_waiting_on_the_model_while_they_hang_and_drops_it_after(
    user, logged_in, fake_endpoint, fake_openai, published, settings
):
    settings.EVALSITE_SLOW_CALL_SECONDS = 1
    fake_openai.latency = 0.3
    # Two conversations whose first call hangs 3 s (under the endpoint's 5 s timeout, so it is answered),
    # then go on for a few turns of 0.3 s; a third is never slow.
    turns = ", ".join(f"{{input: turn {n}}}" for n in range(1, 8))
    lines = ["name: hanging", "model: fake/m", "evals:"]
    for name in ("one", "two", "three"):
        lines.append(
            f"  - {{id: {name}, checks: [{{not_match: '*zzz*'}}], turns: [{{input: {name}}}, {turns}]}}"
        )
    for name in ("one", "two"):
        fake_openai.script(name, [Reply("OK", hang=3)] + ["OK"] * 7)
    run = _launch(user, "\n".join(lines) + "\n")
    progress_url = reverse("runs:progress", args=[run.pk])
    detail_url = reverse("runs:detail", args=[run.pk])

    _, token = create_token(user, "ci")
    api_seen = []
    thread = _serve(published)
    seen, page_seen, after = [], None, []
    try:
        started = time.monotonic()
        while thread.is_alive() and time.monotonic() - started < 30:
            poll = _text(logged_in.get(progress_url, HTTP_HX_REQUEST="true").content.decode())
            found = WAITING.search(poll)
            at = time.monotonic() - started
            if found:
                seen.append((at, int(found[1]), int(found[2])))
                if page_seen is None:
                    api = Client().get(f"/api/runs/{run.pk}", **bearer(token)).json()["progress"]["calling"]
                    api_seen.append((api["count"], api["seconds"]))
                    page_seen = WAITING.search(_text(logged_in.get(detail_url).content.decode()))
            elif seen:
                run.refresh_from_db()
                if run.conversations.filter(status=Status.RUNNING).exists():
                    after.append(at)  # the hung calls were answered and the run goes on: no line
            time.sleep(0.2)
    finally:
        thread.join(timeout=30)

    assert seen, "the progress card never said calls were waiting on the model"
    assert max(count for _, count, _ in seen) == 2  # the two hung conversations, never the third
    assert all(1 <= seconds <= 3 for _, _, seconds in seen)
    assert page_seen is not None, "the run page itself did not say it"
    assert api_seen and 1 <= api_seen[0][0] <= 2 and 1 <= api_seen[0][1] <= 3  # what `run --server` prints
    assert after, "the line stayed while the run went on after the hung calls were answered"
    assert all(at > seen[-1][0] for at in after)
    run.refresh_from_db()
    assert run.status == Status.PASSED
    assert not run.conversations.filter(calling_since__isnull=False).exists()


def _retried_after(fake_openai) -> float:
    """Seconds between the hung chat request and its retry."""
    hung, retried = [
        entry["at"] for entry in fake_openai.requests if entry["path"].endswith("/chat/completions")
    ]
    return retried - hung


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("admin", "suite", "expected"),
    [(0.5, "", 0.5), (30, "request_timeout: {fake: 0.5}\n", 0.5), (0.5, "request_timeout: 2\n", 2)],
)
def test_a_hung_call_is_cut_short_by_the_suites_timeout_else_the_admins_and_retried(
    user, fake_endpoint, fake_openai, published, admin, suite, expected
):
    fake_endpoint.timeout = admin
    fake_endpoint.save()
    fake_openai.fail_next(1, hang=40)
    run = _launch(
        user, f"name: t\nmodel: fake/m\n{suite}evals:\n  - {{prompt: hung, checks: [{{match: '*OK*'}}]}}\n"
    )
    _serve(published).join(timeout=30)
    run.refresh_from_db()
    assert run.status == Status.PASSED
    assert (
        expected <= _retried_after(fake_openai) < expected + 2.5
    )  # the timeout in force, and a short backoff


class _Server:
    """The server's answers to `evalsite run --server`'s polls of a run, one after another."""

    def __init__(self, callings: list[dict]) -> None:
        self.answers = [
            {"status": "running" if n < len(callings) - 1 else "passed", "progress": {
                "done": 0, "total": 3, "counts": {"passed": 0, "failed": 0, "error": 0}, "calling": calling,
            }}
            for n, calling in enumerate(callings)
        ]  # fmt: skip

    def call(self, method: str, path: str, body=None):
        return 200, self.answers.pop(0)


def test_run_on_a_server_says_calls_are_waiting_on_the_model_as_a_local_run_does(monkeypatch, capsys):
    monkeypatch.setattr(remote, "POLL_SECONDS", 0)
    callings = [
        {"count": 0, "since": None, "seconds": 0},
        {"count": 2, "since": "2026-01-01T00:00:00Z", "seconds": 11},
        {"count": 2, "since": "2026-01-01T00:00:00Z", "seconds": 12},  # the same news: not said again
        {"count": 1, "since": "2026-01-01T00:00:00Z", "seconds": 13},
        {"count": 0, "since": None, "seconds": 0},
    ]
    assert remote._watch(_Server(callings), "r") == "passed"
    said = [line for line in capsys.readouterr().err.splitlines() if "waiting on the model" in line]
    assert said == ["2 calls waiting on the model for 11 s", "1 call waiting on the model for 13 s"]
