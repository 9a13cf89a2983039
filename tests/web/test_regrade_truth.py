"""A re-grade tells the truth about what it could not replay, played in this process as a worker plays it
against the real fake endpoint: an eval the new version added is skipped, "not in the source run", and counts
in no total; a follow-up or scripted turn the new version changed or removed, or a simulated user it would ask
otherwise, marks the eval diverged at that turn on the run table, the transcript and results.json; and a
retry is neither offered nor accepted where all it could do is replay the same stored turns."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from runs.models import Run
from runs.services import regrade
from runs.tokens import create_token
from suites.services import create_suite, save_version
from tests.factories import play

# Committed: the worker's threads write through connections of their own, which an open test transaction
# would keep waiting on SQLite's lock while a simulated user is asked.
pytestmark = pytest.mark.django_db(transaction=True)

SUITE = """\
name: regrade-truth
model: fake/agent
judge: fake/judge
evals:
  - id: capital
    input: [Capital of France?, And of Peru?]
    ground_truth: [Paris, Lima]
    grader: contains
  - id: steps
    turns:
      - input: Say hi.
        checks: [{contains: hi}]
      - input: Say bye.
        checks: [{contains: bye}]
      - input: Say thanks.
        checks: [{contains: thanks}]
  - id: booking
    prompt: Book a table.
    checks: [{contains: Booked}]
    simulate:
      persona: A customer who wants a table.
      follow_ups: [{input: For two people.}]
      max_turns: 3
      on_max_turns: pass
