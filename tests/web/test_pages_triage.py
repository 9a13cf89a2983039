"""Triage on the run page: filter the conversations by status, kind, tag and iteration, search
prompts and replies, sort, page; every filter in the URL and kept by the progress poll. Played in this
process on the built-in mock model."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs.services import create_run
from runs.worker.pump import execute
from suites.services import create_suite
from tests.factories import body

pytestmark = pytest.mark.django_db

SUITE = """\
name: triage
model: mock
mock:
  rules:
    - {when: "*refund*", reply: "Refunds take 5 days."}
    - {when: "*hours*", reply: "We never close."}
    - {when: "*weather*", reply: "Sunny."}
evals:
  - {id: refunds, tags: [billing], prompt: How long do refunds take?, checks: [{contains: "5 days"}]}
  - {id: hours, tags: [store], prompt: What are your hours?, checks: [{contains: "9 to 5"}]}
  - {id: weather, prompt: What is the weather?, checks: [{contains: Sunny}], iterations: 3}
  - {id: scripted, tags: [billing], input: [Any refund news?, Thanks], ground_truth: [5 days, welcome], grader: contains}
"""


@pytest.fixture
def run(user):
    run = create_run(version=create_suite(owner=user, source=SUITE).latest_version, user=user)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    run.refresh_from_db()
    return run


def shown(client, run, **query):
    page = client.get(reverse("runs:detail", args=[run.pk]), query)
    return [(c.eval_id, c.iteration) for c in page.context["conversations"]]


def test_filters_search_and_sort(client, user, run):
    client.force_login(user)
    assert len(shown(client, run)) == 6
    assert shown(client, run, status="failed") == [("hours", 0), ("scripted", 0)]
    assert shown(client, run, tag="billing") == [("refunds", 0), ("scripted", 0)]
    assert shown(client, run, kind="scripted") == [("scripted", 0)]
    assert shown(client, run, iteration="2") == [("weather", 1)]
    assert shown(client, run, q="never close") == [("hours", 0)]  # a reply
    assert shown(client, run, q="REFUND") == [("refunds", 0), ("scripted", 0)]  # prompts, any case
    assert shown(client, run, q="Thanks") == [("scripted", 0)]  # a later turn's prompt
    assert shown(client, run, sort="score")[:2] == [("hours", 0), ("scripted", 0)]
    assert shown(client, run, status="passed", tag="billing") == [("refunds", 0)]
    response = client.get(reverse("runs:detail", args=[run.pk]), {"tag": "billing"})
    assert "2 of 6 conversations match." in response.content.decode()
    assert "tag=billing" in response.context["urls"]["progress"]  # the poll keeps the filter


def test_the_poll_keeps_the_filters(client, user, run):
    client.force_login(user)
    poll = client.get(reverse("runs:progress", args=[run.pk]), {"status": "failed"})
    assert [c.eval_id for c in poll.context["conversations"]] == ["hours", "scripted"]


def test_a_page_of_conversations_at_a_time(client, user):
    evals = "".join(
        f"  - {{id: e{i}, prompt: hours {i}?, checks: [{{contains: never}}]}}\n" for i in range(130)
    )
    source = (
        "name: many\nmodel: mock\nmock:\n  rules:\n    - {when: '*', reply: We never close.}\nevals:\n"
        + evals
    )
    run = create_run(version=create_suite(owner=user, source=source).latest_version, user=user)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    client.force_login(user)
    first = client.get(reverse("runs:detail", args=[run.pk]))
    assert len(first.context["conversations"]) == 100 and "1–100 of 130" in first.content.decode()
    second = client.get(reverse("runs:detail", args=[run.pk]), {"page": 2})
    assert [c.eval_id for c in second.context["conversations"]][:1] == ["e100"]


def test_exports_from_the_run_page_and_the_share_page(client, user, other_user, run):
    from runs.services import create_share_link

    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    for form in ("junit", "csv", "turns.csv", "md"):
        url = reverse("runs:export", args=[run.pk, form])
        assert url in page
        response = client.get(url)
        assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    assert b'<testsuite name="triage"' in client.get(reverse("runs:export", args=[run.pk, "junit"])).content
    assert client.get(reverse("runs:export", args=[run.pk, "exe"])).status_code == 404
    link = create_share_link(run, user)
    shared = client.get(reverse("share:export", args=[link.token, "csv"]))
    assert shared.status_code == 200 and body(shared).startswith(b"eval_id,")
    assert "no-store" in shared["Cache-Control"]
    client.force_login(other_user)
    assert client.get(reverse("runs:export", args=[run.pk, "csv"])).status_code == 404
