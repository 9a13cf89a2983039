"""Overriding a verdict: a reviewer overturns one check's outcome on a transcript with a
note; the conversation's verdict and its run's status follow; the override is shown as such, counted apart,
and kept in the compare page and every export; withdrawing it restores the run's own verdict.

The run is played in this process as a worker plays it, against the real fake endpoint."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs import selectors
from runs.models import Override, Run
from runs.services import create_run
from suites.services import create_suite
from tests.factories import body, join, play

pytestmark = pytest.mark.django_db

# Not the demo suite: `contains` checks a review overrides, and a scripted capital question graded per turn.
SUITE = """\
name: review-me
model: fake/agent
evals:
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - contains: "105"
        prompt: Please recalculate.
        checks: [{contains: "105"}]
  - id: capital
    input: [Capital of France?, And of Peru?]
    ground_truth: [Paris, Lima]
    grader: contains
"""


@pytest.fixture
def run(user, fake_endpoint, fake_openai):
    # The model spells the answer out: the check says fail twice, a reviewer would say it is right.
    fake_openai.script("What is 15 * 7?", ["One hundred and five.", "Still one hundred and five."])
    fake_openai.script("Capital of France?", ["Paris.", "Lima."])
    suite = create_suite(owner=user, source=SUITE)
    return play(create_run(version=suite.latest_version, user=user))


def override(client, run, index, **fields):
    return client.post(reverse("runs:override", args=[run.pk, index]), fields, follow=True)


def test_overriding_a_check_changes_the_verdict_and_the_run_and_says_so(logged_in, run, user):
    assert run.status == "failed"
    multiply = selectors.get_conversation(run, 0)
    assert (multiply.status, multiply.turn_count) == ("failed", 2)

    page = override(
        logged_in, run, 0, turn="1", target="checks[0]", passed="1", note="spelled out is still 105"
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "Overridden: the conversation" in html

    multiply.refresh_from_db()
    run.refresh_from_db()
    assert (multiply.status, multiply.passed_on_turn) == ("passed", 1)
    assert multiply.original["status"] == "failed"
    assert "turns after turn 1 no longer count" in multiply.verdict
    assert run.status == "passed"  # every conversation passes as reviewed
    # The stored turn keeps the check's own outcome.
    assert multiply.turns.get(position=1).record["checks"][0]["passed"] is False

    # The transcript: the overturned check is marked, the note and the reviewer are there, and the run's own
    # verdict is said.
    assert "The run said <strong>failed</strong>" in html
    assert "spelled out is still 105" in html and user.username in html
    assert html.count('class="badge badge-override"') >= 2  # on the verdict and on the check

    # The run page counts it apart and can show only overridden conversations.
    detail = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "1 overridden" in detail
    only = logged_in.get(reverse("runs:detail", args=[run.pk]), {"status": "overridden"}).content.decode()
    assert ">multiply<" in only and ">capital<" not in only


def test_an_override_is_kept_in_every_export(logged_in, run):
    override(logged_in, run, 0, turn="1", target="checks[0]", passed="1", note="right, in words")
    results = json.loads(body(logged_in.get(reverse("runs:json", args=[run.pk]))))
    multiply = next(item for item in results["evals"] if item["id"] == "multiply")
    assert multiply["status"] == "passed" and multiply["original"]["status"] == "failed"
    assert multiply["overrides"][0] | {"at": ""} == {
        "turn": 1, "target": "checks[0]", "passed": True, "note": "right, in words", "by": "alice", "at": "",
    }  # fmt: skip
    assert multiply["turns"][0]["checks"][0]["overridden"] is True
    assert results["totals"]["passed"] == 2

    evals = list(
        csv.DictReader(
            io.StringIO(body(logged_in.get(reverse("runs:export", args=[run.pk, "csv"]))).decode())
        )
    )
    row = next(item for item in evals if item["eval_id"] == "multiply")
    assert (row["status"], row["overridden_from"]) == ("passed", "failed")
    assert "turn 1 checks[0] → passed by alice: right, in words" in row["override_notes"]

    junit = logged_in.get(reverse("runs:export", args=[run.pk, "junit"])).content.decode()
    assert 'failures="0"' in junit and "Overridden by a reviewer (the run said failed)" in junit
    markdown = logged_in.get(reverse("runs:export", args=[run.pk, "md"])).content.decode()
    assert "1 verdict reviewed by hand (1 changed by overrides" in markdown


def test_compare_keeps_the_override_marked(logged_in, run, user, fake_openai):
    before = play(create_run(version=run.suite_version, user=user))
    override(logged_in, run, 0, turn="2", target="checks[0]", passed="1", note="fine")
    page = logged_in.get(reverse("runs:compare_with", args=[run.pk, before.pk])).content.decode()
    assert "fixed" in page and "badge-override" in page


def test_withdrawing_restores_the_runs_own_verdict(logged_in, run):
    override(logged_in, run, 0, turn="1", target="checks[0]", passed="1", note="ok")
    item = Override.objects.get()
    logged_in.post(reverse("runs:remove_override", args=[run.pk, 0, item.pk]), {"turn": "1"})
    multiply = selectors.get_conversation(run, 0)
    run.refresh_from_db()
    assert (multiply.status, multiply.passed_on_turn, multiply.original) == ("failed", None, {})
    assert multiply.verdict == "failed after 2 turns"
    assert run.status == "failed"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"turn": "1", "target": "checks[0]", "passed": "1", "note": "  "}, "say why in a note"),
        ({"turn": "9", "target": "checks[0]", "passed": "1", "note": "x"}, "no turn 9"),
        ({"turn": "1", "target": "checks[3]", "passed": "1", "note": "x"}, "no outcome"),
        ({"turn": "1", "target": "checks[0]", "passed": "0", "note": "x"}, "already failed"),
    ],
)
def test_a_refused_override_says_why_and_changes_nothing(logged_in, run, fields, message):
    page = override(logged_in, run, 0, **fields).content.decode()
    assert "Not overridden: " in page and message in page
    assert not Override.objects.exists()
    assert selectors.get_conversation(run, 0).status == "failed"


def test_overrides_need_the_owner_and_csrf(run, django_user_model, user):
    other = Client()
    other.force_login(django_user_model.objects.create_user("mallory", password="x"))
    url = reverse("runs:override", args=[run.pk, 0])
    fields = {"turn": "1", "target": "checks[0]", "passed": "1", "note": "x"}
    assert other.post(url, fields).status_code == 404
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(url, fields).status_code == 403
    assert not Override.objects.exists()


def test_a_shared_link_shows_overrides_but_offers_no_form(logged_in, run):
    override(logged_in, run, 0, turn="1", target="checks[0]", passed="1", note="right")
    logged_in.post(reverse("runs:share", args=[run.pk]))
    token = run.share_links.get().token
    page = Client().get(reverse("share:conversation", args=[token, 0])).content.decode()
    assert "badge-override" in page and "right" in page
    assert "Withdraw" not in page and "Mark as" not in page
    own = logged_in.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    assert "Mark as failed" in own  # the owner may overturn the capital eval's passed grades


def test_a_scripted_turns_grade_overridden_recounts_its_turns_and_strip(logged_in, run):
    capital = selectors.get_conversation(run, 1)
    assert (capital.status, capital.turns_passed, capital.turns_total) == ("passed", 2, 2)
    override(logged_in, run, 1, turn="2", target="grade", passed="0", note="Lima, but unsure: not an answer")
    capital.refresh_from_db()
    assert (capital.status, capital.turns_passed, capital.turns_total) == ("failed", 1, 2)
    assert capital.original["reviewed_turns"] == {"2": False}
    page = logged_in.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    assert '<strong class="strip-count">1/2</strong>' in page
    assert "Turn 2 failed" in page and "(overridden by a reviewer)" in page
    detail = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "(overridden by a reviewer)" in detail


def test_the_run_page_keeps_a_finished_runs_counts_until_a_reviewer_changes_them(logged_in, run):
    url = reverse("runs:detail", args=[run.pk])
    Run.objects.filter(pk=run.pk).update(summary={})  # as a run that ended before summaries were kept
    with CaptureQueriesContext(connection) as first:
        before = logged_in.get(url).content.decode()
    with CaptureQueriesContext(connection) as second:
        again = logged_in.get(url).content.decode()
    # The second page load does not count the run's conversations again: they are kept for a finished run.
    summing = [
        q["sql"] for q in second.captured_queries if 'SUM("runs_conversation"."prompt_tokens")' in q["sql"]
    ]
    assert summing == [] and len(second) < len(first)
    assert 'SUM("runs_conversation"."prompt_tokens")' in " ".join(q["sql"] for q in first.captured_queries)
    assert "1 overridden" not in before and "1 overridden" not in again
    # An override changes the counts at once, though the run stays failed (its revision is part of what keeps
    # them), and so does withdrawing it.
    override(logged_in, run, 1, turn="1", target="grade", passed="0", note="Paris. is not the city's name")
    run.refresh_from_db()
    assert run.status == "failed"
    after = logged_in.get(url).content.decode()
    assert "1 overridden" in after
    item = Override.objects.get()
    logged_in.post(reverse("runs:remove_override", args=[run.pk, 1, item.pk]), {"turn": "1"})
    assert "1 overridden" not in logged_in.get(url).content.decode()


def test_a_run_that_ended_keeps_its_counts_for_its_first_view_until_a_reviewer_changes_them(logged_in, run):
    # finalize kept the progress aggregate on the run: the first view of the page in a fresh web process
    # (nothing in its memory) scans no conversation, and shows what a scan would.
    assert run.summary["status"] == run.status == "failed" and run.summary["revision"] == run.revision
    assert run.summary["progress"] == selectors.progress(run)
    url = reverse("runs:detail", args=[run.pk])
    caches["aggregates"].clear()
    with CaptureQueriesContext(connection) as first:
        page = logged_in.get(url).content.decode()
    assert not any('SUM("runs_conversation"."prompt_tokens")' in q["sql"] for q in first.captured_queries)
    assert "1 passed" in page and "1 failed" in page
    # An override leaves the kept summary behind (an older revision): the page counts afresh.
    override(logged_in, run, 1, turn="1", target="grade", passed="0", note="not the city's name")
    caches["aggregates"].clear()
    with CaptureQueriesContext(connection) as after:
        page = logged_in.get(url).content.decode()
    assert any('SUM("runs_conversation"."prompt_tokens")' in q["sql"] for q in after.captured_queries)
    assert "0 passed" in page and "2 failed" in page and "1 overridden" in page


def test_a_run_ends_though_its_summary_cannot_be_kept(run, monkeypatch):
    from runs.worker import scheduling

    def broken(*_):
        raise RuntimeError("the summary's read failed")

    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None, summary={})
    monkeypatch.setattr(scheduling, "summary_to_store", broken)
    assert scheduling.finalize(run.pk)
    run.refresh_from_db()
    assert (run.status, run.summary) == ("failed", {}) and run.finished_at is not None
    monkeypatch.undo()
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    assert scheduling.finalize(run.pk)
    run.refresh_from_db()
    assert run.summary["status"] == "failed" and run.summary["progress"]["total"] == 2


@pytest.mark.parametrize("role", ["reviewer", "editor"])
def test_another_members_override_takes_the_admin_role_to_withdraw_or_replace(
    role, logged_in, run, user, django_user_model
):
    """An admin's override stands against a reviewer or editor: withdrawing it is a 403, as revoking another
    member's share link is, and overriding the same outcome again is refused rather than replacing it."""
    override(logged_in, run, 0, turn="1", target="checks[0]", passed="1", note="admin decision")
    given = Override.objects.get()
    member = django_user_model.objects.create_user(f"a-{role}", password="x")
    join(member, role=role)
    client = Client()
    client.force_login(member)
    transcript = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert 'disabled title="Another member\'s override: needs the admin role in this project">Withdraw' in (
        transcript
    )
    withdraw = reverse("runs:remove_override", args=[run.pk, 0, given.pk])
    refused = client.post(withdraw, {"turn": "1"})
    assert refused.status_code == 403 and "admin role" in refused.content.decode()
    replaced = override(client, run, 0, turn="1", target="checks[0]", passed="1", note="mine now")
    assert "alice overrode this outcome already" in replaced.content.decode()
    assert Override.objects.get() == given
    given.refresh_from_db()
    assert (given.created_by, given.passed, given.note) == (user, True, "admin decision")
    assert selectors.get_conversation(run, 0).status == "passed"


