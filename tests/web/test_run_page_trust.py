"""What the run page says agrees with what happened: a live table's rows have its header's columns, a cancelled
run's progress card says what the cancel left unplayed, a launch warning about a missing key goes once the
model has answered."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from engine.results import CheckResult, TurnRecord, Usage
from runs.models import Conversation, Run, Status
from suites import services as suite_services
from tests.conftest import FAKE_KEY_ENV
from tests.factories import mock_run, store_turns

pytestmark = pytest.mark.django_db

SUITE = """\
name: judged
model: mock
evals:
  - id: one
    prompt: Say hi
    checks: [{contains: hi}]
  - id: two
    prompt: Say bye
    checks: [{contains: bye}]
"""


def header_cells(html: str) -> list[str]:
    """The table header's cells; none when `html` has no header (a poll that sent rows alone)."""
    head = re.search(r"<thead>.*?</thead>", html, flags=re.S)
    return re.findall(r"<th\b[^>]*>(.*?)</th>", head.group(), flags=re.S) if head else []


def row_cells(html: str, pk: int) -> int:
    row = re.search(rf'<tr id="conv-{pk}".*?</tr>', html, flags=re.S).group()
    return len(re.findall(r"<td\b", row))


def test_a_poll_after_the_first_judge_tokens_sends_rows_with_the_columns_of_its_header(logged_in, user):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status=Status.RUNNING)
    first, second = (
        Conversation.objects.create(
            run=run, index=index, eval_id=eval_id, prompt="Say it", kind="single-turn"
        )
        for index, eval_id in enumerate(("one", "two"))
    )
    Conversation.objects.filter(pk=first.pk).update(status=Status.RUNNING, started_at=timezone.now())
    first.refresh_from_db()
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    header = header_cells(page)
    assert "Judge" not in header  # no judge has spent a token yet
    assert row_cells(page, first.pk) == len(header)
    poll = page.split('hx-get="')[1].split('"')[0].replace("&amp;", "&")
    # A judge grades the first reply: the run now has judge tokens, so its table a Judge column.
    judged = CheckResult(type="llm_judge", label="llm_judge", passed=True, reason="score 0.9")
    record = TurnRecord(
        turn=1, prompt="Say it", response="hi", usage=Usage(prompt_tokens=5, completion_tokens=1),
        checks=[judged], passed=True, judge_usage=Usage(prompt_tokens=90, completion_tokens=7),
    )  # fmt: skip
    store_turns(first, [record])
    polled = logged_in.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert f'<tr id="conv-{first.pk}"' in polled
    # What the page shows now: the header the poll sent, or the one it had; the rows have its columns.
    shown_header = header_cells(polled) or header
    assert row_cells(polled, first.pk) == len(shown_header)
    assert "Judge" in shown_header


def test_a_cancelled_runs_progress_card_says_what_was_cancelled_and_no_percent(logged_in, user):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status=Status.CANCELLED)
    for index in range(5):
        Conversation.objects.create(
            run=run, index=index, eval_id=f"e{index}", prompt="Say it", kind="single-turn",
            status=Status.PASSED if index < 3 else Status.CANCELLED, finished_at=timezone.now(),
        )  # fmt: skip
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    card = re.search(r'<section id="progress".*?</section>', page, flags=re.S).group()
    count = re.sub(r"<[^>]+>|\s+", " ", card.split('<ul class="status-counts"')[0])
    assert " ".join(count.split()) == "3 / 5 done, 2 cancelled"
    assert "%" not in card.split('<ul class="status-counts"')[0]


def warnings_shown(html: str) -> list[str]:
    """The page's warning flashes, wherever they are."""
    return re.findall(r'<div class="flash flash-warning">(.*?)</div>', html, flags=re.S)


def test_a_launch_warning_about_an_unset_key_goes_once_the_model_has_answered(
    logged_in, user, fake_endpoint, monkeypatch
):
    # The endpoint's key variable is unset here, and the endpoint may well need none: the warning says so.
    monkeypatch.delenv(FAKE_KEY_ENV)
    suite = suite_services.create_suite(owner=user, source=SUITE.replace("model: mock", "model: fake/m"))
    launched = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"concurrency": "1"}, follow=True
    )
    page = launched.content.decode()
    (shown,) = warnings_shown(page)
    assert "is not set in this server" in shown and "fail with 401 if it needs one" in shown
    # In the part of the page the poll empties once the model has answered.
    assert re.search(r'<div id="launch-warnings">\s*<div class="flash flash-warning">', page)
    run = Run.objects.get(suite_version__suite=suite)
    poll = page.split('hx-get="')[1].split('"')[0].replace("&amp;", "&")
    # While nothing has answered, the poll leaves the warning where it is.
    assert 'id="launch-warnings"' not in logged_in.get(poll, HTTP_HX_REQUEST="true").content.decode()
    conversation = run.conversations.get(index=0)
    record = TurnRecord(turn=1, prompt="Say hi", response="hi", checks=[], passed=True)
    store_turns(conversation, [record])
    polled = logged_in.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert re.search(r'<div id="launch-warnings" hx-swap-oob="true">\s*</div>', polled)


def test_pin_as_baseline_looks_like_the_header_buttons_beside_it(logged_in, user):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status=Status.PASSED)
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()

    def classes(label: str) -> str:
        return re.search(rf'<button type="submit" class="([^"]*)"[^>]*>{label}</button>', page).group(1)

    # A muted, borderless button reads as disabled; Pin is styled as Re-grade, its neighbour.
    assert classes("Pin as baseline") == classes("Re-grade") == "btn"
