"""Repeated evals' statistics from the database (runs.selectors.repeated_so_far: one aggregate, the termination
reasons and a window for the representative iteration) against the engine's own (engine.stats over every
finished iteration, as runs.selectors.iterated_so_far gives it): the run page of a run that repeats 100 evals
1,000 times reads the first, results.json the second, and they must say the same thing.

Runs are rows made at random (seeded): every status, scores with ties around the mean, missing scores,
termination reasons, errored and cancelled iterations, evals with nothing finished yet.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from runs import selectors
from runs.models import Conversation, Status
from suites import services as suite_services
from tests.factories import mock_run

# A window function and ROUND over floats: SQLite and PostgreSQL each (make test-pg).
pytestmark = [pytest.mark.django_db, pytest.mark.sql]

SUITE = """\
name: repeated
model: mock
iterations: 30
evals:
  - id: steady
    prompt: a
    checks: [{contains: a}]
  - id: shaky
    prompt: b
    pass_rate_threshold: 0.8
    checks: [{contains: b}]
  - id: lonely
    prompt: c
    iterations: 3
    checks: [{contains: c}]
  - id: waiting
    prompt: d
    checks: [{contains: d}]
"""
STATUSES = [Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.QUEUED, Status.RUNNING]
SCORES = [0.0, 0.25, 0.5, 0.75, 1.0, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, None]
ENDINGS = ["", "", "max turns (10)", 'condition met: field_equals a = "b"', "the user gave up"]


def make_run(user, rng: random.Random):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status=Status.FAILED)
    rows, now = [], timezone.now()
    for index, (eval_id, iterations) in enumerate(
        [("steady", 30), ("shaky", 30), ("lonely", 3), ("waiting", 30)]
    ):
        for iteration in range(iterations):
            status = Status.QUEUED if eval_id == "waiting" else rng.choice(STATUSES)
            # Some running iterations wait to retry a model call, for a reason and until a time of their own.
            wait = status == Status.RUNNING and rng.random() < 0.5
            score = (
                rng.choice(SCORES) if status in (Status.PASSED, Status.FAILED) else rng.choice([None, 0.5])
            )
            rows.append(
                Conversation(
                    run=run, index=index, iteration=iteration, eval_id=eval_id, status=status, score=score,
                    turn_count=rng.randint(0, 12), termination=rng.choice(ENDINGS),
                    kind=rng.choice(["multi-turn", "single-turn"]), prompt_tokens=rng.randint(0, 500),
                    cost=rng.random() / 100, original={} if rng.random() < 0.8 else {"status": "failed"},
                    waiting_until=now + timedelta(seconds=rng.randint(5, 90)) if wait else None,
                    waiting_reason=rng.choice(["429 rate limited", "500 server error"]) if wait else "",
                )
            )  # fmt: skip
    Conversation.objects.bulk_create(rows)
    return run


@pytest.mark.parametrize("seed", range(12))
def test_statistics_from_the_database_are_the_engines(user, seed):
    run = make_run(user, random.Random(seed))
    facts = selectors.suite_facts(run)
    expected = selectors.iterated_so_far(run, list(run.conversations.all()))
    got = selectors.repeated_so_far(run, range(4), facts)
    assert set(got) == set(expected) and 3 not in got  # `waiting` has no finished iteration yet
    for index, result in expected.items():
        mine = got[index].model_dump()
        theirs = result.model_dump()
        # The engine keeps every score; the page does not read them. The sums are added in another order.
        assert mine["stats"].pop("scores") == []
        theirs["stats"].pop("scores")
        for key in ("mean", "std_dev"):
            assert mine["stats"].pop(key) == pytest.approx(theirs["stats"].pop(key), abs=1e-9)
        assert mine == theirs


def test_only_the_evals_asked_for_are_read(user):
    run = make_run(user, random.Random(1))
    got = selectors.repeated_so_far(run, [1], selectors.suite_facts(run))
    assert list(got) == [1] and got[1].id == "shaky" and got[1].stats.pass_rate_threshold == 0.8


def test_the_representative_is_the_earliest_of_equally_near_scores(user):
    run = make_run(user, random.Random(2))
    run.conversations.all().delete()
    # Mean 0.5: 0.25 and 0.75 are as near; iteration 1 is the earliest of them. Unfinished rows do not count.
    for iteration, (status, score) in enumerate(
        [
            (Status.FAILED, 0.0),
            (Status.FAILED, 0.75),
            (Status.PASSED, 0.25),
            (Status.PASSED, 1.0),
            (Status.RUNNING, 0.5),
        ]
    ):
        Conversation.objects.create(
            run=run, index=0, iteration=iteration, eval_id="steady", status=status, score=score
        )
    (result,) = selectors.repeated_so_far(run, [0], selectors.suite_facts(run)).values()
    assert result.stats.representative == 1 and result.stats.iterations == 4 and result.stats.mean == 0.5
    engine = selectors.iterated_so_far(run, list(run.conversations.all()))[0]
    assert engine.stats.scores == [0.0, 0.75, 0.25, 1.0]
    assert result == engine.model_copy(update={"stats": engine.stats.model_copy(update={"scores": []})})


@pytest.mark.parametrize("seed", range(4))
def test_one_scan_gives_the_progress_bar_and_every_evals_counts(user, seed):
    """A suite that repeats every eval: the progress aggregate grouped by eval as well gives the same bar, and
    each eval's counts as repeated_outcomes does."""
    run = make_run(user, random.Random(seed))
    facts = selectors.suite_facts(run)
    assert facts.every_eval_repeated
    merged = selectors.progress(run, by_eval=True)
    assert merged.pop("by_eval") == selectors.repeated_outcomes(run, facts.sizes)
    alone = selectors.progress(run)
    assert merged.pop("cost") == pytest.approx(alone.pop("cost"))
    assert merged == alone
    assert alone["waiting"]["count"] > 0 and alone["overridden"] > 0  # the data covers both