"""

ADDED = "  - id: extra\n    prompt: Something new?\n    checks: [{contains: new}]\n"


@pytest.fixture
def source(user, fake_endpoint, fake_openai):
    fake_openai.script("Capital of France?", ["Paris.", "Lima, I believe."])
    fake_openai.script("Say hi.", ["hi", "bye", "thanks"])
    fake_openai.script("Book a table.", ["How many?", "What time?", "Booked."])
    fake_openai.rule("customer who wants a table", "At seven, please.", where="any", model="judge")
    run = play(create_run_of(user, SUITE))
    assert run.status == "passed", list(run.conversations.values_list("eval_id", "verdict"))
    return run


def create_run_of(user, source):
    from runs.services import create_run

    return create_run(version=create_suite(owner=user, source=source).latest_version, user=user)


def regraded(source, user, text):
    version = save_version(suite=source.suite_version.suite, source=text, user=user)
    return play(regrade(source, version=version, user=user))


def results(client, run) -> dict:
    return json.loads(b"".join(client.get(reverse("runs:json", args=[run.pk])).streaming_content))


def test_an_added_eval_is_not_in_the_source_run_and_counts_in_no_total(client, user, source, fake_openai):
    calls = len(fake_openai.chat_requests())
    new = regraded(source, user, SUITE + ADDED)
    assert len(fake_openai.chat_requests()) == calls  # nothing was asked, not even for the added eval
    extra = new.conversations.get(eval_id="extra")
    assert (extra.status, extra.verdict, extra.diverged_at) == ("skipped", "not in the source run", None)
    assert new.status == "passed"  # the re-graded evals decide, and they all passed again

    client.force_login(user)
    body = results(client, new)
    assert body["status"] == "passed"
    totals = body["totals"]
    assert (totals["evals"], totals["passed"], totals["failed"], totals["error"], totals["skipped"]) == (
        4,
        3,
        0,
        0,
        1,
    )
    (added,) = [item for item in body["evals"] if item["id"] == "extra"]
    assert added["status"] == "skipped" and added["verdict"] == "not in the source run"

    junit = client.get(reverse("runs:export", args=[new.pk, "junit"])).content.decode()
    assert '<skipped message="not in the source run"' in junit and 'errors="0"' in junit
    csv = b"".join(client.get(reverse("runs:export", args=[new.pk, "csv"])).streaming_content).decode()
    assert any(line.startswith("extra,0,tree,skipped,") for line in csv.splitlines()), csv

    page = client.get(reverse("runs:detail", args=[new.pk])).content.decode()
    assert "1 conversation not in the source run" in page and 'class="badge badge-skipped"' in page
    assert "Retry errored conversations" not in page
    transcript = client.get(reverse("runs:conversation", args=[new.pk, 3])).content.decode()
    assert (
        "Not in the source run" in transcript and "The conversation stopped with an error" not in transcript
    )
    compared = client.get(reverse("runs:compare_with", args=[new.pk, source.pk])).context["result"]
    assert (compared.counts["added"], compared.counts["regression"], compared.counts["unchanged"]) == (
        1,
        0,
        3,
    )


def test_a_changed_scripted_turn_diverges_there_visibly(client, user, source):
    new = regraded(source, user, SUITE.replace("Say bye.", "Say goodbye."))
    steps = new.conversations.get(eval_id="steps")
    assert (steps.status, steps.diverged_at) == ("error", 2)
    assert steps.verdict.startswith("diverged at turn 2: needs a new run (it would send 'Say goodbye.'")
    client.force_login(user)
    (item,) = [e for e in results(client, new)["evals"] if e["id"] == "steps"]
    assert item["diverged_at"] == 2 and len(item["turns"]) == 1
    page = client.get(reverse("runs:detail", args=[new.pk])).content.decode()
    assert ">diverged at turn 2</span>" in page
    transcript = client.get(reverse("runs:conversation", args=[new.pk, 1])).content.decode()
    assert "Diverged at turn 2: this version parts from the stored conversation here." in transcript


def test_a_removed_scripted_turn_diverges_instead_of_passing_on_fewer_turns(user, source):
    removed = SUITE.replace("      - input: Say thanks.\n        checks: [{contains: thanks}]\n", "")
    new = regraded(source, user, removed)
    steps = new.conversations.get(eval_id="steps")
    assert (steps.status, steps.diverged_at) == ("error", 3), steps.verdict
    assert "this version has no such turn; the stored one sent 'Say thanks.'" in steps.verdict
    assert new.conversations.get(eval_id="capital").status == "passed"


def test_a_deleted_follow_up_is_not_passed_off_as_the_simulated_users(user, source):
    new = regraded(source, user, SUITE.replace("      follow_ups: [{input: For two people.}]\n", ""))
    booking = new.conversations.get(eval_id="booking")
    assert (booking.status, booking.diverged_at) == ("error", 2), booking.verdict
    assert (
        "a simulated user would write it, the stored turn sent 'For two people.' as scripted"
        in booking.verdict
    )


def test_a_simulated_user_replays_only_under_the_same_persona(user, source, fake_openai):
    calls = len(fake_openai.chat_requests())
    same = regraded(source, user, SUITE)
    assert same.conversations.get(eval_id="booking").status == "passed"  # asked the same: its answer stands
    assert len(fake_openai.chat_requests()) == calls
    changed = regraded(source, user, SUITE.replace("A customer who wants", "An impatient customer who wants"))
    booking = changed.conversations.get(eval_id="booking")
    assert (booking.status, booking.diverged_at) == ("error", 3), booking.verdict
    assert "the simulated user would be asked otherwise" in booking.verdict
    assert len(fake_openai.chat_requests()) == calls


def test_retry_is_neither_offered_nor_accepted_for_divergences(client, user, source):
    new = regraded(source, user, SUITE.replace("Say bye.", "Say goodbye."))
    assert new.status == "error"
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[new.pk])).content.decode()
    assert reverse("runs:retry_errored", args=[new.pk]) not in page
    assert "No retry: the 1 errored conversation diverged from the source run" in page
    _, token = create_token(user, "ci")
    response = client.post(f"/api/runs/{new.pk}/retry-errored", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 409 and "diverged from the source run" in response.json()["detail"]
    client.post(reverse("runs:retry_errored", args=[new.pk]))
    new.refresh_from_db()
    assert new.status == "error" and new.conversations.get(eval_id="steps").status == "error"
    assert Run.objects.get(pk=new.pk).finished_at is not None  # not reopened


def test_a_retry_requeues_only_what_it_can_change(client, user, source, fake_openai):
    judged = SUITE.replace("Say bye.", "Say goodbye.").replace(
        "    grader: contains\n",
        "    grader: contains\n    checks: [{llm_judge: {criteria: Names the capital}}]\n",
    )
    fake_openai.fail_next(1, status=400)  # the re-grade's one call: the judge of the edited check
    new = regraded(source, user, judged)
    capital = new.conversations.get(eval_id="capital")
    assert (capital.status, capital.diverged_at) == ("error", None), capital.verdict
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[new.pk])).content.decode()
    assert reverse("runs:retry_errored", args=[new.pk]) in page and "No retry" not in page
    client.post(reverse("runs:retry_errored", args=[new.pk]))
    statuses = dict(new.conversations.values_list("eval_id", "status"))
    assert (statuses["capital"], statuses["steps"]) == ("queued", "error")  # the divergence is left as it was


def test_a_regrade_with_nothing_to_regrade_ends_at_once_as_skipped(user, source):
    renamed = SUITE.replace("id: capital", "id: capital-2").replace("id: steps", "id: steps-2")
    renamed = renamed.replace("id: booking", "id: booking-2")
    new = regrade(
        source, version=save_version(suite=source.suite_version.suite, source=renamed, user=user), user=user
    )
    assert (new.status, new.finished_at is not None) == ("skipped", True)  # before any worker
    assert set(new.conversations.values_list("status", flat=True)) == {"skipped"}
