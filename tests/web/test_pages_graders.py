"""Named graders on the pages: a column per grader on the run page (and its share page), nested
gates, each turn's grades and the conversation's grader scores on the transcript, and the results JSON; played
in this process as a worker plays it, on the built-in mock model (the judge is the mock too)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs import selectors
from runs.models import Conversation
from runs.services import create_run, create_share_link
from runs.worker.pump import execute
from suites.services import create_suite

pytestmark = pytest.mark.django_db

SUITE = """\
name: graded
model: mock
judge: mock
mock:
  rules:
    - {when: "*Rate*<script>*", reply: '{"score": 0.4, "reason": "<b>bold</b> claim"}'}
    - {when: "*Rate*", reply: '{"score": 0.9, "reason": "good"}'}
    - {when: "*France*", reply: "Paris"}
    - {when: "*Peru*", reply: "Lima <script>alert(1)</script>"}
graders:
  quality: {kind: llm_judge, rubric: "Rate {submission} for {input}", threshold: 0.7}
  exact: {kind: exact_match}
gates:
  - logical_and:
      - {metric: avg, grader: quality, value: 0.5}
      - {weighted_average: {quality: 0.5, exact: 0.5}, value: 0.9}
evals:
  - id: capitals
    input: [Capital of France?, Capital of Peru?]
    ground_truth: [Paris, Lima]
  - id: one
    input: Capital of France?
    ground_truth: Paris
"""


@pytest.fixture
def run(user):
    version = create_suite(owner=user, source=SUITE).latest_version
    run = create_run(version=version, user=user)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    run.refresh_from_db()
    return run


def test_results_carry_every_graders_scores(run):
    capitals, one = selectors.report(run).evals
    assert [(g.name, g.score) for g in capitals.graders] == [("quality", pytest.approx(0.65)), ("exact", 0.5)]
    assert [[(g.name, g.score) for g in turn.grades] for turn in capitals.turns] == [
        [("quality", 0.9), ("exact", 1.0)], [("quality", 0.4), ("exact", 0.0)],
    ]  # fmt: skip
    assert (one.status, one.score) == ("passed", pytest.approx(0.95))
    assert one.graders[0].grades[0].rationale == "good"  # graded once: its grade kept with the result
    assert Conversation.objects.get(run=run, eval_id="one").judge_tokens > 0  # the judge after the last turn


def test_the_run_page_has_a_column_per_grader_and_nested_gates(client, user, run):
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[run.pk]))
    html = page.content.decode()
    assert page.context["grader_names"] == ["quality", "exact"]
    assert ">quality</th>" in html and ">exact</th>" in html
    assert "0.65 ✗" in html and "0.95" not in html.split("exact</th>")[0]
    gates = page.context["gates"]
    assert [(g["label"], g["depth"], g["passed"]) for g in gates] == [
        ("all of", 0, False), ("quality avg >= 0.5", 1, True),
        ("avg of (0.5×quality + 0.5×exact) >= 0.9", 1, False),
    ]  # fmt: skip
    assert page.context["gates_total"] == 1 and page.context["gates_failed"] == 1
    shared = client.get(reverse("share:run", args=[create_share_link(run, user).token])).content.decode()
    assert ">quality</th>" in shared


def test_the_transcript_shows_each_turns_grades_escaped(client, user, run):
    client.force_login(user)
    capitals = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert capitals.count('class="check-label">quality</code>') == 2
    assert "&lt;b&gt;bold&lt;/b&gt; claim" in capitals and "<b>bold</b>" not in capitals
    assert "<script>alert(1)</script>" not in capitals
    one = client.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    assert 'aria-label="Named graders"' in one and "<code>quality</code> 0.90 ✓" in one
