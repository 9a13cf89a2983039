"""The runs list searches and pages: by suite or model name, by launch date, with the status tabs,
every filter kept in the URL and in the tab and pager links; 10,000 runs page with the same queries as 10."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.models import Run
from suites.services import create_suite
from tests.factories import project_of

pytestmark = pytest.mark.django_db


def suite_version(user, name: str):
    source = f"name: {name}\nmodel: mock\nevals:\n  - {{prompt: Hi, checks: [{{match: '*'}}]}}\n"
    return create_suite(owner=user, source=source, project=project_of(user)).latest_version


def runs(version, user, n: int, *, model: str = "mock", status: str = "passed", days_ago: int = 0):
    when = timezone.now() - timedelta(days=days_ago)
    Run.objects.bulk_create(
        Run(
            suite_version=version,
            project_id=version.suite.project_id,
            created_by=user,
            model=model,
            endpoint_name="mock",
            status=status,
            created_at=when - timedelta(seconds=i),
        )  # fmt: skip
        for i in range(n)
    )


def test_search_by_suite_or_model_and_dates_with_the_tabs(client, user, other_user):
    tutor, billing = suite_version(user, "tutor-politeness"), suite_version(user, "billing-bot")
    runs(tutor, user, 2, model="openai/gpt-4o-mini")
    runs(billing, user, 1, model="local/llama-3", status="failed", days_ago=10)
    runs(suite_version(other_user, "tutor-politeness"), other_user, 3)
    client.force_login(user)
    listed = lambda **query: client.get(reverse("runs:list"), query).context["runs"]  # noqa: E731
    assert len(listed(q="TUTOR")) == 2  # any case; mallory's runs of a suite of that name are not alice's
    assert len(listed(q="llama")) == 1  # a model matches too
    assert len(listed(model="gpt-4o")) == 2
    today = timezone.localdate()
    assert len(listed(since=str(today - timedelta(days=1)))) == 2
    assert len(listed(until=str(today - timedelta(days=5)))) == 1
    assert len(listed(q="bot", status="failed")) == 1 and len(listed(q="bot", status="passed")) == 0
    assert len(listed(since="not a date")) == 3  # a bad date is ignored, not an error
    page = client.get(reverse("runs:list"), {"q": "zzz"}).content.decode()
    assert "No run matches" in page and "Clear the search" in page
    tabs = client.get(reverse("runs:list"), {"q": "tutor"}).context["filters"]
    assert all("q=tutor" in url for _, _, url in tabs)  # switching tabs keeps the search


def test_ten_thousand_runs_page_with_the_same_queries_as_ten(client, user):
    version = suite_version(user, "many")
    runs(version, user, 10)
    client.force_login(user)
    counts = []
    for total in (10, 10_000):
        if total > 10:
            runs(version, user, total - 10, days_ago=1)
        with CaptureQueriesContext(connection) as queries:
            page = client.get(reverse("runs:list"), {"page": 150 if total > 10 else 1, "q": "many"})
        assert page.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    assert page.context["page"].paginator.num_pages == 200 and len(page.context["runs"]) == 50
    assert "Page 150 of 200" in page.content.decode() and "q=many" in page.content.decode()
