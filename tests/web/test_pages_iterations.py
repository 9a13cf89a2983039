"""Run pages for repeated evals and simulated users: the Iterations section (strips, statistics, flaky badge and
filter, verdicts against the pass-rate threshold), agent / judge / simulated-user tokens apart, and transcripts
with the simulated user's turns marked, why the conversation ended, weighted criteria and an iteration switcher.

Runs are built from rows (no worker): Run, Conversation and Turn with `record` = a TurnRecord. The suite says
`iterations: 5`, so runs.selectors.iterated_for and the page find the same repeated evals.
"""

from __future__ import annotations

import html
import json
import math
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from engine.outcomes import TerminationKind
from engine.results import CheckResult, TurnRecord, Usage
from runs import selectors
from runs.models import Conversation, Run, ShareLink, Status
from suites import services as suite_services
from tests.factories import body, mock_run, store_turns

SUITE = """\
name: concierge
model: mock
judge: mock
iterations: 5
evals:
  - id: booking
    prompt: I need a table for two tonight.
    pass_rate_threshold: 0.7
    simulate:
      persona: A hurried diner who wants a table at 8pm.
      max_turns: 10
      stop_when:
        field_equals: {path: booking.status, value: confirmed}
    checks:
      - llm_judge:
          criteria:
            - {name: polite, criteria: The agent is polite., weight: 1}
            - {name: accurate, criteria: The booking matches the request., weight: 3}
  - id: greeting
    prompt: Hello!
    checks:
      - match: "*hello*"
  - id: refund
    prompt: Refund my order.
    checks:
      - contains: refunded
"""
CONDITION = 'condition met: field_equals booking.status = "confirmed"'
# booking, iteration by iteration: (status, score, turns, termination)
BOOKING = [
    ("passed", 1.0, 3, CONDITION),
    ("failed", 0.0, 10, "max turns (10)"),
    ("passed", 1.0, 4, CONDITION),
    ("passed", 1.0, 2, CONDITION),
    ("error", None, 1, "error"),
]

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(user):
    return suite_services.create_suite(owner=user, source=SUITE).latest_version


def criteria_check(polite: float, accurate: float) -> CheckResult:
    weighted = (polite + 3 * accurate) / 4
    return CheckResult(
        type="llm_judge",
        label="llm_judge (2 weighted criteria)",
        passed=weighted >= 0.5,
        score=weighted,
        reason=f"weighted score {weighted:.2f} (threshold 0.50 of 1) over 2 criteria",
        children=[
            CheckResult(type="criterion", label="polite (weight 1)", passed=polite >= 0.5, score=polite,
                        reason=f"score {polite:.2f}: <b>curt</b> but fine", raw='{"score": 0.4, "reason": "<b>"}'),
            CheckResult(type="criterion", label="accurate (weight 3)", passed=accurate >= 0.5, score=accurate,
                        reason=f"score {accurate:.2f}: table for two at 8pm"),
        ],
    )  # fmt: skip


def booking_turns(turns: int, termination: str) -> list[TurnRecord]:
    """Turn 1 is the eval's prompt; every later user message is the simulated user's (it spent tokens)."""
    records = []
    for n in range(1, turns + 1):
        simulated = n > 1
        last = n == turns
        records.append(
            TurnRecord(
                turn=n,
                node="evals[0].simulate" if simulated else "evals[0]",
                prompt=f"<i>at 8pm</i>, turn {n}" if simulated else "I need a table for two tonight.",
                response='{"booking": {"status": "confirmed"}}' if last else f"<script>alert({n})</script>",
                usage=Usage(prompt_tokens=100, completion_tokens=20),
                cost=0.001,
                user_usage=Usage(prompt_tokens=30, completion_tokens=12) if simulated else Usage(),
                user_cost=0.0005 if simulated else 0.0,
                judge_usage=Usage(prompt_tokens=200, completion_tokens=40) if last else Usage(),
                judge_cost=0.002 if last else 0.0,
                checks=[criteria_check(0.4, 0.8)] if last else [],
                passed=True if last else None,
                termination=termination if last else None,
            )
        )
    return records


def add(run: Run, index: int, iteration: int, eval_id: str, status: str, score, records, **fields):
    conversation = Conversation.objects.create(
        run=run, index=index, iteration=iteration, eval_id=eval_id, status=status, score=score,
        prompt=records[0].prompt if records else "", kind="multi-turn" if len(records) > 1 else "single-turn",
        verdict=fields.pop("verdict", status),
        finished_at=None if status in ("queued", "running") else timezone.now(),
        **fields,
    )  # fmt: skip
    return store_turns(conversation, records)


