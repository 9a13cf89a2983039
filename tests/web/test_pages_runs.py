"""The run pages through Django's test client: list, live progress, transcripts, JSON, cancel and share links.

Runs are built from rows here (no worker): Run, Conversation and Turn with `record` = a TurnRecord.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from engine.results import CheckResult, TurnRecord, Usage
from runs import selectors, specs
from runs import services as run_services
from runs.models import Conversation, Run, ShareLink, Status, Turn
from suites import services as suite_services
from tests.factories import CAPITAL_EVAL, MULTIPLY_EVAL, body, demo_suite, mock_run, store_turns

# A system prompt with markup, to see it escaped; and a third eval the tests mark errored.
SUITE = demo_suite(
    "name: arithmetic\nmodel: mock\nsystem: You are a careful <math> tutor.\n",
    (MULTIPLY_EVAL, CAPITAL_EVAL, "  - id: broken\n    prompt: Say hi\n    checks:\n      - contains: hi\n"),
)
HOSTILE = "<script>alert(1)</script>"
SYSTEM = "You are a careful <math> tutor."  # what a launch of SUITE stores on each conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(user):
    return suite_services.create_suite(owner=user, source=SUITE).latest_version


def check(label: str, passed: bool, reason: str, **extra) -> CheckResult:
    return CheckResult(type=label.split()[0], label=label, passed=passed, reason=reason, **extra)


def make_run(version, user, *, status=Status.PASSED, conversations: int = 3) -> Run:
    """A run whose first conversation passed on turn 2 after a follow-up, the second failed, the third errored."""
    now = timezone.now()
    finished = status not in (Status.QUEUED, Status.RUNNING)
    run = mock_run(version, user, status=status, elapsed=timedelta(seconds=83))
    for index in range(conversations):
        kind = index % 3
        conversation = Conversation.objects.create(
            run=run,
            index=index,
            eval_id=["multiply", "capital", "broken"][kind] + ("" if index < 3 else f"-{index}"),
            prompt="What is 15 * 7?" if kind == 0 else "What is the capital of Australia?",
            kind="multi-turn",
            system=SYSTEM,
        )
        if kind == 0:
            store_turns(
                conversation,
                [
                    TurnRecord(
                        turn=1,
                        node="evals[0]",
                        prompt="What is 15 * 7?",
                        response=f"15 * 7 = 100.\n{HOSTILE}",
                        usage=Usage(prompt_tokens=20, completion_tokens=8),
                        cost=0.00012,
                        latency_ms=412,
                        checks=[check('match "*105*"', False, "no match for *105*")],
                        passed=False,
                    )
                ],
            )
            store_turns(
                conversation,
                [
                    TurnRecord(
                        turn=2,
                        node="evals[0].checks[0]",
                        prompt="That answer is incorrect. Please recalculate 15 multiplied by 7.",
                        response="You're right.\n\n15 * 7 = 105.",
                        usage=Usage(prompt_tokens=41, completion_tokens=9),
                        cost=0.0002,
                        latency_ms=388,
                        checks=[
                            check(
                                "or",
                                True,
                                "an option passed",
                                children=[
                                    check('match "*105*"', True, "matched *105*"),
                                    check("llm_judge", False, "score 0.20: vague", raw='{"score": 0.2}'),
                                ],
                            )
                        ],
                        passed=True,
                        followup_reason='match "*105*" failed on turn 1',
                        judge_usage=Usage(prompt_tokens=100, completion_tokens=11),
                    )
                ],
            )
            outcome = {"status": Status.PASSED, "passed_on_turn": 2, "verdict": "passed on turn 2"}
        elif kind == 1:
            store_turns(
                conversation,
                [
                    TurnRecord(
                        turn=1,
                        prompt="What is the capital of Australia?",
                        response="Sydney.",
                        usage=Usage(prompt_tokens=12, completion_tokens=3, estimated=True),
                        checks=[check("contains Canberra", False, "Canberra not found")],
                        passed=False,
                    )
                ],
            )
            outcome = {"status": Status.FAILED, "verdict": "failed after 1 turn"}
        else:
            outcome = {
                "status": Status.ERROR,
                "verdict": "error on turn 1: endpoint timed out",
                "error": "endpoint timed out",
            }
        if finished:
            Conversation.objects.filter(pk=conversation.pk).update(finished_at=now, **outcome)
    return run


def run_url(name: str, run: Run, *args) -> str:
    return reverse(f"runs:{name}", args=[run.pk, *args])


# --- Access -------------------------------------------------------------------------------------------------


def test_every_run_page_requires_login(client, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    link = ShareLink.objects.create(run=run, created_by=user)
    gets = [
        reverse("runs:list"),
        run_url("detail", run),
        run_url("progress", run),
        run_url("json", run),
        run_url("conversation", run, 0),
        run_url("conversation_poll", run, 0),
    ]
    posts = [run_url("cancel", run), run_url("share", run), run_url("revoke", run, link.pk)]
    for url in gets:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url
    for url in posts:
        response = client.post(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url
    run.refresh_from_db()
    assert run.status == Status.RUNNING and ShareLink.objects.filter(revoked_at=None).count() == 1


def test_other_users_runs_are_404(client, version, user, other_user):
    run = make_run(version, user, status=Status.RUNNING)
    link = ShareLink.objects.create(run=run, created_by=user)
    client.force_login(other_user)
    for url in [
        run_url("detail", run),
        run_url("progress", run),
        run_url("json", run),
        run_url("conversation", run, 0),
        run_url("conversation_poll", run, 0),
    ]:
        assert client.get(url).status_code == 404, url
    for url in [run_url("cancel", run), run_url("share", run), run_url("revoke", run, link.pk)]:
        assert client.post(url).status_code == 404, url
    run.refresh_from_db()
    assert run.status == Status.RUNNING and ShareLink.objects.filter(revoked_at=None).count() == 1
    assert "arithmetic" not in client.get(reverse("runs:list")).content.decode()


# --- Runs list ----------------------------------------------------------------------------------------------


def test_runs_list_shows_counts_and_mock_badge(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    page = logged_in.get(reverse("runs:list")).content.decode()
    assert run_url("detail", run) in page
    assert "arithmetic" in page and "v1" in page
    assert re.search(r'class="badge badge-mock"[^>]*>mock<', page)
    assert 'class="badge badge-error">error<' in page
    assert '<span class="c-passed" title="passed">1</span>' in page
    assert '<span class="c-failed" title="failed">1</span>' in page
    assert '<span class="c-error" title="error">1</span>' in page
    assert "1m 23s" in page  # duration


def test_runs_list_filters_by_status(logged_in, version, user):
    failed = make_run(version, user, status=Status.FAILED)
    running = make_run(version, user, status=Status.RUNNING)
    page = logged_in.get(reverse("runs:list"), {"status": "active"}).content.decode()
    assert run_url("detail", running) in page and run_url("detail", failed) not in page


def queries_for(client, url: str) -> int:
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return len(context.captured_queries)


def test_runs_list_query_count_does_not_grow_with_runs(
    logged_in, version, user, django_assert_max_num_queries
):
    make_run(version, user)
    few = queries_for(logged_in, reverse("runs:list"))
    for _ in range(7):
        make_run(version, user, conversations=6)
    assert queries_for(logged_in, reverse("runs:list")) == few
    with django_assert_max_num_queries(
        8
    ):  # the user's roles and projects: the current one and the switcher; the CI refs the filter offers
        logged_in.get(reverse("runs:list"))


def test_run_page_query_count_does_not_grow_with_conversations(
    logged_in, version, user, django_assert_max_num_queries
):
    small = make_run(version, user, conversations=2)
    ShareLink.objects.create(run=small, created_by=user)
    selectors.suite_facts(small)  # stored at launch (which mock_run skips), then kept by each process
    few = queries_for(logged_in, run_url("detail", small))
    big = make_run(version, user, conversations=30)
    ShareLink.objects.create(run=big, created_by=user)
    ShareLink.objects.create(run=big, created_by=user)
    assert queries_for(logged_in, run_url("detail", big)) == few
    with django_assert_max_num_queries(8):
        logged_in.get(run_url("detail", big))


def test_a_filtered_run_page_and_a_transcript_make_the_same_queries_whatever_the_size(
    logged_in, version, user, django_assert_max_num_queries
):
    small = make_run(version, user, conversations=3)
    big = make_run(version, user, conversations=30)
    query = "?status=failed&q=canberra&sort=score&page=1"
    # Once per process: the first page to show the version loads its suite, the first search asks whether the
    # turns' text index exists.
    queries_for(logged_in, run_url("detail", make_run(version, user, conversations=1)) + query)
    few = queries_for(logged_in, run_url("detail", small) + query)
    assert queries_for(logged_in, run_url("detail", big) + query) == few
    with django_assert_max_num_queries(10):  # the run page's 8, and the search's two
        logged_in.get(run_url("detail", big) + query)
    # A transcript of 2 turns and one of 12 ask the database as often.
    short = queries_for(logged_in, run_url("conversation", big, 0))
    long = big.conversations.get(index=3)
    first = long.turn_count + 1
    store_turns(
        long, [TurnRecord(turn=n, prompt=f"q{n}", response=f"a{n}") for n in range(first, first + 12)]
    )
    assert queries_for(logged_in, run_url("conversation", big, 3)) == short


# --- Run page and progress ----------------------------------------------------------------------------------


def test_finished_run_page(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    response = logged_in.get(run_url("detail", run))
    assert response.status_code == 200
    page = response.content.decode()
    assert reverse("suites:version", args=[version.suite.public_id, 1]) in page
    assert 'class="badge badge-mock"' in page
    assert '3<span class="muted"> / 3</span>' in page  # done / total
    assert "passed on turn 2" in page and "failed after 1 turn" in page and "endpoint timed out" in page
    assert run_url("conversation", run, 1) in page
    assert run_url("json", run) in page
    assert "$0.0003" in page  # cost with four decimals
    assert "1m 23s" in page  # elapsed
    assert 'hx-trigger="every 1s"' not in page  # a finished run is not polled
    assert "Cancel run" not in page
    assert 'id="share"' in page
    assert "&lt;math&gt;" not in page  # the system prompt belongs to transcripts only


def test_active_run_page_polls_and_offers_cancel(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert f'hx-get="{run_url("progress", run)}?fp=' in page
    assert 'hx-trigger="every 1s"' in page
    assert "Cancel run" in page and "hx-confirm=" in page
    assert "data-since=" in page  # the elapsed clock runs in the browser


def test_progress_partial_skips_unchanged_and_rerenders_on_change(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    response = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="progress"')
    assert "<html" not in body
    assert 'id="conversations" class="card card-flush" hx-swap-oob="true"' in body  # the table refreshes too
    fingerprint = body.split('data-fingerprint="')[1].split('"')[0]
    unchanged = logged_in.get(run_url("progress", run), {"fp": fingerprint}, HTTP_HX_REQUEST="true")
    assert unchanged.status_code == 204
    conversation = run.conversations.get(index=2)
    conversation.turn_count = 1
    conversation.save()
    changed = logged_in.get(run_url("progress", run), {"fp": fingerprint}, HTTP_HX_REQUEST="true")
    assert changed.status_code == 200


def test_the_poll_sends_only_the_rows_that_changed(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING, conversations=30)
    # Made a minute ago: nothing about them is recent (a poll resends what changed within a few seconds).
    earlier = timezone.now() - timedelta(minutes=1)
    run.conversations.update(started_at=earlier, finished_at=earlier)
    Turn.objects.filter(conversation__run=run).update(created_at=earlier)
    page = logged_in.get(run_url("detail", run)).content.decode()
    poll = page.split('hx-get="')[1].split('"')[0].replace("&amp;", "&")
    assert "since=" in poll
    # One conversation is claimed and plays a turn; the others do not move.
    moving = run.conversations.get(index=4)
    Conversation.objects.filter(pk=moving.pk).update(status=Status.RUNNING, started_at=timezone.now())
    store_turns(moving, [TurnRecord(turn=moving.turn_count + 1, prompt="next", response="reply <b>x</b>")])
    body = logged_in.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert body.count('<tr id="conv-') == 1 and f'<tr id="conv-{moving.pk}"' in body
    assert 'hx-swap-oob="true"' in body.split(f'<tr id="conv-{moving.pk}"')[1].split(">")[0]
    assert 'id="conversations"' not in body  # the table is not sent again
    # A filtered view is sent whole: rows may enter or leave it.
    filtered = logged_in.get(poll + "&status=running", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="conversations" class="card card-flush" hx-swap-oob="true"' in filtered


def test_progress_stops_polling_when_the_run_is_finished(logged_in, version, user):
    run = make_run(version, user, status=Status.PASSED)
    response = logged_in.get(run_url("progress", run), {"fp": "anything"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 286
    body = response.content.decode()
    assert 'id="progress"' in body and "hx-get" not in body.split('id="run-header"')[0]
    assert 'class="badge badge-lg badge-passed"' in body  # the header is swapped out of band with the status


def test_results_json_download(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    response = logged_in.get(run_url("json", run))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="arithmetic-v1-')
    data = json.loads(body(response))
    assert data["format"] == "evalsite.results/1" and data["mock"] is True
    assert [result["status"] for result in data["evals"]] == ["passed", "failed", "error"]


def test_cancel(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    assert logged_in.get(run_url("cancel", run)).status_code == 405  # GET never changes state
    response = logged_in.post(run_url("cancel", run))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Status.CANCELLED
    assert logged_in.post(run_url("cancel", run), HTTP_HX_REQUEST="true")["HX-Refresh"] == "true"


def test_launched_run_renders_before_any_worker_picks_it_up(logged_in, version, user):
    run = run_services.create_run(version=version, user=user)  # its tasks would go out on commit: never here
    assert set(run.conversations.values_list("system", flat=True)) == {SYSTEM}  # as make_run stores it
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert 'class="badge badge-lg badge-queued"' in page
    assert "0 / 3" in page.replace('<span class="muted">', "").replace("</span>", "")
    assert "not started" in page


def test_launch_stores_each_conversation_with_the_model_defaults(user):
    """create_run writes conversations in plain SQL: every column it does not set must hold exactly what
    the ORM would have stored, and the given ones (history included) must round-trip."""
    source = """\
