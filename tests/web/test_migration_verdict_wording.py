"""Migration runs.0038 rewords the verdicts stored in the earlier words ("passed: 2/2 passed", "failed: 2/3
passed (score 0.67, needs 1)") into the engine's, so an old run reads as a new one on its pages and in its
exports, and leaves every other verdict as it was."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from runs.models import Conversation, Status
from suites import services as suite_services
from tests.factories import mock_run

wording = importlib.import_module("runs.migrations.0039_verdicts_in_one_wording")

REWORDED = [  # (stored, the conversation's score, its turns) → as the engine words it now
    ("passed: 2/2 passed", 1.0, 2, "every turn passed: 2 of 2"),
    ("passed: 2/2 passed", 1.0, 3, "every graded turn passed: 2 of 2"),
    ("passed: 1/2 passed", 0.5, 2, "1 of 2 turns passed, score 0.50"),
    ("failed: 2/3 passed (score 0.67, needs 1)", 2 / 3, 3, "2 of 3 turns passed, score 0.67 < 1.00"),
    ("failed: 2/3 passed (score 0.67, needs 0.7)", None, 3, "2 of 3 turns passed, score 0.67 < 0.70"),
    ("failed: 0/1 passed, stopped after turn 1 (score 0.00, needs 1)", 0.0, 1,
     "0 of 1 turn passed, stopped after turn 1, score 0.00 < 1.00"),
    ("failed: 2/3 passed (score 0.67, needs 1) (reviewed: turns after turn 2 no longer count)", 2 / 3, 3,
     "2 of 3 turns passed, score 0.67 < 1.00 (reviewed: turns after turn 2 no longer count)"),
    ("failed: weighted score 0.71 (needs 0.75): quality 0.80✓, ascii_only 0.50✗; 1/2 turns passed", 0.71, 2,
     "weighted score 0.71 < 0.75: quality 0.80✓, ascii_only 0.50✗; 1 of 2 turns passed"),
    ("passed: weighted score 0.67 (needs 0): correctness 0.67✗; 2/3 turns passed", 2 / 3, 3,
     "weighted score 0.67 ≥ 0.00: correctness 0.67✗; 2 of 3 turns passed"),
    ("failed: weighted score 0.80 (needs 0.75), required ascii_only failed: quality 1.00✓, ascii_only 0.33✗",
     0.8, 1, "weighted score 0.80 ≥ 0.75, required ascii_only failed: quality 1.00✓, ascii_only 0.33✗"),
    ("failed: 1/2 graders passed: quality 0.90✓, ascii_only 0.00✗", 0.45, 1,
     "1 of 2 graders passed: quality 0.90✓, ascii_only 0.00✗"),
    ("passed: 1/2 graders passed (any): quality 0.90✓, ascii_only 0.00✗", 0.45, 1,
     "1 of 2 graders passed, one is enough: quality 0.90✓, ascii_only 0.00✗"),
    ("passed: 1/1 graders passed: correctness 0.67✓; 2/3 turns passed", 2 / 3, 3,
     "correctness 0.67✓; 2 of 3 turns passed"),
    ("failed: 2/2 graders passed: a 1.00✓, b 1.00✓; failed: 1/2 passed (score 0.50, needs 1)", 1.0, 2,
     "every grader passed: a 1.00✓, b 1.00✓; checks: 1 of 2 turns passed, score 0.50 < 1.00"),
    ("passed: score 0.67 (needs 0.6), the mean of the turns' 1.00, 0.00 and the graders' 1.00: conversation 1.00✓",
     2 / 3, 2, "score 0.67 ≥ 0.60, the mean of the turns' 1.00, 0.00 and the graders' 1.00: conversation 1.00✓"),
    ("failed: score 0.50 (needs 0.8), the mean of the graders' 0.00 (required x failed): x 0.00✗", 0.5, 1,
     "score 0.50 < 0.80, the mean of the graders' 0.00, required x failed: x 0.00✗"),
]  # fmt: skip
LEFT = [
    "passed on turn 2",
    "failed after 3 turns",
    "passed after 3 turns: condition met: after_turns 3",
    "error on turn 1: error 500 from the endpoint",
    "not started: cost limit $5.00 reached",
    "every turn passed: 2 of 2",
    "2 of 3 turns passed, score 0.67 < 1.00",
]


@pytest.mark.parametrize(("stored", "score", "turns", "now"), REWORDED)
def test_a_verdict_in_the_earlier_words_reads_as_the_engine_words_it(stored, score, turns, now):
    assert wording.reworded(stored, score, turns) == now
    assert "(score" not in now and "(needs" not in now and "(any)" not in now
    assert not now.startswith(("passed:", "failed:"))


@pytest.mark.parametrize("stored", LEFT)
def test_other_verdicts_and_those_in_the_engines_words_are_left_as_they_are(stored):
    assert wording.reworded(stored, 1.0, 2) == stored


SUITE = """\
name: old-words
model: mock
grader: contains
evals:
  - id: capitals
    input: ["Capital of France?", "And of Germany?", "And of Italy?"]
    ground_truth: [Paris, Berlin, Rome]
"""


@pytest.mark.sql  # finds the rows to reword by a regex, which each database runs its own way
@pytest.mark.django_db
def test_stored_conversations_and_their_original_verdicts_are_reworded_and_shown_so(user, logged_in):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status=Status.FAILED)
    failed = "failed: 2/3 passed (score 0.67, needs 1)"
    capitals = Conversation.objects.create(
        run=run, index=0, eval_id="capitals", style="scripted", status=Status.PASSED, score=1.0,
        verdict="passed: 3/3 passed", reason="passed: 3/3 passed", turn_count=3, turns_passed=3,
        turns_total=3, original={"status": "failed", "score": 2 / 3, "verdict": failed, "reason": failed,
                                 "passed_on_turn": None, "turns_passed": 2, "turns_total": 3},
    )  # fmt: skip
    tree = Conversation.objects.create(
        run=run, index=1, eval_id="tree", status=Status.PASSED, score=1.0, verdict="passed on turn 2",
        reason="passed on turn 2", turn_count=2,
    )  # fmt: skip
    wording.reword_stored(apps, None)

    capitals.refresh_from_db()
    assert (capitals.verdict, capitals.reason) == ("every turn passed: 3 of 3",) * 2
    assert (
        capitals.original["verdict"]
        == capitals.original["reason"]
        == "2 of 3 turns passed, score 0.67 < 1.00"
    )
    assert capitals.original["turns_passed"] == 2  # the rest of what the run said, as it was
    tree.refresh_from_db()
    assert (tree.verdict, tree.reason) == ("passed on turn 2",) * 2

    page = logged_in.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert "Every turn passed: 3 of 3" in page
    assert "The run said <strong>failed</strong>: 2 of 3 turns passed, score 0.67 &lt; 1.00." in page