def one_turn(prompt: str, reply: str, passed: bool) -> list[TurnRecord]:
    return [TurnRecord(turn=1, prompt=prompt, response=reply, usage=Usage(prompt_tokens=8, completion_tokens=4),
                       passed=passed)]  # fmt: skip


def make_run(version, user, *, status: str = Status.FAILED, booking=BOOKING) -> Run:
    # Failed by default, as finalize would have it: `refund` passes 0 of 5 against a 50% threshold.
    run = mock_run(version, user, status=status, elapsed=timedelta(seconds=9))
    for iteration, (state, score, turns, termination) in enumerate(booking):
        if state in ("queued", "running"):
            add(run, 0, iteration, "booking", state, None, [], style="simulated")
        elif state == "error":  # the agent replied once; the simulated user's endpoint failed
            first = TurnRecord(
                turn=1,
                node="evals[0]",
                prompt="I need a table for two tonight.",
                response="For when?",
                usage=Usage(prompt_tokens=100, completion_tokens=20),
                cost=0.001,
            )
            add(run, 0, iteration, "booking", state, None, [first], style="simulated", termination="error",
                termination_kind="error", error="endpoint said 500", verdict="error on turn 2: endpoint said 500",
                reason="error on turn 2: endpoint said 500")  # fmt: skip
        else:  # stored as the engine gives it: the verdict in words, and the reason without the ending
            add(run, 0, iteration, "booking", state, score, booking_turns(turns, termination), style="simulated",
                termination=termination, termination_kind=TerminationKind.read(termination),
                verdict=f"{state} after {turns} turns: {termination}", reason=f"{state} after {turns} turns")  # fmt: skip
    for iteration in range(5):
        add(run, 1, iteration, "greeting", "passed", 1.0, one_turn("Hello!", "Hello there.", True))
        add(run, 2, iteration, "refund", "failed", 0.0, one_turn("Refund my order.", "No.", False))
    return run


def run_url(name: str, run: Run, *args) -> str:
    return reverse(f"runs:{name}", args=[run.pk, *args])


def text(fragment: str) -> str:
    """What a reader sees: tags removed, entities decoded, whitespace collapsed."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def element(page: str, element_id: str, tag: str = "section") -> str:
    return page.split(f'id="{element_id}"', 1)[1].split(f"</{tag}>", 1)[0]


def turn(page: str, number: int) -> str:
    """One turn of a transcript, nested check lists included."""
    return (
        page.split(f'<li class="turn" id="turn-{number}">', 1)[1]
        .split('<li class="turn"', 1)[0]
        .split("</ol>\n\n<details", 1)[0]
    )


def iteration_rows(page: str) -> dict[str, str]:
    """The Iterations section's rows as HTML, by eval id."""
    body = element(page, "iterations").split("<tbody>")[1]
    rows = [row for row in body.split("</tr>") if "<td" in row]
    return {text(row).split()[0]: row for row in rows}


def table_rows(page: str) -> list[str]:
    body = element(page, "conversations").split("<tbody>")[1]
    return [text(row) for row in body.split("</tr>") if "<td" in row]


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


# --- Transcripts --------------------------------------------------------------------------------------------


def test_simulated_turns_are_labelled_with_their_tokens(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 0)).content.decode()
    first, second = turn(page, 1), turn(page, 2)
    assert "simulated user" not in text(first) and "msg-simulated" not in first  # the eval's own prompt
    assert '<span class="tag tag-simulated">simulated user</span>' in second
    assert "42 tokens · $0.000500" in text(second)
    assert "&lt;i&gt;at 8pm&lt;/i&gt;, turn 2" in second  # the simulated user's words, escaped
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in second and "<script>alert" not in page
    verdict = text(element(page, "verdict"))
    assert "Agent tokens in / out 300 / 60" in verdict
    assert "Judge tokens 240" in verdict
    assert "Simulated user tokens 84" in verdict
    assert "$0.0060 agent $0.0030 · judge $0.0020 · user $0.0010" in verdict


def test_the_headline_is_the_stored_reason_not_the_verdict_cut_up(logged_in, version, user):
    """The transcript shows what the engine stored as the reason; it does not work it out of the verdict."""
    run = make_run(version, user)
    Conversation.objects.filter(run=run, index=0, iteration=0).update(
        reason="passed, in the engine's words", verdict=f"passed after 3 turns, told otherwise: {CONDITION}"
    )
    verdict = text(element(logged_in.get(run_url("conversation", run, 0)).content.decode(), "verdict"))
    assert f"✓ Passed, in the engine's words Ended: {CONDITION}" in verdict
    assert "told otherwise" not in verdict