def test_a_reviewer_withdraws_and_replaces_their_own_override_and_an_admin_anyones(
    logged_in, run, django_user_model
):
    reviewer = django_user_model.objects.create_user("rev", password="x")
    join(reviewer, role="reviewer")
    client = Client()
    client.force_login(reviewer)
    override(client, run, 0, turn="1", target="checks[0]", passed="1", note="first")
    override(client, run, 0, turn="1", target="checks[0]", passed="1", note="second thoughts")
    assert Override.objects.get().note == "second thoughts"  # their own: replaced
    transcript = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert '<button type="submit" class="btn btn-xs">Withdraw</button>' in transcript
    given = Override.objects.get()
    withdraw = reverse("runs:remove_override", args=[run.pk, 0, given.pk])
    assert client.post(withdraw, {"turn": "1"}).status_code == 302
    assert not Override.objects.exists()
    override(client, run, 0, turn="1", target="checks[0]", passed="1", note="again")
    given = Override.objects.get()
    admin_page = logged_in.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert '<button type="submit" class="btn btn-xs">Withdraw</button>' in admin_page
    withdraw = reverse("runs:remove_override", args=[run.pk, 0, given.pk])
    assert logged_in.post(withdraw, {"turn": "1"}).status_code == 302  # alice, an admin: anyone's
    assert not Override.objects.exists()
