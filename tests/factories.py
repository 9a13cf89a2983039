"""Rows for page tests, stored through the code that stores them in production, so a page test cannot drift
from what a worker writes: turns go through runs.execution's store (runs.sql.store_turn: the Turn row and the
conversation's counters), runs through runs.services.create_run."""

from __future__ import annotations

from engine.results import TurnRecord
from runs import execution, services
from runs.models import Conversation, Run, Status
from suites import services as suite_services


def launch(user, source: str, *, files: dict[str, str] | None = None, model: str | None = None) -> Run:
    """A run of a new suite, created as the launch button creates it (its conversations queued)."""
    version = suite_services.create_suite(owner=user, source=source, files=files or {}).latest_version
    return services.create_run(version=version, user=user, model=model)


def store_turns(conversation: Conversation, records: list[TurnRecord]) -> Conversation:
    """Store `records` as the worker playing `conversation` stores each graded turn; the conversation keeps the
    status it had. Returns it refreshed (turn count, tokens and cost added up by the store)."""
    status = conversation.status
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.RUNNING)
    for record in records:
        execution._store_turn(conversation.pk, conversation.attempt, record)
    Conversation.objects.filter(pk=conversation.pk).update(status=status)
    conversation.refresh_from_db()
    return conversation
