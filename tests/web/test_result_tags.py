"""An eval's tags reach a stored run's results (results.json, the evals CSV): they live in the run's suite,
not in each conversation's row, so the results read them from the suite by the eval's index."""

from __future__ import annotations

import csv
import io

import pytest

from engine.exports import evals_csv_lines
from runs import selectors
from runs.models import Conversation
from suites import services as suite_services
from tests.factories import mock_run

pytestmark = pytest.mark.django_db

SUITE = """name: tagged
model: mock
mock: {default: Paris}
evals:
  - id: capital
    tags: [geography, "conversation:quiz-1"]
    input: Capital of France?
    ground_truth: Paris
  - id: untagged
    input: Capital of Italy?
    ground_truth: Rome
"""


def test_stored_results_carry_each_evals_tags(user):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user)
    for index, eval_id in enumerate(["capital", "untagged"]):
        Conversation.objects.create(run=run, index=index, eval_id=eval_id, status="passed", verdict="passed")
    results = list(selectors.eval_results(run))
    assert [(r.id, r.tags) for r in results] == [
        ("capital", ["geography", "conversation:quiz-1"]),
        ("untagged", []),
    ]
    rows = list(csv.DictReader(io.StringIO("".join(evals_csv_lines(results, [])))))
    assert [row["tags"] for row in rows] == ["geography;conversation:quiz-1", ""]
