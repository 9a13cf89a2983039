"""Migration runs.0037 names a run's endpoint in its `unpriced` when the run was stored without it (launched before
runs said so) and its turns prove the endpoint had no prices: a model call that used tokens and cost nothing, not
answered from the cache. Its pages then say its cost is unknown rather than "$0.000000"; nothing else is guessed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0037_cached_answer")]
AFTER = [("runs", "0038_run_unpriced_from_turns")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def record(cost: float, prompt: int = 12, completion: int = 3, **more) -> dict:
    """A turn's record as the engine stored it before turns named their endpoints without prices."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "estimated": False}
    return {"turn": 1, "prompt": "Hi", "response": "Hello", "usage": usage, "cost": cost, **more}


RUNS = {  # model: (endpoint, its turns' records, unpriced before) -> unpriced after
    "free/m": (("free", [record(0.0)], []), ["free"]),
    "priced/m": (("priced", [record(0.0012)], []), []),
    "mock": (("mock", [record(0.0)], []), []),  # the mock costs nothing, and is known to
    "cached/m": (("cached", [record(0.0, cached=True, cached_calls=1)], []), []),  # the cache answered it
    "given/m": (("given", [record(0.0, prompt=0, completion=0)], []), []),  # no call: a given reply, a re-grade
    "named/m": (("named", [record(0.0)], ["judges"]), ["judges"]),  # said already, as it was launched
    "later/m": (("later", [record(0.003), record(0.0)], []), ["later"]),  # one turn is enough
}  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_runs_stored_without_unpriced_name_their_endpoint_when_their_turns_prove_it():
    old = migrate(BEFORE)
    user = old.get_model("auth", "User").objects.create(username="old")
    project = old.get_model("projects", "Project").objects.create(name="p", slug="p")
    suite = old.get_model("suites", "Suite").objects.create(name="s", owner_id=user.pk, project=project)
    version = old.get_model("suites", "SuiteVersion").objects.create(
        suite=suite, number=1, source="", sha256="x"
    )
    Run, Conversation, Turn = (old.get_model("runs", name) for name in ("Run", "Conversation", "Turn"))
    for model, ((endpoint, records, unpriced), _) in RUNS.items():
        run = Run.objects.create(
            suite_version=version, project=project, created_by=user, model=model, endpoint_name=endpoint,
            is_mock=endpoint == "mock", unpriced=unpriced,
        )  # fmt: skip
        conversation = Conversation.objects.create(run=run, index=0, eval_id="e", status="passed")
        for position, each in enumerate(records, 1):
            Turn.objects.create(conversation=conversation, position=position, record=each)
    try:
        new = migrate(AFTER)
        found = dict(new.get_model("runs", "Run").objects.values_list("model", "unpriced"))
        assert found == {model: after for model, (_, after) in RUNS.items()}
    finally:  # back to the latest schema, for the tests after this one
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
