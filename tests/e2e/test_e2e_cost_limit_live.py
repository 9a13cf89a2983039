"""End-to-end for the cost limit on long conversations: two real Celery workers play six-turn conversations
against the fake OpenAI server with prices and latency. The spend counts each turn as it is stored, so the run
page and the API show it while every conversation is still playing, and the limit stops the conversations in
flight at their next turn: the run passes its limit by at most the calls out when it was reached, one per
conversation playing, and keeps every turn it paid for.

Not a feature module of the SQLite pass only (tests/e2e/conftest.py): several workers summing one run's spend
is what the PostgreSQL + Redis pass is for."""

from __future__ import annotations

import re
import time

import pytest
from django.test import Client
from django.urls import reverse

from engine.options import RunOptions
from runs import services
from runs.models import Status, Turn
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

EVALS, TURNS = 8, 6
WORKERS, SLOTS = 2, 2  # two worker processes, each playing two conversations at once
PLAYING = WORKERS * SLOTS  # conversations in flight at once, so model calls out at once
PRICE_OUTPUT = 100_000  # USD per million completion tokens: each one-token "OK" costs CALL
CALL = PRICE_OUTPUT / 1_000_000
LIMIT = 1.05  # reached on the eleventh call, in the third of six turns

LONG = "name: budget-long\nmodel: fake/test-model\nevals:\n" + "".join(
    f"  - id: e{n}\n    turns:\n"
    + "".join(f"      - input: question {n} turn {t}\n" for t in range(1, TURNS + 1))
    + "    checks: [{contains: OK}]\n"
    for n in range(EVALS)
)


def page_cost(html: str) -> float:
    """The spend the run page's progress card shows."""
    found = re.search(r'data-testid="run-cost"[^>]*>\s*\$([0-9.,]+)', html)
    assert found, "the run page shows no cost"
    return float(found.group(1).replace(",", ""))


def test_the_limit_stops_conversations_in_flight_and_the_spend_shows_turn_by_turn(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_endpoint.price_input = 0
    fake_endpoint.price_output = PRICE_OUTPUT
    fake_endpoint.save()
    fake_openai.latency = 0.5
    for _ in range(WORKERS):
        start_worker(concurrency=SLOTS)
    suite = create_suite(owner=user, source=LONG)
    run = services.create_run(
        version=suite.latest_version, user=user, concurrency=PLAYING, options=RunOptions(max_cost=LIMIT)
    )
    client = Client()
    client.force_login(user)

    # While it plays: the spend of the turns stored so far, before any conversation has ended.
    seen_playing: list[tuple[float, float]] = []  # (the API's cost, the page's) with nothing ended yet
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        progress = client.get(f"/api/runs/{run.pk}/progress").json()
        if progress["done"]:
            break
        if progress["cost"] > 0:
            page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
            seen_playing.append((progress["cost"], page_cost(page)))
        time.sleep(0.05)
    assert seen_playing, "no spend was shown before the first conversation ended"
    api_cost, shown = seen_playing[0]
    # The API's cost is a sum of floats (0.1 + 0.1 + 0.1 is 0.30000000000000004): compared at the page's digits.
    assert api_cost == pytest.approx(CALL * round(api_cost / CALL)) and shown >= round(api_cost, 6)

    run = wait_for_run(run)
    conversations = list(run.conversations.order_by("index"))
    spent = sum(c.cost for c in conversations)
    calls = len(fake_openai.chat_requests())
    figures = (
        f"spent ${spent:.2f} on {calls} calls for a limit of ${LIMIT:.2f}: {spent / LIMIT:.2f}x; "
        f"{[(c.index, c.status, c.turn_count) for c in conversations]}"
    )
    # Reached, and passed by at most the calls out when it was: one per conversation playing.
    assert LIMIT <= spent < LIMIT + PLAYING * CALL, figures
    assert run.status == Status.CANCELLED and run.stop_reason == f"cost limit ${LIMIT:.2f} reached", figures

    # Every call paid for is a stored turn, and the conversations' spend is their turns'.
    turns = Turn.objects.filter(conversation__run=run)
    assert turns.count() == calls == sum(c.turn_count for c in conversations), figures
    assert spent == pytest.approx(calls * CALL)
    # The conversations playing when the limit was reached stopped mid-way, their turns kept, saying why;
    # the rest never started.
    stopped = [c for c in conversations if c.status == Status.CANCELLED and c.turn_count]
    unplayed = [c for c in conversations if c.status == Status.CANCELLED and not c.turn_count]
    assert stopped and unplayed and len(stopped) + len(unplayed) == EVALS, figures
    assert all(0 < c.turn_count < TURNS for c in stopped), figures
    for c in stopped:
        assert c.verdict == f"stopped after {c.turn_count} turns: cost limit ${LIMIT:.2f} reached", c.verdict
    assert {c.verdict for c in unplayed} == {f"not started: cost limit ${LIMIT:.2f} reached"}

    api = client.get(f"/api/runs/{run.pk}").json()
    assert api["state"] == f"stopped: cost limit ${LIMIT:.2f} reached"
    assert api["progress"]["cost"] == pytest.approx(spent)
