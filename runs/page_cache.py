"""The run page's caches. What a settled run shows changes only with a reviewer's override or a retry, both of
which bump its revision, so every key names the run's state and revision and nothing is ever invalidated:
- `aggregates`: what reads every conversation (counts, gates, repeated evals' statistics and strips);
- `tables`: the conversation table as the page rendered it;
- `rows`: each finished row's HTML, for the rows of a table rendered again."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.core.cache import caches
from django.core.cache.utils import make_template_fragment_key

from . import display, selectors
from .models import ACTIVE, Run, Status

# A run in one of these has every conversation finished. A cancelled run is not settled: the conversations
# still talking to the model finish their turn after it.
SETTLED = (Status.PASSED, Status.FAILED, Status.ERROR)
SECONDS = 3600
# The name the rows of the conversation table are cached under ({% cache %} in templates/runs/run/_row.html).
ROW_FRAGMENT = "run_row"
FINISHED_COUNTED = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED)


def is_settled(run: Run) -> bool:
    return run.status in SETTLED and run.finished_at is not None


def settled_aggregate(run: Run, name: str, compute: Callable[[], Any]) -> Any:
    """compute(), from the `aggregates` cache while the run is settled and stays as it is."""
    if not is_settled(run):
        return compute()
    key = f"{name}:{run.pk}:{run.status}:{run.finished_at.timestamp()}:{run.revision}"
    cache = caches["aggregates"]
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, SECONDS)
    return value


def repeated(run: Run, indexes: list[int], outcomes: dict, facts) -> tuple[dict, list]:
    """The statistics and strips of these repeated evals, each cached apart. An eval's statistics cover its
    finished iterations, which only grow in number while the run goes, so its finished counts are part of the
    key; its strip shows unfinished iterations too, and is cached once none is left."""
    cache = caches["aggregates"]
    empty = dict.fromkeys(FINISHED_COUNTED, 0)
    counted = {
        i: ",".join(str(outcomes.get(i, empty)[status]) for status in FINISHED_COUNTED) for i in indexes
    }
    stat_keys = {i: f"stats:{run.pk}:{run.revision}:{i}:{counted[i]}" for i in indexes}
    found = cache.get_many(stat_keys.values())
    results = {i: found[key] for i, key in stat_keys.items() if key in found}
    fresh = selectors.repeated_so_far(run, [i for i in indexes if i not in results], facts)
    cache.set_many({stat_keys[i]: result for i, result in fresh.items()}, SECONDS)
    results.update(fresh)
    representatives = {
        i: r.stats.representative for i, r in results.items() if r.stats.representative is not None
    }
    done = {i for i in indexes if i in outcomes and not outcomes[i]["unfinished"]}
    strip_keys = {i: f"strip:{stat_keys[i]}:{representatives.get(i)}" for i in done}
    found = cache.get_many(strip_keys.values())
    strips = {i: found[key] for i, key in strip_keys.items() if key in found}
    missing = [i for i in indexes if i not in strips]
    wanted = {i: representatives[i] for i in missing if i in representatives}
    for row in selectors.strips(run, missing, display.ITERATION_MARKS_MAX, wanted):
        strips.setdefault(row.index, []).append(row)
    cache.set_many({strip_keys[i]: strips[i] for i in missing if i in done and i in strips}, SECONDS)
    return results, [row for i in sorted(strips) for row in strips[i]]


def table_key(run: Run, token: str | None, oob: bool, query: str) -> str | None:
    """The key a settled run's rendered conversation table is cached under (None while the run may change):
    the table follows from the run's state, who is looking (the owner or a share link, whose links differ),
    whether it goes out of band, and the page's query (filters, sort, page)."""
    if not is_settled(run):
        return None
    state = f"{run.pk}|{run.status}|{run.finished_at.timestamp()}|{run.revision}|{token}|{oob}|{query}"
    return "table:" + hashlib.blake2s(state.encode(), digest_size=16).hexdigest()


def stored_table(key: str | None) -> dict | None:
    """{"html", "page"} of a table rendered before, or None."""
    return caches["tables"].get(key) if key else None


def store_table(key: str, html: str, page: int) -> None:
    caches["tables"].set(key, {"html": html, "page": page}, SECONDS)


def cached_rows(shown: list, columns: tuple) -> None:
    """Each finished row's HTML from the `rows` cache where it is (`row_html`), its key where it is not
    (`row_key`, the template caches it), and the strip of every row to be rendered: a page's turns are its
    costliest read, and only rendered rows need them. Stored turns never change, so a conversation's own
    fields say which strip it has. Queued and running rows change by the second and are rendered each time."""
    for conversation in shown:
        finished = conversation.status not in ACTIVE
        conversation.row_key = display.row_key(conversation, columns) if finished else None
    keys = {c.pk: make_template_fragment_key(ROW_FRAGMENT, [c.row_key]) for c in shown if c.row_key}
    cached = caches["rows"].get_many(keys.values()) if keys else {}
    rendered = []
    for conversation in shown:
        conversation.row_html = cached.get(keys.get(conversation.pk))
        if conversation.row_html is None:
            rendered.append(conversation)
    graded = selectors.graded_turns_of(rendered, display.GRADED_STYLES)
    for conversation in rendered:
        conversation.strip = display.strip(
            conversation,
            display.turn_marks(graded.get(conversation.pk, ()), conversation.original.get("reviewed_turns")),
        )
