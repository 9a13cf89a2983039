"""A finished run's page and poll under load: after its first view a web process reads none of the run's
conversations (its table is kept rendered, its counts kept), and a process that has never shown the run
parses no suite for it (its facts were stored at launch). What a page costs then does not grow with the run.

Runs are launched and played through the worker's own path on the built-in mock model (tests.factories).
"""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs import selectors, specs
from runs.models import Conversation
from suites.models import ParsedVersion, SuiteFile
from tests.factories import launch, play

pytestmark = pytest.mark.django_db

ROWS = "name: rows\nmodel: mock\ngrader: contains\ndataset: rows.jsonl\n"


def dataset(n: int) -> dict[str, str]:
    return {"rows.jsonl": "".join(f'{{"input": "question {i}", "ground_truth": "x"}}\n' for i in range(n))}


@pytest.fixture(autouse=True)
def _new_process():
    forget()
    yield
    forget()


def forget() -> None:
    """What a web process keeps in its own memory, gone: as in a process that has not shown the run yet."""
    specs._suites.clear()
    selectors.facts._facts.clear()
    for name in ("tables", "rows", "aggregates"):
        caches[name].clear()


def views(client, run) -> dict[str, list[str]]:
    """The run page and its poll, each with the SQL it ran."""
    sql = {}
    for name, url, headers in (
        ("page", reverse("runs:detail", args=[run.pk]), {}),
        ("poll", reverse("runs:progress", args=[run.pk]), {"HTTP_HX_REQUEST": "true"}),
    ):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url, **headers)
        assert response.status_code in (200, 286), (name, response.status_code)
        sql[name] = [query["sql"] for query in queries.captured_queries]
    return sql


def reading(sql: list[str], model) -> list[str]:
    return [query for query in sql if f'"{model._meta.db_table}"' in query]


def test_a_finished_runs_page_and_poll_read_no_conversation_once_viewed(logged_in, user):
    small = play(launch(user, ROWS.replace("rows", "small", 1), files=dataset(3)))
    run = play(launch(user, ROWS, files=dataset(30)))
    first = views(logged_in, run)
    assert reading(first["page"], Conversation)  # the first view reads its page of rows
    again = views(logged_in, run)
    assert reading(again["page"], Conversation) == [] and reading(again["poll"], Conversation) == []
    # As many queries as for a run of 3.
    views(logged_in, small)
    assert {name: len(sql) for name, sql in views(logged_in, small).items()} == {
        name: len(sql) for name, sql in again.items()
    }
    # And reads as the first view did.
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "question 0" in page and "question 29" in page and "30<span" in page


def test_a_process_that_never_showed_the_run_parses_no_suite(logged_in, user):
    run = play(launch(user, ROWS, files=dataset(30)))
    forget()  # another web process: the launch stored the suite's facts, nothing else is in memory
    sql = views(logged_in, run)
    for name in ("page", "poll"):
        assert reading(sql[name], ParsedVersion) == [] and reading(sql[name], SuiteFile) == [], name
    assert specs._suites == {}
