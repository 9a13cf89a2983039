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
