"""A transcript's reads: its place in the run and its stored turns."""

from __future__ import annotations

from django.db.models import Count, Q

from ..models import Conversation, Run, Turn


def neighbours(run: Run, index: int, iteration: int) -> dict:
    """A transcript's place in its run: its position, the run's size, the (index, iteration) before and after
    it, and how many iterations its eval has. Asked of the (run, index, iteration) index, never by reading
    the run's keys, however many conversations the run holds."""
    rows = run.conversations.order_by()
    before = rows.filter(Q(index__lt=index) | Q(index=index, iteration__lt=iteration))
    after = rows.filter(Q(index__gt=index) | Q(index=index, iteration__gt=iteration))
    previous = before.order_by("-index", "-iteration").values_list("index", "iteration").first()
    following = after.order_by("index", "iteration").values_list("index", "iteration").first()
    counts = rows.aggregate(count=Count("pk"), iterations=Count("pk", filter=Q(index=index)))
    return {
        "position": before.count() + 1,
        "count": counts["count"],
        "previous": previous,
        "next": following,
        "iterations": counts["iterations"],
    }


def turns(conversation: Conversation) -> list[Turn]:
    """The conversation's stored turns, in order."""
    return list(conversation.turns.all())


def has_turns_after(conversation: Conversation, position: int) -> bool:
    return conversation.turns.filter(position__gt=position).exists()