def test_the_termination_reason_is_shown_prominently(logged_in, version, user):
    run = make_run(version, user)
    met = logged_in.get(run_url("conversation", run, 0)).content.decode()
    verdict = text(element(met, "verdict"))
    # The stored reason is the verdict without its ending ("passed after 3 turns"): the ending has its own line.
    assert f"✓ Passed after 3 turns Ended: {CONDITION} Turns 3" in verdict
    assert f"Conversation ended: {CONDITION}" in text(turn(met, 3))
    assert "&quot;confirmed&quot;" in element(met, "verdict")  # escaped like everything else
    maxed = logged_in.get(run_url("conversation", run, 0), {"iteration": 1}).content.decode()
    assert "✗ Failed after 10 turns Ended: max turns (10) Turns 10" in text(element(maxed, "verdict"))
    errored = logged_in.get(run_url("conversation", run, 0), {"iteration": 4}).content.decode()
    assert "Ended:" not in text(element(errored, "verdict"))  # the error says why it stopped
    greeting = logged_in.get(run_url("conversation", run, 1)).content.decode()
    assert "Ended:" not in greeting and "Simulated user tokens" not in greeting


def test_inputs_exhausted_is_shown_too(logged_in, version, user):
    run = make_run(version, user, booking=[("failed", 0.0, 2, "inputs exhausted")] * 5)
    page = logged_in.get(run_url("conversation", run, 0), {"iteration": 3}).content.decode()
    assert "Ended: inputs exhausted" in text(element(page, "verdict"))


def test_weighted_criteria_are_nested_under_their_check(logged_in, version, user):
    run = make_run(version, user)
    last = turn(logged_in.get(run_url("conversation", run, 0)).content.decode(), 3)
    check = last.split('<ul class="checks"', 1)[1]
    assert "llm_judge (2 weighted criteria)" in text(check.split("checks-nested", 1)[0])
    assert "weighted score 0.70 (threshold 0.50 of 1) over 2 criteria" in text(check)  # (0.4 + 3 × 0.8) / 4
    nested = check.split('<ul class="checks checks-nested checks-criteria" aria-label="Criteria">', 1)[1]
    items = [text(item) for item in nested.split("</li>") if "check-line" in item]
    assert items[0].startswith("✗ FAIL polite (weight 1) 0.40 score 0.40: <b>curt</b> but fine")
    assert items[1].startswith("✓ PASS accurate (weight 3) 0.80 score 0.80: table for two at 8pm")
    assert "&lt;b&gt;curt&lt;/b&gt;" in nested and "<b>curt" not in nested  # reasoning escaped
    assert "Judge's raw answer" in nested  # each criterion's raw answer, folded


def test_iteration_switcher_moves_between_iterations(logged_in, version, user):
    run = make_run(version, user)
    base = run_url("conversation", run, 0)
    page = logged_in.get(base, {"iteration": 2}).content.decode()
    switcher = element(page, "iteration-switcher", "nav")
    assert "iteration 3 of 5" in text(switcher)
    assert "iteration 3 of 5" in text(page.split("<h1>")[1].split("</h1>")[0])
    assert f'href="{base}?iteration=1" rel="prev"' in switcher
    assert f'href="{base}?iteration=3" rel="next"' in switcher
    current = re.findall(r'class="imark imark-\w+[^"]*is-current"', switcher)
    assert len(current) == 1 and 'aria-current="page">✓</a>' in switcher
    assert f'representative: <a href="{base}">iteration 1</a>' in switcher
    assert "FLAKY" in text(switcher)
    first = element(logged_in.get(base).content.decode(), "iteration-switcher", "nav")
    assert "iteration 1 of 5" in text(first) and 'aria-disabled="true">‹ Previous iteration' in first
    assert "This is the representative iteration" in text(first)
    last = element(logged_in.get(base, {"iteration": 4}).content.decode(), "iteration-switcher", "nav")
    assert 'aria-disabled="true">Next iteration ›' in last
    assert logged_in.get(base, {"iteration": 5}).status_code == 404


def test_a_shared_run_shows_iterations_with_share_links(version, user):
    run = make_run(version, user)
    link = ShareLink.objects.create(run=run, created_by=user)
    visitor = Client()
    page = visitor.get(reverse("share:run", args=[link.token])).content.decode()
    row = iteration_rows(page)["booking"]
    shared = reverse("share:conversation", args=[link.token, 0])
    assert f'href="{shared}?iteration=1" class="imark imark-failed"' in row
    assert "/runs/" not in element(page, "iterations")  # nothing that needs a login
    transcript = visitor.get(shared, {"iteration": 1}).content.decode()
    assert "iteration 2 of 5" in text(element(transcript, "iteration-switcher", "nav"))


