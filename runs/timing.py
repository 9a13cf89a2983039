"""How long a run took and what a conversation waits for, in the words the run pages use."""

from __future__ import annotations

from datetime import timedelta

from . import display
from .models import Conversation, Run, Status


def format_duration(elapsed: timedelta | None) -> str:
    if elapsed is None:
        return ""
    seconds = max(elapsed.total_seconds(), 0.0)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def with_durations(runs) -> list[Run]:
    runs = list(runs)
    for run in runs:
        run.duration = format_duration(run.elapsed)
    return runs


def waiting(conversation: Conversation, now) -> dict | None:
    """What a running conversation waits for before its next model call (a rate limit, an outage), if any."""
    if conversation.status != Status.RUNNING:
        return None
    return display.waiting(conversation.waiting_reason, conversation.waiting_until, now)
