"""Migration runs.0009 gives conversations stored before it the verdict in fields (reason, termination
kind and detail) that the engine now returns, so that their transcripts read the same as new ones and no
page needs to cut the ending out of a verdict."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0007_retry_budget_and_waits"), ("suites", "0001_initial")]
AFTER = [("runs", "0009_conversation_kinds")]

ROWS = {  # eval id: (status, termination, verdict) as stored before the migration
    "met": ("passed", 'condition met: field_equals status = "ok"', 'passed after 3 turns: condition met: field_equals status = "ok"'),
    "capped": ("failed", "max turns (4)", "failed after 4 turns: max turns (4); final checks failed"),
    "dry": ("failed", "inputs exhausted", "failed after 2 turns: inputs exhausted"),
    "broke": ("error", "error", "error on turn 2: error 500 from the endpoint"),
    "tree": ("passed", "", "passed on turn 2"),
}  # fmt: skip
EXPECTED = {  # eval id: (reason, termination_kind, termination_detail) after it
    "met": ("passed after 3 turns", "condition_met", 'field_equals status = "ok"'),
    "capped": ("failed after 4 turns; final checks failed", "max_turns", "4"),
    "dry": ("failed after 2 turns", "inputs_exhausted", ""),
    "broke": ("error on turn 2: error 500 from the endpoint", "error", ""),
    "tree": ("passed on turn 2", "", ""),
}


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_stored_conversations_get_the_verdict_in_fields():
    old = migrate(BEFORE)
    user = old.get_model("auth", "User").objects.create(username="old")
    suite = old.get_model("suites", "Suite").objects.create(name="s", owner_id=user.pk)
    version = old.get_model("suites", "SuiteVersion").objects.create(
        suite=suite, number=1, source="", sha256="x"
    )
    run = old.get_model("runs", "Run").objects.create(suite_version=version, created_by=user, model="mock")
    Conversation = old.get_model("runs", "Conversation")
    for index, (eval_id, (status, termination, verdict)) in enumerate(ROWS.items()):
        Conversation.objects.create(
            run=run, index=index, eval_id=eval_id, status=status, termination=termination, verdict=verdict
        )
    try:
        new = migrate(AFTER)
        rows = new.get_model("runs", "Conversation").objects.all()
        found = {row.eval_id: (row.reason, row.termination_kind, row.termination_detail) for row in rows}
        assert found == EXPECTED
    finally:  # back to the latest schema, for the tests after this one
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
