"""Re-grading a stored run, played in this process as a worker plays it, against the real fake
endpoint: the new run is linked to its source and marked re-graded, the model under test is never called,
edited checks grade the stored replies, a tree that would part from the stored conversation is "diverged at
turn N: needs a new run", and the two runs compare."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs import selectors
from runs.models import Run
from runs.services import RegradeRefused, create_run, regrade
from suites.services import create_suite, save_version
from tests.engine.doubles import MULTIPLY_TREE
from tests.factories import play

pytestmark = pytest.mark.django_db

SUITE = (
    "name: regrade-me\nmodel: fake/agent\nevals:\n"
    + MULTIPLY_TREE
    + """\
  - id: capital
    input: [Capital of France?, And of Peru?]
    ground_truth: [Paris, Lima]
    grader: contains
"""
)


@pytest.fixture
def source(user, fake_endpoint, fake_openai):
    fake_openai.script("What is 15 * 7?", ["I think it is 100.", "Sorry: 105."])
    fake_openai.script("Capital of France?", ["Paris.", "Lima, I believe."])
    suite = create_suite(owner=user, source=SUITE)
    return play(create_run(version=suite.latest_version, user=user))


def test_regrading_calls_no_model_and_grades_with_the_edited_checks(user, source, fake_openai):
    assert source.status == "passed"
    calls = len(fake_openai.chat_requests())
    suite = source.suite_version.suite
    # The edit: Peru's ground truth is now "Cusco" (a wrong edit, but the user's), and the tree's checks
    # accept turn 1's "I think it is 100.", so it passes there.
    edited = (
        SUITE.replace("[Paris, Lima]", "[Paris, Cusco]")
        .replace('- contains: "105"\n        prompt', '- contains: "100"\n        prompt')
        .replace('- contains: "7"\n        prompt', "- contains: think\n        prompt")
    )
    version = save_version(suite=suite, source=edited, user=user)
    new = play(regrade(source, version=version, user=user))
    assert len(fake_openai.chat_requests()) == calls  # the model under test was not asked again
    assert new.regraded_from == source and new.model == source.model
    multiply, capital = selectors.report(new).evals
    assert (multiply.status, multiply.passed_on_turn, len(multiply.turns)) == ("passed", 1, 1), (
        multiply.verdict
    )
    assert capital.status == "failed" and [t.response for t in capital.turns] == [
        "Paris.",
        "Lima, I believe.",
    ]
    assert multiply.totals.prompt_tokens == 0  # nothing spent on the model under test


def test_a_tree_that_would_part_is_marked_diverged(user, source, fake_openai):
    suite = source.suite_version.suite
    version = save_version(suite=suite, user=user, source=SUITE.replace('- contains: "105"\n        prompt', '- contains: "100"\n        prompt').replace('- contains: "7"\n        prompt', '- contains: "8"\n        prompt'))  # fmt: skip
    new = play(regrade(source, version=version, user=user))
    multiply = new.conversations.get(eval_id="multiply")
    assert multiply.status == "error"
    assert multiply.verdict.startswith("diverged at turn 2: needs a new run (it would send 'Show your work.'")
    assert new.conversations.get(eval_id="capital").status == "passed"


def test_the_run_page_offers_regrading_and_marks_the_result(client, user, source):
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[source.pk])).content.decode()
    assert reverse("runs:regrade", args=[source.pk]) in page and "Re-grade" in page
    response = client.post(reverse("runs:regrade", args=[source.pk]), {"version": "1"})
    new = Run.objects.exclude(pk=source.pk).get()
    assert response["Location"] == reverse("runs:detail", args=[new.pk])
    play(new)
    page = client.get(reverse("runs:detail", args=[new.pk])).content.decode()
    assert "re-graded" in page and reverse("runs:compare_with", args=[new.pk, source.pk]) in page
    compared = client.get(reverse("runs:compare_with", args=[new.pk, source.pk]))
    assert compared.context["result"].counts["unchanged"] == 2  # the same checks on the same replies


def test_an_active_run_or_another_suites_version_is_refused(user, fake_endpoint):
    suite = create_suite(owner=user, source=SUITE)
    active = create_run(version=suite.latest_version, user=user)
    with pytest.raises(RegradeRefused, match="still going"):
        regrade(active, version=suite.latest_version, user=user)
    other = create_suite(owner=user, source=SUITE.replace("regrade-me", "other"))
    active.status = "passed"
    active.save()
    with pytest.raises(RegradeRefused, match="same suite"):
        regrade(active, version=other.latest_version, user=user)


def test_the_api_regrades(client, user, source):
    from runs.tokens import create_token

    _, token = create_token(user, "ci")
    response = client.post(f"/api/runs/{source.pk}/regrade", {"version": 1}, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip
    assert response.status_code == 201 and response.json()["regraded_from"] == str(source.pk)
