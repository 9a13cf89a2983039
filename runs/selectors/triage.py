"""The run page's table of conversations: searching their prompts and replies, which rows changed since the
last poll, and the stored turns their ✓✗ strips show."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from django.db.models import Q

from engine.drivers import GRADED_PER_TURN

from .. import search
from ..models import Conversation, Run, Turn


def changed_since(ids: list[int], since) -> set[int]:
    """Which of these conversations changed at or after `since`: claimed, sent, finished, waiting to retry, or
    given a turn. One query over the page's rows."""
    if not ids:
        return set()
    changed = Conversation.objects.filter(pk__in=ids).filter(
        Q(dispatched_at__gte=since)
        | Q(started_at__gte=since)
        | Q(finished_at__gte=since)
        | Q(waiting_until__gte=since)
        | Q(turns__created_at__gte=since)
    )
    return set(changed.values_list("pk", flat=True).distinct())


def saying(run: Run, text: str) -> Q:
    """Conversations whose first prompt, or any turn's prompt or reply, contains `text` (any case), as one
    condition the run page's query carries: the database searches, nothing is collected here."""
    return Q(prompt__icontains=text) | Q(pk__in=search.conversations_saying(run, text))


def called(name: str) -> Q:
    """Conversations in which the model called the tool `name` (Conversation.tools_called, written when a
    conversation ends): one `contains` the database answers, on SQLite as on PostgreSQL."""
    return Q(tools_called__contains=f"\n{name}\n")


def tools_called_in(run: Run) -> list[str]:
    """Every tool the run's ended conversations called, sorted: the choices of the "called X" filter. One
    query over the distinct call sequences, which conversations of one suite mostly share."""
    sequences = (
        run.conversations.exclude(tools_called="")
        .order_by()
        .values_list("tools_called", flat=True)
        .distinct()
    )
    return sorted({name for sequence in sequences for name in sequence.split("\n") if name})


class GradedTurn(NamedTuple):
    """A stored turn as its ✓✗ mark needs it (runs.display.turn_marks): read as plain values, not as a model
    instance, since a run page reads a great many."""

    passed: bool | None
    record: dict


def graded_turns_of(conversations: Iterable[Conversation]) -> dict[int, list[GradedTurn]]:
    """The stored turns of these conversations (a page of them) whose style grades each turn, for their ✓✗
    strips."""
    ids = [c.pk for c in conversations if c.style in GRADED_PER_TURN]
    turns: dict[int, list[GradedTurn]] = defaultdict(list)
    if not ids:
        return turns
    rows = (
        Turn.objects.filter(conversation_id__in=ids)
        .order_by("conversation_id", "position")
        .values_list("conversation_id", "passed", "record")
    )
    for conversation_id, passed, record in rows:
        turns[conversation_id].append(GradedTurn(passed, record))
    return turns
