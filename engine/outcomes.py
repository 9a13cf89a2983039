"""Where a conversation stands, and why a simulated one ended: one enum each, shared by the engine, the
results format, the database and the pages.

StrEnums: a member is its string, so what is stored and written to JSON reads exactly as before.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A conversation's status, and a run's. The engine ends a conversation passed, failed, error or
    cancelled; queued and running exist only in the web app, before and while a worker plays it. Skipped is
    a re-grade's eval that the source run never played (the new version added it): nothing to grade, so it
    counts neither as a failure nor as a pass, and leaves the run's status to the evals that were re-graded."""

    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


# Tuples of members, so that a plain string read from a database row is found in them too.
ACTIVE = (Status.QUEUED, Status.RUNNING)
FINISHED = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.SKIPPED)
GRADED = (Status.PASSED, Status.FAILED)  # finished with a score
# How the verdict of a conversation its run never started begins ("not started: cost limit $5.00 reached"): a
# stopped run counts these apart from the ones it stopped mid-way.
NOT_STARTED = "not started"


class TerminationKind(StrEnum):
    """Why a simulated conversation ended. Other kinds of conversation end when their script does."""

    CONDITION_MET = "condition_met"  # simulate.stop_when held; the detail says what decided it
    MAX_TURNS = "max_turns"  # simulate.max_turns reached; the detail is that number
    INPUTS_EXHAUSTED = "inputs_exhausted"  # no follow-up left and no simulated user to write one
    ERROR = "error"  # an endpoint failed (the eval's `error` says how)

    def describe(self, detail: str | None = None) -> str:
        """The ending as people read it: "condition met: after_turns 3", "max turns (8)", "error"."""
        if self is TerminationKind.CONDITION_MET:
            return f"condition met: {detail}" if detail else "condition met"
        if self is TerminationKind.MAX_TURNS:
            return f"max turns ({detail})" if detail else "max turns"
        return self.value.replace("_", " ")

    @classmethod
    def read(cls, text: str) -> TerminationKind | None:
        """The kind an ending in words begins with: for records that carry only the words."""
        return next((kind for kind in cls if text.startswith(kind.describe())), None)
