"""Run pages for repeated evals: the Iterations section (strips, statistics, flaky badge and filter, verdicts
against the pass-rate threshold), agent / judge / simulated-user tokens apart, the poll, and its query count."""

from __future__ import annotations

import html
import math
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs import selectors
from runs.models import Conversation, Run, Status
from suites import services as suite_services
from tests.web.iterated_runs import (
    BOOKING,
    CONDITION,
    SUITE,
    add,
    element,
    iteration_rows,
    make_run,
    one_turn,
    run_url,
    table_rows,
    text,
)

pytestmark = pytest.mark.django_db


# --- The Iterations section -------------------------------------------------------------------------------


def test_page_and_iterated_for_agree_on_repeated_evals_and_their_statistics(logged_in, version, user):
    run = make_run(version, user)
    conversations = list(run.conversations.all())
    expected = selectors.iterated_for(run, conversations)
    assert [item.id for item in expected] == ["booking", "greeting", "refund"]
    # The page shows the same statistics (over the iterations finished so far) once the run is over.
    shown = selectors.iterated_so_far(run, conversations)
    assert [shown[item.index] for item in expected] == expected
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert list(iteration_rows(page)) == ["booking", "greeting", "refund"]


def test_each_iteration_is_a_mark_linking_to_its_transcript(logged_in, version, user):
    run = make_run(version, user)
    row = iteration_rows(logged_in.get(run_url("detail", run)).content.decode())["booking"]
    marks = re.findall(r'<a href="([^"]+)" class="imark imark-(\w+)( is-rep)?"', row)
    base = run_url("conversation", run, 0)
    assert [(href, status) for href, status, _ in marks] == [
        (base, "passed"),  # iteration 0 needs no ?iteration=
        (f"{base}?iteration=1", "failed"),
        (f"{base}?iteration=2", "passed"),
        (f"{base}?iteration=3", "passed"),
        (f"{base}?iteration=4", "error"),  # an error is its own mark, not a failure
    ]
    symbols = re.findall(r'class="imark imark-\w+(?: is-rep)?"[^>]*>(.)</a>', row)
    assert "".join(symbols) == "✓✗✓✓!"
    # The representative iteration (score closest to the mean 0.75: the first 1.0) is ringed and named.
    assert [rep for *_, rep in marks] == [" is-rep", "", "", "", ""]
    assert "representative: iteration 1" in text(row)
    assert 'title="Iteration 2: failed, score 0.00, 10 turns, max turns (10)"' in row


def test_statistics_are_rendered_with_hand_computed_numbers(logged_in, version, user):
    run = make_run(version, user)
    cells = iteration_rows(logged_in.get(run_url("detail", run)).content.decode())
    rows = {key: text(row) for key, row in cells.items()}
    booking = rows["booking"]
    # 3 of 4 graded iterations passed (the error is not graded): 75%. Wilson, z = 1.96: centre
    # (0.75 + 1.96²/8) / (1 + 1.96²/4) = 0.6275, margin 1.96·√(0.75·0.25/4 + 1.96²/64) / 1.9604 = 0.3269.
    assert "75% 3/4" in booking
    assert "95% CI 30%–95%" in booking
    # Scores 1, 0, 1, 1: mean 0.75, population std dev √((3·0.25² + 0.75²)/4) = √0.1875 = 0.433.
    assert math.isclose(math.sqrt(0.1875), 0.433, abs_tol=1e-3)
    assert "0.75 ± 0.43" in booking and "min 0.00 · max 1.00" in booking
    # Turns 3, 10, 4, 2 and the errored 1: avg 4.0, 1–10.
    assert "4.0 1–10" in booking
    assert f"3× {CONDITION}" in booking and "1× max turns (10)" in booking and "1× error" in booking
    assert booking.index("3× condition met") < booking.index("1× error")  # most frequent first
    # The eval's own threshold, 0.7, not the suite's 0.5.
    assert "passed 75% ≥ 70% needed" in booking
    assert "5/5 done · 1 error" in booking

    greeting = rows["greeting"]  # 5/5: Wilson low (1 + 1.96²/10 - margin)/… = 0.5655
    assert "100% 5/5" in greeting and "95% CI 57%–100%" in greeting
    assert "1.00 ± 0.00" in greeting and "passed 100% ≥ 50% needed" in greeting
    assert "representative:" not in greeting  # every score alike: the ringed mark is enough
    assert re.search(
        r'class="cell-ended">\s*<span class="muted">—</span>', cells["greeting"]
    )  # no endings in a tree
    refund = rows["refund"]
    assert (
        "0% 0/5" in refund and "95% CI 0%–43%" in refund
    )  # Wilson high for 0/5: 1.96²/5 / (1 + 1.96²/5) = 0.4345
    assert "failed 0% < 50% needed" in refund


