"""A run page's search of prompts and replies (runs.selectors.saying) through the turns' text index (migration
runs.0018: FTS5 trigrams on SQLite, pg_trgm on PostgreSQL): the same conversations as reading every turn, the
index used, and kept as turns come and go."""

from __future__ import annotations

import pytest
from django.db import connection

from engine.results import TurnRecord
from runs import search, selectors
from runs.models import Conversation, Run, Status
from suites import services as suite_services
from tests.factories import mock_run, store_turns

# FTS5 on SQLite, a trigram index on PostgreSQL: each (make test-pg).
pytestmark = [pytest.mark.django_db, pytest.mark.sql]

SUITE = "name: searched\nmodel: mock\nevals:\n  - {id: one, prompt: start here, checks: [{contains: a}]}\n"

# (first prompt, [(prompt, reply) per turn])
CONVERSATIONS = [
    ("start here", [("start here", "The Capital of Australia is Canberra."), ("Sure?", "Yes: CANBERRA.")]),
    ("start here", [("start here", 'She said "hello there" twice'), ("Again", "50% of 10_000 is 5000")]),
    ("weather?", [("weather?", "Rain in Zürich tomorrow\nthen sun"), ("And Bern?", "ok")]),
    ("nothing", [("nothing", "nothing to see"), ("more", "still nothing")]),
    ("canberra first", []),
]
SEARCHES = ["canberra", "CAPITAL of", "hello there", '"hello', "50%", "10_000", "_", "%", "Zürich", "rain in",
            "n\nthen", "see", "ok", "xyz never", "nothing", "e", "Sure", "here"]  # fmt: skip


def _run(user) -> Run:
    suite = user.suites.filter(name="searched").first() or suite_services.create_suite(
        owner=user, source=SUITE
    )
    version = suite.latest_version
    run = mock_run(version, user, status=Status.PASSED)
    for index, (first, turns) in enumerate(CONVERSATIONS):
        conversation = Conversation.objects.create(run=run, index=index, eval_id=f"e{index}", prompt=first)
        records = [TurnRecord(turn=n, prompt=p, response=r) for n, (p, r) in enumerate(turns, start=1)]
        store_turns(conversation, records)
    return run


def _read_everything(run: Run, text: str) -> set[int]:
    """What the search must find: the first prompt, or any turn's prompt or reply, contains it in any case."""
    needle = text.lower()
    found = set()
    for index, (first, turns) in enumerate(CONVERSATIONS):
        if needle in first.lower() or any(needle in p.lower() or needle in r.lower() for p, r in turns):
            found.add(index)
    return found


@pytest.mark.parametrize("text", SEARCHES)
def test_search_finds_what_reading_every_turn_finds(user, text):
    run = _run(user)
    found = set(run.conversations.filter(selectors.saying(run, text)).values_list("index", flat=True))
    assert found == _read_everything(run, text)


def test_the_index_exists_and_a_search_uses_it(user):
    run = _run(user)
    assert search._indexed(connection.vendor, str(connection.settings_dict["NAME"]))
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            query = run.conversations.filter(selectors.saying(run, "canberra")).values("pk").query
            sql, params = query.sql_with_params()
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            # Driven from the index: its matches first, then each matching turn by its key (not the run's
            # conversations, each probed for its turns).
            assert "SCAN f VIRTUAL TABLE INDEX" in plan, plan
            assert plan.index("SCAN f VIRTUAL TABLE INDEX") < plan.index(
                "SEARCH t USING INTEGER PRIMARY KEY"
            ), plan
        else:
            # The turns' subquery alone, and plain scans of the table ruled out: with a handful of rows the
            # planner would rather read them all than any index; the index is what serves it at scale.
            sql, params = search.conversations_saying(run, "canberra").as_sql(None, connection)
            cursor.execute("ANALYZE runs_turn")
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = " ".join(row[0] for row in cursor.fetchall())
            assert "runs_turn_text_trgm" in plan, plan


def test_turns_deleted_with_their_run_leave_the_index(user):
    run = _run(user)
    other = _run(user)
    run.delete()
    assert set(
        other.conversations.filter(selectors.saying(other, "canberra")).values_list("index", flat=True)
    ) == {
        0,
        4,
    }
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM runs_turn_text WHERE runs_turn_text MATCH '\"canberra\"'")
            assert cursor.fetchone()[0] == 2  # the other run's two turns; the deleted run's are gone


def test_a_nul_character_in_the_address_is_a_400_that_names_it_on_every_backend(user, logged_in):
    """%00 cannot be searched for: SQLite's full-text query ends its text there ("unterminated string") and
    PostgreSQL refuses it in any text. The run page's search, the runs list's and the API's filters each say
    so, naming the parameter, instead of a 500; the same search without it still answers."""
    from django.urls import reverse

    from runs.tokens import create_token
    from tests.factories import bearer

    run = _run(user)
    page = reverse("runs:detail", args=[run.pk])
    assert logged_in.get(page, {"q": "canberra"}).status_code == 200

    for url, key in [(page, "q"), (reverse("runs:list"), "q"), (reverse("runs:list"), "model")]:
        response = logged_in.get(url, {key: "canb\x00erra"})
        assert response.status_code == 400, (url, key)
        assert response["Content-Type"].startswith("text/plain")
        assert response.content.decode() == (
            f"The address's '{key}' parameter holds a NUL character (%00), which no page, search or filter "
            "accepts.\n"
        )

    _, token = create_token(user, "ci")
    response = logged_in.get("/api/runs", {"model": "x\x00"}, **bearer(token))
    assert response.status_code == 400
    assert response.json() == {
        "detail": "The address's 'model' parameter holds a NUL character (%00), which no page, search or "
        "filter accepts"
    }
