"""How big a run may be: a cap on conversations, checked when a suite is validated and when it is launched;
a launch that streams its conversations; a runs list that stays fast next to a run of tens of thousands."""

from __future__ import annotations

import html
import tracemalloc

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from engine import bounds
from engine.loader import load_suite
from engine.source import SuiteError
from runs import services as run_services
from runs.models import Conversation, Run
from runs.worker import sql
from suites import services as suite_services


def suite(evals: int, iterations: int | None = None, *, name: str = "big") -> str:
    lines = [f"name: {name}", "model: mock"]
    if iterations is not None:
        lines.append(f"iterations: {iterations}")
    lines.append("evals:")
    for i in range(evals):
        lines += [f"  - prompt: question {i}", "    checks:", "      - match: '*'"]
    return "\n".join(lines) + "\n"


def problems(source: str, files: dict[str, str] | None = None) -> list:
    with pytest.raises(SuiteError) as refused:
        load_suite(source, files=files)
    return refused.value.problems


def test_3000_evals_of_1000_iterations_are_refused_at_iterations():
    (problem,) = problems(suite(3_000, 1_000))
    assert (problem.line, problem.column, problem.path) == (3, 1, "iterations")
    assert problem.message == (
        "a run would play 3,000,000 conversations (3,000 evals × 1,000 iterations); at most 100,000 are "
        "allowed (EVALSITE_MAX_CONVERSATIONS_PER_RUN)"
    )


def test_the_cap_itself_is_allowed(monkeypatch):
    monkeypatch.setattr(bounds, "MAX_CONVERSATIONS_PER_RUN", 30)
    assert len(load_suite(suite(3, 10)).evals) == 3
    assert problems(suite(3, 11))[0].message.startswith("a run would play 33 conversations")


def test_dataset_rows_count_and_the_problem_is_at_the_dataset(monkeypatch):
    monkeypatch.setattr(bounds, "MAX_CONVERSATIONS_PER_RUN", 10)
    rows = "".join(f'{{"input": "q{i}", "ground_truth": "a{i}"}}\n' for i in range(10))
    source = (
        "name: rows\nmodel: mock\ndataset: rows.jsonl\nevals:\n  - prompt: hi\n    checks: [{match: '*'}]\n"
    )
    (problem,) = problems(source, {"rows.jsonl": rows})
    assert (problem.line, problem.column, problem.path) == (3, 1, "dataset")
    assert "11 conversations (1 eval and 10 dataset rows)" in problem.message


def test_iterations_of_single_evals_are_counted_and_the_problem_is_at_evals(monkeypatch):
    monkeypatch.setattr(bounds, "MAX_CONVERSATIONS_PER_RUN", 100)
    source = suite(2).replace("  - prompt: question 1\n", "  - prompt: question 1\n    iterations: 100\n")
    (problem,) = problems(source)
    assert (problem.line, problem.path) == (3, "evals")
    assert "101 conversations (2 evals, with their iterations)" in problem.message


@pytest.mark.django_db
def test_the_editor_and_the_api_say_so(client, user):
    client.force_login(user)
    source = suite(200, 1_000)
    body = client.post(reverse("api:validate"), {"source": source}, content_type="application/json").json()
    assert body["valid"] is False and body["problems"][0]["path"] == "iterations"
    page = html.unescape(client.post(reverse("suites:validate"), {"source": source}).content.decode())
    assert "line 3, col 1" in page and "a run would play 200,000 conversations" in page


@pytest.mark.django_db
def test_a_launch_over_the_cap_says_so_on_the_form_and_creates_nothing(client, user, monkeypatch):
    saved = suite_services.create_suite(owner=user, source=suite(5, 10))  # 50, under the cap when saved
    monkeypatch.setattr(bounds, "MAX_CONVERSATIONS_PER_RUN", 40)  # lowered since
    client.force_login(user)
    response = client.post(
        reverse("suites:launch", args=[saved.public_id]), {"concurrency": 10, "model": "mock"}
    )
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "v1 would play 50 conversations; at most 40 are allowed a run" in page
    assert Run.objects.count() == 0 and Conversation.objects.count() == 0


@pytest.mark.django_db
def test_a_launch_writes_its_conversations_in_batches_as_they_are_made(user):
    if connection.vendor == "postgresql":
        pytest.skip("one COPY streams them there; the memory bound below holds on both")
    run = run_services.create_run(
        version=suite_services.create_suite(owner=user, source=suite(1)).latest_version, user=user
    )
    run.conversations.all().delete()
    stored_when_pulled = []

    def rows():
        for iteration in range(sql.INSERT_BATCH * 2 + 10):
            if iteration % 1_000 == 0:
                stored_when_pulled.append((iteration, Conversation.objects.filter(run=run).count()))
            yield {
                "index": 0,
                "iteration": iteration,
                "eval_id": "e",
                "prompt": "p",
                "style": "tree",
                "system": "",
                "history": [],
            }

    sql.insert_conversations(run.pk, rows())
    assert run.conversations.count() == sql.INSERT_BATCH * 2 + 10
    # Never more than a batch ahead of what is stored: rows are not all built before the first write.
    assert all(pulled - stored <= sql.INSERT_BATCH for pulled, stored in stored_when_pulled)


@pytest.mark.django_db
def test_launching_30000_conversations_holds_no_list_of_them(user):
    version = suite_services.create_suite(owner=user, source=suite(30, 1_000)).latest_version
    run_services.specs.suite(version)  # the parsed suite is cached anyway
    tracemalloc.start()
    run = run_services.create_run(version=version, user=user)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert run.conversations.count() == 30_000
    assert peak < 10_000_000, f"{peak / 1e6:.1f} MB"  # a batch: ~5 MB; all 30,000 rows at once: 19 MB


@pytest.mark.django_db
def test_the_runs_list_next_to_a_run_of_20000_conversations(client, user, django_assert_max_num_queries):
    version = suite_services.create_suite(owner=user, source=suite(20, 1_000)).latest_version
    big = run_services.create_run(version=version, user=user)
    small = run_services.create_run(
        version=suite_services.create_suite(owner=user, source=suite(2, name="small")).latest_version,
        user=user,
    )
    client.force_login(user)
    # The page also reads the user's projects: the current one, and the switcher's list; the CI refs the filter
    # offers; and, as these runs wait, whether any worker is running.
    with django_assert_max_num_queries(9), CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("runs:list"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "/ 20000" in page and "/ 2<" in page and str(big.pk) in page and str(small.pk) in page
    # Conversations are counted for the page's runs alone, never joined to every run before the page is cut.
    conversation, run = Conversation._meta.db_table, Run._meta.db_table
    for query in queries.captured_queries:
        assert not (conversation in query["sql"] and run in query["sql"]), query["sql"]
    response = client.get(reverse("suites:detail", args=[version.suite.public_id]))  # its recent runs
    assert response.status_code == 200 and "20000" in response.content.decode()