def test_flaky_evals_get_a_badge(logged_in, version, user):
    run = make_run(version, user)
    rows = iteration_rows(logged_in.get(run_url("detail", run)).content.decode())
    assert '<span class="badge badge-flaky"' in rows["booking"] and "FLAKY" in text(rows["booking"])
    assert "FLAKY" not in text(rows["greeting"]) and "FLAKY" not in text(rows["refund"])  # always pass / fail
    assert 'class="is-flaky"' in rows["booking"]


def test_flaky_only_filter_restricts_both_sections_without_js(logged_in, version, user):
    run = make_run(version, user)
    everything = logged_in.get(run_url("detail", run)).content.decode()
    assert len(table_rows(everything)) == 15
    assert f'href="{run_url("detail", run)}?flaky=1#iterations"' in everything  # a real link
    page = logged_in.get(run_url("detail", run), {"flaky": "1"}).content.decode()
    assert list(iteration_rows(page)) == ["booking"]
    rows = table_rows(page)
    assert len(rows) == 5 and all(" booking " in f" {row} " for row in rows)
    assert "Showing the 5 conversations of flaky evals, of 15." in text(element(page, "conversations"))
    assert 'aria-current="true"' in page.split("Flaky only")[0].rsplit("<a ", 1)[1]


def test_flaky_filter_with_nothing_flaky_says_so(logged_in, version, user):
    run = make_run(version, user, booking=[("passed", 1.0, 3, CONDITION)] * 5)
    page = logged_in.get(run_url("detail", run), {"flaky": "1"}).content.decode()
    assert "No flaky evals: every repeated eval has the same outcome in each iteration." in text(
        element(page, "iterations")
    )
    assert table_rows(page) == ["No flaky evals."]


def test_conversation_table_shows_the_iteration_and_tokens_apart(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("detail", run)).content.decode()
    head = text(element(page, "conversations").split("</thead>")[0])
    assert "# Iter. Eval First prompt Status Verdict Turns Tokens Judge Sim. user Cost" in head
    rows = table_rows(page)
    # booking iteration 1 of 5 (stored as 0): 3 turns of 120 agent tokens, 240 judge, 2 × 42 simulated user.
    assert rows[0].startswith("1 1/5 booking")
    assert rows[0].endswith("360 240 84 $0.0060")  # $0.003 agent + $0.002 judge + $0.001 user
    assert rows[1].startswith("1 2/5 booking")


def test_progress_panel_shows_simulated_user_tokens_only_when_spent(logged_in, version, user):
    run = make_run(version, user)
    progress = text(element(logged_in.get(run_url("detail", run)).content.decode(), "progress"))
    # booking: 3 + 10 + 4 + 2 turns, less the four first turns, are 15 simulated-user turns of 42 tokens;
    # the errored iteration's one turn has none.
    assert "Simulated user tokens 630" in progress
    assert "Judge tokens 960" in progress  # 240 on each of the four finished bookings' last turns
    other = suite_services.create_suite(owner=user, source=SUITE.replace("name: concierge", "name: plain"))
    plain = make_run(other.latest_version, user, booking=[])
    assert "Simulated user" not in text(
        element(logged_in.get(run_url("detail", plain)).content.decode(), "progress")
    )


def test_a_running_run_refreshes_the_iterations_with_the_poll(logged_in, version, user):
    booking = [*BOOKING[:3], ("running", None, 0, ""), ("queued", None, 0, "")]
    run = make_run(version, user, status=Status.RUNNING, booking=booking)
    page = logged_in.get(run_url("detail", run)).content.decode()
    row = text(iteration_rows(page)["booking"])
    assert "3/5 done" in row and "so far" in row  # statistics over the finished iterations only
    assert "67% 2/3" in row  # 2 of 3 graded so far
    marks = re.findall(r'class="imark imark-(\w+)', iteration_rows(page)["booking"])
    assert marks == ["passed", "failed", "passed", "running", "queued"]
    poll = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true").content.decode()
    assert (
        'id="iterations" class="card card-flush iterations-card" aria-labelledby="iterations-title" hx-swap-oob="true"'
        in poll
    )
    # A newly finished iteration shows up on the next poll.
    Conversation.objects.filter(run=run, index=0, iteration=3).update(
        status=Status.PASSED, score=1.0, turn_count=2, termination=CONDITION
    )
    poll = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true").content.decode()
    assert "75% 3/4" in text(iteration_rows(poll)["booking"])


def test_filtered_poll_keeps_the_filter(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING, booking=[*BOOKING[:4], ("running", None, 0, "")])
    page = logged_in.get(run_url("detail", run), {"flaky": "1"}).content.decode()
    poll_url = html.unescape(re.search(r'id="progress"[^>]*hx-get="([^"]+)"', page).group(1))
    assert "flaky=1" in poll_url
    # The repeated evals come with a poll once their last ones are WHOLE_EVERY old (here: long ago).
    poll_url = re.sub(r"whole=\d+", "whole=1", poll_url.replace("fp=", "fp=stale"))
    poll = logged_in.get(poll_url, HTTP_HX_REQUEST="true").content.decode()
    assert list(iteration_rows(poll)) == ["booking"]
    assert len(table_rows(poll)) == 5


