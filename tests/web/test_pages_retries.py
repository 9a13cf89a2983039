"""The run pages while model calls wait to retry, and the "Retry errored conversations" action, through
Django's test client and the API (no worker: rows are set as a worker would set them)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.models import Run, ShareLink, Status
from suites import services as suite_services
from tests.web.test_pages_runs import SUITE, make_run, run_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(user):
    return suite_services.create_suite(owner=user, source=SUITE).latest_version


def text(response) -> str:
    """What a person reads: tags out, whitespace squeezed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", response.content.decode()))


def wait(run: Run, index: int, reason: str, seconds: float) -> None:
    run.conversations.filter(index=index).update(
        status=Status.RUNNING,
        waiting_until=timezone.now() + timedelta(seconds=seconds),
        waiting_reason=reason,
    )


def seconds_in(pattern: str, shown: str) -> int:
    found = re.search(pattern, shown)
    assert found, (pattern, shown)
    return int(found.group(1))


def test_the_progress_card_and_the_row_say_a_conversation_waits_for_the_rate_limit(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    wait(run, 1, "waiting for rate limit", 7.5)
    shown = text(logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true"))
    # 8 s less the time the page took (a cold first request on a busy machine can take a second or two).
    card = seconds_in(
        r"1 conversation waiting for rate limit \(retry in (\d+) s\)", shown
    )  # the progress card
    row = seconds_in(r"turn 2… waiting for rate limit \(retry in (\d+) s\)", shown)  # the conversation's row
    assert 5 <= card == row <= 8
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert 'data-until="' in page and 'data-prefix="retry in"' in page  # app.js counts it down


def test_other_reasons_and_several_conversations(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    wait(run, 0, "endpoint unavailable (HTTP 503)", 3.5)
    wait(run, 1, "endpoint unavailable (HTTP 503)", 9.5)
    shown = text(logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true"))
    # The card gives the sooner retry, each row its own; less the time the page took.
    card = seconds_in(
        r"2 conversations waiting: endpoint unavailable \(HTTP 503\), next retry in (\d+) s", shown
    )
    row = seconds_in(r"turn 2… endpoint unavailable \(HTTP 503\), retry in (\d+) s", shown)
    assert 1 <= card <= 4 and 7 <= row <= 10 and row - card in (5, 6, 7)


def test_unreadable_replies_are_counted_on_the_conversation_not_on_the_card(logged_in, version, user):
    """Each conversation says how many unreadable 200s its call got; the card, for several, only why."""
    run = make_run(version, user, status=Status.RUNNING)
    wait(run, 0, "endpoint sent an unreadable reply (3 times)", 3.5)
    wait(run, 1, "endpoint sent an unreadable reply (12 times)", 5.5)
    shown = text(logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true"))
    assert re.search(r"2 conversations waiting: endpoint sent an unreadable reply, next retry in \d s", shown)
    assert re.search(r"endpoint sent an unreadable reply \(12 times\), retry in \d s", shown)  # the row
    page = text(logged_in.get(run_url("conversation", run, 1)))
    assert re.search(r"endpoint sent an unreadable reply \(12 times\), retry in \d s", page)


def test_a_wait_that_is_over_is_not_shown(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    wait(run, 1, "cannot reach endpoint", -1)
    shown = text(logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true"))
    assert "cannot reach endpoint" not in shown


def test_a_new_wait_changes_the_progress_fingerprint(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    body = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true").content.decode()
    fingerprint = body.split('data-fingerprint="')[1].split('"')[0]
    wait(run, 1, "waiting for rate limit", 20)
    changed = logged_in.get(run_url("progress", run), {"fp": fingerprint}, HTTP_HX_REQUEST="true")
    assert changed.status_code == 200
    assert "waiting for rate limit (retry in 20 s)" in text(changed)


def test_the_transcript_says_it_waits_and_its_poll_picks_a_new_wait_up(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    run.conversations.filter(index=1).update(status=Status.RUNNING)
    page = logged_in.get(run_url("conversation", run, 1))
    assert "waiting for rate limit" not in text(page)
    poll = page.content.decode().split('hx-get="')[1].split('"')[0].replace("&amp;", "&")
    assert logged_in.get(poll, HTTP_HX_REQUEST="true").status_code == 204  # nothing new
    wait(run, 1, "waiting for rate limit", 7.5)
    polled = logged_in.get(poll, HTTP_HX_REQUEST="true")
    assert polled.status_code == 200
    assert "waiting for rate limit (retry in 8 s)" in text(polled)
    assert "waiting for rate limit (retry in 8 s)" in text(logged_in.get(run_url("conversation", run, 1)))


# --- Retry errored conversations ------------------------------------------------------------------------------


def test_a_finished_run_with_errors_offers_the_retry_and_it_requeues_them(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    page = logged_in.get(run_url("detail", run))
    assert "Retry errored conversations" in text(page)
    assert logged_in.get(run_url("retry_errored", run)).status_code == 405  # GET never changes state

    response = logged_in.post(run_url("retry_errored", run), follow=True)
    assert "Retrying 1 errored conversation: each resumes after its last stored turn." in text(response)
    run.refresh_from_db()
    assert (run.status, run.finished_at) == (Status.RUNNING, None)
    broken = run.conversations.get(index=2)
    assert (broken.status, broken.error, broken.verdict, broken.finished_at) == (Status.QUEUED, "", "", None)
    assert run.conversations.get(index=0).status == Status.PASSED  # the others keep their outcome
    assert "Retry errored conversations" not in text(logged_in.get(run_url("detail", run)))


def test_htmx_retry_refreshes_the_page(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    response = logged_in.post(run_url("retry_errored", run), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Refresh"] == "true"


def test_no_retry_offered_while_running_without_errors_or_when_shared(logged_in, version, user):
    running = make_run(version, user, status=Status.RUNNING)
    assert "Retry errored conversations" not in text(logged_in.get(run_url("detail", running)))
    passed = make_run(version, user, status=Status.PASSED, conversations=2)
    assert "Retry errored conversations" not in text(logged_in.get(run_url("detail", passed)))
    errored = make_run(version, user, status=Status.ERROR)
    link = ShareLink.objects.create(run=errored, created_by=user)
    assert "Retry errored conversations" not in text(Client().get(reverse("share:run", args=[link.token])))


def test_retrying_a_running_run_changes_nothing_and_says_why(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    response = logged_in.post(run_url("retry_errored", run), follow=True)
    assert "Nothing retried: the run is still going; wait for it to finish." in text(response)
    run.refresh_from_db()
    assert run.status == Status.RUNNING


def test_retry_needs_the_owner_and_a_csrf_token(version, user, other_user):
    run = make_run(version, user, status=Status.ERROR)
    intruder = Client()
    intruder.force_login(other_user)
    assert intruder.post(run_url("retry_errored", run)).status_code == 404
    careful = Client(enforce_csrf_checks=True)
    careful.force_login(user)
    assert careful.post(run_url("retry_errored", run)).status_code == 403
    assert careful.post(f"/api/runs/{run.pk}/retry-errored").status_code == 403
    run.refresh_from_db()
    assert run.status == Status.ERROR


def test_the_api_retries_errored_conversations(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    response = logged_in.post(f"/api/runs/{run.pk}/retry-errored")
    assert response.status_code == 200
    assert response.json() == {"retried": 1, "status": "running"}
    again = logged_in.post(f"/api/runs/{run.pk}/retry-errored")
    assert again.status_code == 409
    assert again.json() == {"detail": "the run is still going; wait for it to finish"}
    cancelled = make_run(version, user, status=Status.CANCELLED)
    assert logged_in.post(f"/api/runs/{cancelled.pk}/retry-errored").status_code == 409


def test_the_progress_api_counts_waiting_conversations(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    wait(run, 1, "waiting for rate limit", 30)
    waiting = logged_in.get(f"/api/runs/{run.pk}/progress").json()["waiting"]
    assert waiting["count"] == 1 and waiting["reason"] == "waiting for rate limit" and waiting["until"]
