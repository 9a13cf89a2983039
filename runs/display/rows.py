"""A row of the run's conversation table: its grader cells, and the digest its rendered HTML is cached under."""

from __future__ import annotations

import hashlib

from ..models import Conversation

# A row's ✓✗ strip shows this many marks, then an ellipsis.
STRIP_MAX_MARKS = 24


def row_key(conversation: Conversation, columns: tuple) -> str:
    """Everything a row of the run's table is drawn from, as the digest its HTML is cached under (the `rows`
    cache): every loaded field and every value the view attached, not the fields the template reads, so a new
    column cannot be served stale. `columns`: which columns the table has."""
    # In the order the fields were loaded and the values attached, the same on every request; sorting them
    # would cost as much as the digest.
    state = [(name, value) for name, value in vars(conversation).items() if not name.startswith("_")]
    return hashlib.blake2b(repr((state, columns)).encode(), digest_size=16).hexdigest()


def grader_cells(conversation, names: list[str]) -> list[dict | None]:
    """One cell per grader column: its score and whether it passed; None when it did not grade this eval."""
    found = {item["name"]: item for item in conversation.graders or ()}
    cells = []
    for name in names:
        item = found.get(name)
        if item is None or item.get("score") is None:
            cells.append(None)
        else:
            cells.append({"score": f"{item['score']:.2f}", "passed": item.get("passed"),
                          "title": f"{name}: {item['score']:.2f}, needs {item.get('threshold', 1):g}"})  # fmt: skip
    return cells