def test_runs_without_repeats_have_no_iterations_section(logged_in, user):
    source = SUITE.replace("iterations: 5\n", "")
    version = suite_services.create_suite(owner=user, source=source).latest_version
    run = Run.objects.create(suite_version=version, created_by=user, model="mock", endpoint_name="mock",
                             is_mock=True, status=Status.PASSED)  # fmt: skip
    add(run, 1, 0, "greeting", "passed", 1.0, one_turn("Hello!", "Hello there.", True))
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert 'id="iterations"' not in page and "Iter." not in page
    transcript = logged_in.get(run_url("conversation", run, 1)).content.decode()
    assert 'id="iteration-switcher"' not in transcript


def test_the_editor_says_how_many_conversations_iterations_make(logged_in):
    problems = logged_in.post(reverse("suites:validate"), {"source": SUITE}).content.decode()
    assert "Valid — 3 evals · 15 conversations a run" in text(problems)  # 3 evals × iterations: 5
    once = logged_in.post(reverse("suites:validate"), {"source": SUITE.replace("iterations: 5\n", "")})
    assert "conversations a run" not in once.content.decode()


def test_an_eval_cancelled_before_any_iteration_finished_reads_cancelled(logged_in, version, user):
    """Cancelled iterations are not errors: the eval reads "cancelled", never "error — no iteration was graded"."""
    run = make_run(version, user, status=Status.CANCELLED, booking=[("queued", None, 0, "")] * 5)
    Conversation.objects.filter(run=run, index=0).update(status=Status.CANCELLED, verdict="cancelled")
    page = logged_in.get(run_url("detail", run)).content.decode()
    booking = iteration_rows(page)["booking"]
    assert '<span class="badge badge-cancelled">cancelled</span>' in booking
    assert "cancelled before any iteration was graded" in text(booking)
    assert "error" not in text(booking) and "no iteration was graded" not in text(booking)
    (item,) = [item for item in selectors.iterated_for(run, list(run.conversations.all())) if item.index == 0]
    assert item.status == "cancelled"  # the results JSON says so too


def test_results_json_streams_the_same_document_a_chunk_at_a_time(logged_in, version, user, monkeypatch):
    """results.json is written as its conversations are read, a few at a time (here 4 of the run's 20 per
    query), and parses to exactly the report held in memory: its gates, repeated evals' statistics and
    totals included."""
    from runs import selectors

    run = make_run(version, user)
    monkeypatch.setattr("runs.selectors.results.RESULTS_CHUNK", 4)
    with CaptureQueriesContext(connection) as queries:
        response = logged_in.get(run_url("json", run))
        streamed = json.loads(body(response))
    assert response.streaming
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if 'FROM "runs_conversation"' in q["sql"] and "LIMIT 4" in q["sql"]
    ]
    assert len(reads) == -(-run.conversations.count() // 4)
    assert streamed == selectors.report(run).model_dump(mode="json")
    assert streamed["iterated"] and streamed["totals"]["evals"] == run.conversations.count()


def test_a_live_run_reads_again_only_the_repeated_evals_whose_iterations_finished_since(
    logged_in, version, user
):
    run = make_run(version, user, status=Status.RUNNING, booking=[*BOOKING[:4], ("running", None, 0, "")])

    def refresh() -> tuple[str, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            poll = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true").content.decode()
        # The statistics' aggregate names the evals it reads: `"index" IN (…)` with its COUNT(...) FILTER.
        read = [
            q["sql"]
            for q in queries.captured_queries
            if "score_squares" in q["sql"] or '"passes"' in q["sql"]
        ]
        return poll, read

    poll, read = refresh()
    assert len(read) == 1 and "4/5 done" in text(iteration_rows(poll)["booking"])
    _, read = refresh()
    assert read == []  # nothing finished since: every eval's statistics were kept
    Conversation.objects.filter(run=run, index=0, iteration=4).update(status=Status.FAILED, score=0.0)
    poll, read = refresh()
    assert len(read) == 1 and "IN (0)" in read[0]  # booking alone is read again
    row = text(iteration_rows(poll)["booking"])
    assert "5/5 done" in row and "60% 3/5" in row


def test_streamed_results_leave_no_conversation_to_the_garbage_collector(version, user, monkeypatch):
    """Each streamed chunk is freed as it ends, by reference counting: no conversation or turn of it waits in
    a reference cycle for a full garbage collection, which a process holding a large suite runs seldom (the
    chunks of a 100,000-conversation export piled up to 98 MB that way)."""
    import gc

    from runs.models import Override, Turn

    run = make_run(version, user)
    monkeypatch.setattr("runs.selectors.results.RESULTS_CHUNK", 4)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept in gc.garbage, to look at
    try:
        results = list(selectors.eval_results(run))
        gc.collect()
        left = [obj for obj in gc.garbage if isinstance(obj, (Conversation, Turn, Override))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(results) == run.conversations.count() == 15
    assert left == []
