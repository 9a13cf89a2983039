"""The cyclic garbage collector's pace for a process that plays many conversations (the CLI, the workers)."""

from __future__ import annotations

import gc

# Allocations between the collector's young collections while conversations play (Python's own: 700).
YOUNG_COLLECTION_EVERY = 10_000


def collect_seldom() -> None:
    """Every turn allocates hundreds of objects that reference counting frees, and at Python's pace the
    collector walks each survivor again and again, most of all the results a run keeps to its end: a sixth
    of a run's CPU. Collected this much less often, most of them are gone before a walk, and no full
    collection stalls the calls in flight."""
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])


# Allocations between young collections in a process that plays one run and ends (`evalsite run`).
RUN_YOUNG_COLLECTION_EVERY = 1_000_000


def collect_for_one_run() -> None:
    """A process that plays one run and ends keeps every conversation's result to the end, so each young
    collection walks the objects the results added since the last, stalling every call in flight meanwhile.
    The engine makes next to no reference cycles (tests/engine/test_collector.py), so such a process collects
    only after a million objects more: never in most runs, seldom in the largest."""
    gc.set_threshold(RUN_YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