name: launch
model: mock
system: Be brief.
iterations: 2
evals:
  - id: tree
    prompt: Hello
    checks: [{contains: hi}]
  - messages:
      - {role: user, content: "I have a bug."}
      - {role: assistant, content: "Can you share it?"}
      - {role: user, content: "Here it is:"}
    iterations: 1
    checks: [{contains: fix}]
"""
    version = suite_services.create_suite(owner=user, source=source).latest_version
    run = run_services.create_run(version=version, user=user)
    rows = list(Conversation.objects.filter(run=run).order_by("index", "iteration"))
    assert [(row.index, row.iteration, row.eval_id, row.style) for row in rows] == [
        (0, 0, "tree", "tree"),
        (0, 1, "tree", "tree"),
        (1, 0, "eval-2", "history"),
    ]
    assert rows[0].prompt == "Hello" and rows[0].history == []
    assert [row.system for row in rows] == ["Be brief."] * 3
    assert rows[2].prompt == "Here it is:"
    assert rows[2].history == [
        {"role": "user", "content": "I have a bug."},
        {"role": "assistant", "content": "Can you share it?"},
        {"role": "user", "content": "Here it is:"},
    ]
    given = {"id", "run", "index", "iteration", "eval_id", "prompt", "style", "system", "history"}
    for field in Conversation._meta.concrete_fields:
        if field.name not in given:
            assert [getattr(row, field.attname) for row in rows] == [field.get_default()] * 3, field.name


# --- Transcript ---------------------------------------------------------------------------------------------


def test_transcript_renders_turns_checks_and_verdict(logged_in, version, user):
    run = make_run(version, user)
    response = logged_in.get(run_url("conversation", run, 0))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Passed on turn 2" in page and "verdict-passed" in page
    assert 'class="bubble bubble-user">What is 15 * 7?</div>' in page
    assert "You&#x27;re right.\n\n15 * 7 = 105.</div>" in page  # newlines kept for pre-wrap
    assert "Follow-up sent because match &quot;*105*&quot; failed on turn 1" in page
    assert "✓ PASS" in page and "✗ FAIL" in page
    assert "no match for *105*" in page
    assert "checks-nested" in page and "Judge's raw answer" in page  # `or` children and the judge's text
    assert "61 / 17" in page  # tokens in / out over both turns
    assert "111" in page  # judge tokens
    assert "412 ms" in page and "$0.000120" in page  # per-turn latency and cost
    assert "You are a careful &lt;math&gt; tutor." in page  # the system prompt, escaped
    assert 'class="badge badge-mock"' in page
    assert run_url("conversation", run, 1) in page and 'rel="next"' in page
    assert 'data-hotkey="j ArrowRight"' in page
    assert 'hx-trigger="every 1s"' not in page


def test_transcript_escapes_model_output(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 0)).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert HOSTILE not in page


def test_failed_and_errored_transcripts(logged_in, version, user):
    run = make_run(version, user, status=Status.ERROR)
    failed = logged_in.get(run_url("conversation", run, 1)).content.decode()
    assert "Failed after 1 turn" in failed and "verdict-failed" in failed
    assert "(estimated)" in failed
    errored = logged_in.get(run_url("conversation", run, 2)).content.decode()
    assert "Error: endpoint timed out" in errored and "verdict-error" in errored
    assert "The conversation stopped with an error." in errored
    assert 'rel="next"' not in errored and run_url("conversation", run, 1) in errored
    assert logged_in.get(run_url("conversation", run, 9)).status_code == 404


def test_running_transcript_polls_and_appends_new_turns(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    conversation = run.conversations.get(index=0)
    Turn.objects.filter(conversation=conversation, position=2).delete()
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.RUNNING, turn_count=1)
    conversation.refresh_from_db()
    page = logged_in.get(run_url("conversation", run, 0)).content.decode()
    poll = run_url("conversation_poll", run, 0)
    assert f'hx-get="{poll}?after=1&amp;status=running"' in page

    nothing_new = logged_in.get(poll, {"after": 1, "status": "running"}, HTTP_HX_REQUEST="true")
    assert nothing_new.status_code == 204

    store_turns(
        conversation,
        [
            TurnRecord(
                turn=2,
                prompt="Recalculate.",
                response="105",
                checks=[check('match "*105*"', True, "ok")],
                passed=True,
            )
        ],
    )
    appended = logged_in.get(poll, {"after": 1, "status": "running"}, HTTP_HX_REQUEST="true")
    assert appended.status_code == 200
    body = appended.content.decode()
    assert 'id="turn-2"' in body and 'id="turn-1"' not in body
    assert "after=2" in body  # the next poll continues after the new turn
    assert 'id="verdict" class="verdict verdict-running" hx-swap-oob="true"' in body

    Conversation.objects.filter(pk=conversation.pk).update(status=Status.PASSED, verdict="passed on turn 2")
    done = logged_in.get(poll, {"after": 2, "status": "running"}, HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert "Passed on turn 2" in done.content.decode() and "turn-poller" not in done.content.decode()


# --- Share links --------------------------------------------------------------------------------------------


def test_share_link_works_logged_out_and_read_only(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    response = logged_in.post(run_url("share", run), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response.content.decode().lstrip().startswith(
        '<section id="share"'
    )
    link = ShareLink.objects.get(run=run)
    assert f"http://testserver/s/{link.token}/" in response.content.decode()

    visitor = Client()
    page = visitor.get(reverse("share:run", args=[link.token]))
    assert page.status_code == 200
    body = page.content.decode()
    assert '<meta name="robots" content="noindex' in body
    assert "Cancel run" not in body and "Create link" not in body and "Run again" not in body
    assert f'hx-get="/s/{link.token}/progress/?fp=' in body  # a shared live run is polled through its token
    assert f"/s/{link.token}/c/0/" in body and f"/runs/{run.pk}/" not in body
    transcript = visitor.get(reverse("share:conversation", args=[link.token, 0]))
    assert transcript.status_code == 200 and 'class="bubble bubble-assistant"' in transcript.content.decode()
    assert f"/s/{link.token}/c/1/" in transcript.content.decode()  # next conversation, through the token
    assert "&lt;script&gt;" in transcript.content.decode() and HOSTILE not in transcript.content.decode()
    assert visitor.get(reverse("share:progress", args=[link.token])).status_code == 200
    assert visitor.get(reverse("share:json", args=[link.token])).status_code == 200


def test_revoked_share_link_is_404(logged_in, version, user):
    run = make_run(version, user)
    link = run_services.create_share_link(run, user)
    visitor = Client()
    assert visitor.get(reverse("share:run", args=[link.token])).status_code == 200
    response = logged_in.post(run_url("revoke", run, link.pk))
    assert response.status_code == 302
    assert visitor.get(reverse("share:run", args=[link.token])).status_code == 404
    assert visitor.get(reverse("share:conversation", args=[link.token, 0])).status_code == 404
    assert visitor.get(reverse("share:run", args=["not-a-token"])).status_code == 404


# --- CSRF ---------------------------------------------------------------------------------------------------


def test_run_posts_without_a_csrf_token_are_rejected(version, user):
    run = make_run(version, user, status=Status.RUNNING)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(run_url("cancel", run)).status_code == 403
    assert client.post(run_url("share", run)).status_code == 403
    run.refresh_from_db()
    assert run.status == Status.RUNNING and not ShareLink.objects.exists()


def test_the_parsed_suite_cache_stays_within_its_size_bound(user, monkeypatch):
    """Suites are cached with their dataset (up to 20 MB): the oldest go once the cache holds more
    characters than its bound, but the suite just loaded always stays."""

    monkeypatch.setattr(specs, "_suites", {})
    versions = [
        suite_services.create_suite(
            owner=user, source=SUITE.replace("arithmetic", f"cached {i}")
        ).latest_version
        for i in range(3)
    ]
    monkeypatch.setattr(specs, "SUITE_CACHE_CHARS", 2 * len(versions[0].source) + 10)
    for version in versions:
        assert specs.suite(version).name == version.suite.name
    assert list(specs._suites) == [versions[1].sha256, versions[2].sha256]
    monkeypatch.setattr(specs, "SUITE_CACHE_CHARS", 1)
    specs.suite(versions[0])
    assert list(specs._suites) == [versions[0].sha256]


@pytest.mark.parametrize(
    "query",
    [
        "since=999999999999999",
        "whole=999999999999999",
        "since=abc&whole=-1",
        "since=" + "9" * 40,
        "whole=1e9",
    ],
)
def test_a_poll_with_a_time_no_page_sends_is_answered_as_one_without_it(logged_in, version, user, query):
    # Past the year 9999, not digits, or too long: read as absent (every row, every section), never a 500.
    run = make_run(version, user, status=Status.RUNNING, conversations=3)
    poll = logged_in.get(run_url("progress", run) + "?" + query, HTTP_HX_REQUEST="true")
    assert poll.status_code == 200
    assert poll.content.decode().count('<tr id="conv-') == 3
