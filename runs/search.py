"""Searching the turns' prompts and replies through the index migration runs.0018 makes: an FTS5 trigram table on
SQLite, a pg_trgm index on PostgreSQL. Without it (or for text too short for trigrams) a search reads every turn
of the run."""

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


def conversations_saying(run, text: str):
    """Ids of the conversations with a turn whose prompt or reply contains `text`, in any case, for a condition
    `pk__in` on the run's conversations (the caller's query keeps to the run)."""
    if len(text) >= SHORTEST and _indexed(connection.vendor, str(connection.settings_dict["NAME"])):
        pattern = f"%{connection.ops.prep_for_like_query(text)}%"  # as Django escapes icontains
        if connection.vendor == "sqlite":
            # From the index's few turns (CROSS JOIN keeps SQLite from walking the run's conversations and
            # probing each one's turns instead), then the scan's own condition decides on them, so the answer
            # stays LIKE's (which folds ASCII case only).
            phrase = '"' + text.replace('"', '""') + '"'
            return RawSQL(
                """SELECT t.conversation_id FROM runs_turn_text f CROSS JOIN runs_turn t ON t.id = f.rowid
                   WHERE runs_turn_text MATCH %s
                     AND (json_extract(t.record, '$.response') LIKE %s ESCAPE '\\'
                          OR json_extract(t.record, '$.prompt') LIKE %s ESCAPE '\\')""",
                [phrase, pattern, pattern],
            )
        # PostgreSQL: the indexed text, unquoted (comparing the JSON, a reply's quote or line break would not
        # match itself), ILIKE'd: exact, and what the index serves.
        return RawSQL(
            f"SELECT conversation_id FROM {Turn._meta.db_table} WHERE {_PG_TEXT} ILIKE %s", [pattern]
        )
    scan = Q(record__response__icontains=text) | Q(record__prompt__icontains=text)
    return Turn.objects.filter(conversation__run=run).filter(scan).values("conversation_id")


@functools.cache
def _indexed(vendor: str, database: str) -> bool:
    """Whether this database has the index (the migration makes it where it can); asked once per process."""
    query = _PRESENT.get(vendor)
    if query is None:
        return False
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchone() is not None