def test_a_live_polls_sends_the_repeated_evals_every_few_seconds_and_at_the_end(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING, booking=[*BOOKING[:4], ("running", None, 0, "")])
    page = logged_in.get(run_url("detail", run)).content.decode()
    poll_url = html.unescape(re.search(r'id="progress"[^>]*hx-get="([^"]+)"', page).group(1))
    sent = int(re.search(r"whole=(\d+)", poll_url).group(1))
    assert abs(sent / 1000 - timezone.now().timestamp()) < 5  # the page itself had them
    Conversation.objects.filter(run=run, index=0, iteration=4).update(status=Status.PASSED, score=1.0)
    Run.objects.filter(pk=run.pk).update(status=Status.RUNNING)  # one conversation left: still live
    Conversation.objects.filter(run=run, index=2, iteration=0).update(status=Status.RUNNING)
    # A second later: the counts and the changed rows, not the Iterations section, and the next poll's URL
    # still says when it was last sent.
    poll = logged_in.get(poll_url.replace("fp=", "fp=stale"), HTTP_HX_REQUEST="true").content.decode()
    assert 'id="progress"' in poll and 'id="iterations"' not in poll
    assert f"whole={sent}" in html.unescape(re.search(r'id="progress"[^>]*hx-get="([^"]+)"', poll).group(1))
    # WHOLE_EVERY later (the page's stamp 6 s older): the section again, with the iteration that finished.
    stale = poll_url.replace(f"whole={sent}", f"whole={sent - 6000}").replace("fp=", "fp=stale")
    poll = logged_in.get(stale, HTTP_HX_REQUEST="true").content.decode()
    rows = iteration_rows(poll)
    assert "5/5 done" in text(rows["booking"]) and "4/5 done" in text(rows["refund"])
    next_url = html.unescape(re.search(r'id="progress"[^>]*hx-get="([^"]+)"', poll).group(1))
    assert int(re.search(r"whole=(\d+)", next_url).group(1)) > sent
    # The run ends: the last poll has every section, however recent the last one was.
    Conversation.objects.filter(run=run, status=Status.RUNNING).update(status=Status.FAILED, score=0.0)
    Run.objects.filter(pk=run.pk).update(status=Status.FAILED, finished_at=timezone.now())
    poll = logged_in.get(poll_url.replace("fp=", "fp=stale"), HTTP_HX_REQUEST="true").content.decode()
    assert "5/5 done" in text(iteration_rows(poll)["refund"])


def test_run_page_and_poll_queries_stay_constant_with_more_evals_and_iterations(
    logged_in, user, django_assert_max_num_queries
):
    def suite(evals: int) -> str:
        items = "".join(
            f"  - id: e{n}\n    prompt: Q{n}?\n    checks: [{{match: '*A*'}}]\n" for n in range(evals)
        )
        return f"name: wide-{evals}\nmodel: mock\niterations: 10\nevals:\n{items}"

    def build(evals: int) -> Run:
        version = suite_services.create_suite(owner=user, source=suite(evals)).latest_version
        run = Run.objects.create(suite_version=version, created_by=user, model="mock", endpoint_name="mock",
                                 is_mock=True, status=Status.RUNNING, started_at=timezone.now())  # fmt: skip
        for index in range(evals):
            for iteration in range(10):
                state = "passed" if (index + iteration) % 3 else "failed"
                add(
                    run,
                    index,
                    iteration,
                    f"e{index}",
                    state,
                    float(state == "passed"),
                    one_turn(f"Q{index}?", "A", True),
                )
        return run

    def queries(run: Run, name: str, data=None, **extra) -> tuple[int, str]:
        with CaptureQueriesContext(connection) as context:
            response = logged_in.get(run_url(name, run), data, **extra)
        assert response.status_code == 200
        return len(context.captured_queries), response.content.decode()

    small, large = build(5), build(25)
    few, page = queries(small, "detail")
    many, page = queries(large, "detail")
    assert many == few
    # Ten repeated evals a page of the Iterations section; their verdicts and flaky marks for all 25 come
    # from one aggregate.
    assert len(iteration_rows(page)) == 10 and page.count('class="imark imark-') == 100
    assert "evals 1–10 of 25" in page and 'Flaky only <span class="pill-count">25</span>' in page
    _, last = queries(large, "detail", data={"ipage": 3})
    assert len(iteration_rows(last)) == 5 and "e24" in last
    with django_assert_max_num_queries(few):
        logged_in.get(run_url("detail", large), {"flaky": "1"})
    poll_few, _ = queries(small, "progress", HTTP_HX_REQUEST="true")
    poll_many, poll = queries(large, "progress", HTTP_HX_REQUEST="true")
    assert poll_many == poll_few and len(iteration_rows(poll)) == 10
    with django_assert_max_num_queries(poll_few):
        logged_in.get(run_url("progress", large), HTTP_HX_REQUEST="true")
