"""Searching the turns' prompts and replies through the index migration runs.0018 made: an FTS5 trigram table on
SQLite, a pg_trgm index on PostgreSQL. Without it (or for text too short for trigrams) a search reads every turn
of the run, as before the index."""

from __future__ import annotations

import functools

from django.db import connection
from django.db.models import Q
from django.db.models.expressions import RawSQL

from .models import Turn

# As the migration wrote it (runs/migrations/0018_turn_text_search.py): a different expression misses the index.
_PG_TEXT = "(coalesce(record->>'prompt', '') || E'\\n' || coalesce(record->>'response', ''))"
_PRESENT = {
    "sqlite": "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs_turn_text'",
    "postgresql": "SELECT 1 FROM pg_indexes WHERE indexname = 'runs_turn_text_trgm'",
}
SHORTEST = 3  # characters: a trigram index cannot narrow a shorter text down


def turns_saying(text: str) -> Q:
    """Turns whose prompt or reply contains `text`, in any case, as a condition on Turn."""
    scan = Q(record__response__icontains=text) | Q(record__prompt__icontains=text)
    if len(text) < SHORTEST or not _indexed(connection.vendor, str(connection.settings_dict["NAME"])):
        return scan
    if connection.vendor == "sqlite":
        # The index narrows the turns to those holding every trigram of the text in order; the scan's own
        # condition then decides on those few, so the answer is the scan's (LIKE folds ASCII case only).
        phrase = '"' + text.replace('"', '""') + '"'
        return scan & Q(
            pk__in=RawSQL("SELECT rowid FROM runs_turn_text WHERE runs_turn_text MATCH %s", [phrase])
        )
    # PostgreSQL: the indexed text, unquoted (the scan compared the JSON, so a reply's quote or line break did
    # not match itself), ILIKE'd: exact, and what the index serves.
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return Q(pk__in=RawSQL(f"SELECT id FROM {Turn._meta.db_table} WHERE {_PG_TEXT} ILIKE %s", [pattern]))


@functools.cache
def _indexed(vendor: str, database: str) -> bool:
    """Whether this database has the index (the migration makes it where it can); asked once per process."""
    query = _PRESENT.get(vendor)
    if query is None:
        return False
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchone() is not None
