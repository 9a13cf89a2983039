"""Runs of repeated evals read a few conversations at a time: results.json streamed in chunks, a live run reading
again only what finished since, and no conversation left to the garbage collector."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import selectors
from runs.models import Conversation, Status
from tests.factories import body
from tests.web.iterated_runs import (
    BOOKING,
    iteration_rows,
    make_run,
    run_url,
    text,
)

pytestmark = pytest.mark.django_db


def test_results_json_streams_the_same_document_a_chunk_at_a_time(logged_in, version, user, monkeypatch):
    """results.json is written as its conversations are read, a few at a time (here 4 of the run's 20 per
    query), and parses to exactly the report held in memory: its gates, repeated evals' statistics and
    totals included."""
    from runs import selectors

    run = make_run(version, user)
    monkeypatch.setattr("runs.selectors.results.RESULTS_CHUNK", 4)
    with CaptureQueriesContext(connection) as queries:
        response = logged_in.get(run_url("json", run))
        streamed = json.loads(body(response))
    assert response.streaming
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if 'FROM "runs_conversation"' in q["sql"] and "LIMIT 4" in q["sql"]
    ]
    assert len(reads) == -(-run.conversations.count() // 4)
    assert streamed == selectors.report(run).model_dump(mode="json")
    assert streamed["iterated"] and streamed["totals"]["evals"] == run.conversations.count()


def test_a_live_run_reads_again_only_the_repeated_evals_whose_iterations_finished_since(
    logged_in, version, user
):
    run = make_run(version, user, status=Status.RUNNING, booking=[*BOOKING[:4], ("running", None, 0, "")])

    def refresh() -> tuple[str, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            poll = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true").content.decode()
        # The statistics' aggregate names the evals it reads: `"index" IN (…)` with its COUNT(...) FILTER.
        read = [
            q["sql"]
            for q in queries.captured_queries
            if "score_squares" in q["sql"] or '"passes"' in q["sql"]
        ]
        return poll, read

    poll, read = refresh()
    assert len(read) == 1 and "4/5 done" in text(iteration_rows(poll)["booking"])
    _, read = refresh()
    assert read == []  # nothing finished since: every eval's statistics were kept
    Conversation.objects.filter(run=run, index=0, iteration=4).update(status=Status.FAILED, score=0.0)
    poll, read = refresh()
    assert len(read) == 1 and "IN (0)" in read[0]  # booking alone is read again
    row = text(iteration_rows(poll)["booking"])
    assert "5/5 done" in row and "60% 3/5" in row


def test_streamed_results_leave_no_conversation_to_the_garbage_collector(version, user, monkeypatch):
    """Each streamed chunk is freed as it ends, by reference counting: no conversation or turn of it waits in
    a reference cycle for a full garbage collection, which a process holding a large suite runs seldom (the
    chunks of a 100,000-conversation export piled up to 98 MB that way)."""
    import gc

    from runs.models import Override, Turn

    run = make_run(version, user)
    monkeypatch.setattr("runs.selectors.results.RESULTS_CHUNK", 4)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept in gc.garbage, to look at
    try:
        results = list(selectors.eval_results(run))
        gc.collect()
        left = [obj for obj in gc.garbage if isinstance(obj, (Conversation, Turn, Override))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(results) == run.conversations.count() == 15
    assert left == []
