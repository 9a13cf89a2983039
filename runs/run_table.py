"""The run page's conversation table: its filters and sort from the URL, the page of conversations the database
filters, sorts and pages for it (the same cost whatever the run's size), the next failure the `n` key jumps
to, and what each row shows beside its conversation's fields."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db.models import Case, F, IntegerField, Max, Value, When, Window
from django.db.models.functions import RowNumber
from django.http import QueryDict

from engine.clients.settings import SettingRefused

from . import display, page_cache, selectors
from .access import Access
from .models import Run, Status
from .timing import waiting

CONVERSATIONS_PER_PAGE = 100
# Each sort as the database orders the run's conversations; suite order breaks ties.
SORTS = {
    "": ("suite order", ()),
    "score": ("score, lowest first", (F("score").asc(nulls_last=True),)),
    "-score": ("score, highest first", (F("score").desc(nulls_last=True),)),
    "turns": ("most turns", ("-turn_count",)),
    "tokens": ("most tokens", ((F("prompt_tokens") + F("completion_tokens")).desc(),)),
    "cost": ("highest cost", ("-cost",)),
}
TRIAGE_KEYS = ("status", "kind", "tag", "tool", "iteration", "q", "sort")
OVERRIDDEN = "overridden"  # the status filter's extra choice: conversations a reviewer overrode


@dataclass
class Table:
    """The conversation table: the rows to render (`shown`), or the table as rendered before (`stored`)."""

    triage: dict
    shown: list
    stored: dict | None
    key: str | None
    delta: bool
    columns: list
    signature: str
    grader_names: list[str]


def table(
    access: Access, query: QueryDict, facts, progress: dict, flaky: set[int] | None, since, oob: bool, now
) -> Table:
    """The table for `access` and the URL's `query`: only the flaky evals' conversations when `flaky` is given,
    only the rows changed since `since` when the poll can take them alone."""
    run = access.run
    triage = _triage(query, facts, _tools(run, facts))
    sizes = facts.sizes if facts is not None else {}
    grader_names = selectors.grader_columns(run)
    columns = display.table_columns(
        iterations=bool(sizes), judge=bool(progress["judge_tokens"]), user=bool(progress["user_tokens"])
    )
    signature = display.columns_signature(columns, grader_names)
    # A poll of the unfiltered table in suite order sends only the rows changed since the last one, while the
    # columns are those of the header the page has; filtered or sorted tables, and a table that gained a
    # column, are sent whole (a page at most), as rows may enter, leave or move.
    delta = since is not None and not triage["query"] and flaky is None and query.get("cols") == signature
    key = None if delta else page_cache.table_key(run, access.token, oob, query.urlencode())
    stored = page_cache.stored_table(key)
    shown = []
    if stored is None:
        page = _page(query, run, triage, facts, flaky, progress["total"], rendered=not delta)
        triage.update(page=page, matched=page.paginator.count)
        shown = page.object_list
    if delta:
        changed = selectors.changed_since([c.pk for c in shown], since)
        shown = [c for c in shown if c.pk in changed]
    _prepare_rows(shown, access, sizes, grader_names, now)
    # Whether its rows go out of band is part of each row's cache key, with the columns.
    page_cache.cached_rows(shown, (signature, display.STRIP_MAX_MARKS, delta))
    return Table(triage, shown, stored, key, delta, columns, signature, grader_names)


def _prepare_rows(shown: list, access: Access, sizes: dict, grader_names: list[str], now: datetime) -> None:
    """What each row shows beside its conversation's fields: its link, what it waits for, its grader cells,
    its verdict as beside the run's header (display.row_verdict)."""
    stop_reason = access.run.stop_reason
    refused = SettingRefused.read(stop_reason) is not None
    for conversation in shown:
        conversation.verdict_shown = display.row_verdict(conversation, stop_reason, refused)
        conversation.url = access.conversation_url(conversation.index, conversation.iteration)
        conversation.waiting = waiting(conversation, now)
        conversation.iterations = sizes.get(conversation.index, 1)
        conversation.grader_cells = display.grader_cells(conversation, grader_names)


def _tools(run: Run, facts) -> list[str]:
    """The tools the run's conversations called, for the "called X" filter: asked only of a suite that offers
    tools, and cached once the run has settled."""
    if facts is None or not facts.offers_tools:
        return []
    return page_cache.settled_aggregate(run, "tools", lambda: selectors.tools_called_in(run))


def _triage(query: QueryDict, facts, tools: list[str]) -> dict:
    """The conversation table's filters (status, kind, tag, tool called, iteration, a search over prompts and
    replies) and its sort, all from the URL, so a filtered view can be shared and reloaded; _page adds the
    page."""
    wanted = {key: query.get(key, "").strip()[:200] for key in TRIAGE_KEYS}
    tags = facts.tags if facts is not None else {}
    sizes = facts.sizes if facts is not None else {}
    chosen = {key: value for key, value in wanted.items() if value}
    return {
        "wanted": wanted,
        "query": chosen,
        "active": bool(chosen),
        "statuses": [*(status.value for status in Status), OVERRIDDEN],
        "kinds": facts.kinds if facts is not None else [],
        "tags": sorted({tag for values in tags.values() for tag in values}),
        # A tool asked for in the URL stays a choice while the run has not stored it yet.
        "tools": sorted({*tools, wanted["tool"]} - {""}) if tools or wanted["tool"] else [],
        "iterations": max(sizes.values(), default=1),
        "sorts": [(key, label) for key, (label, _) in SORTS.items()],
    }


def _page(
    query: QueryDict, run: Run, triage: dict, facts, flaky: set[int] | None, total: int, *, rendered: bool
) -> Page:
    """The page of conversations the table shows. The database filters, sorts and pages, so a page costs the
    same whatever the run's size."""
    wanted = triage["wanted"]
    tags = facts.tags if facts is not None else {}
    sizes = facts.sizes if facts is not None else {}
    rows = run.conversations.defer("history", "system")
    if flaky is not None:
        rows = rows.filter(index__in=flaky)
    if wanted["status"] == OVERRIDDEN:
        rows = rows.exclude(original={})
    elif wanted["status"]:
        rows = rows.filter(status=wanted["status"])
    if wanted["kind"]:
        rows = rows.filter(style=wanted["kind"])
    if wanted["tag"]:
        rows = rows.filter(index__in=[index for index, values in tags.items() if wanted["tag"] in values])
    if wanted["tool"]:
        rows = rows.filter(selectors.called(wanted["tool"]))
    if wanted["iteration"].isdigit():
        rows = rows.filter(iteration=int(wanted["iteration"]) - 1)
    if wanted["q"]:
        rows = rows.filter(selectors.saying(run, wanted["q"]))
    sort = wanted["sort"] if wanted["sort"] in SORTS else ""
    rows = rows.order_by(*SORTS[sort][1], "index", "iteration")
    paginator = Paginator(rows, CONVERSATIONS_PER_PAGE)
    # Unfiltered, counted already: every conversation (the progress aggregate), or the flaky evals'.
    if not triage["query"]:
        paginator.count = total if flaky is None else sum(sizes.get(index, 1) for index in flaky)
    page = paginator.get_page(query.get("page"))
    # Only where the table is rendered: a poll that sends changed rows alone does not need it.
    if rendered:
        triage["next_failure"] = _next_failure(rows, page, (*SORTS[sort][1], "index", "iteration"))
    return page


FAILURES = (Status.FAILED, Status.ERROR)


def _next_failure(rows, page: Page, order: tuple) -> dict | None:
    """The first failed or errored conversation after `page` in the table's order, filters and sort alike, as
    {"page", "pk"}, for the `n` key once the page has no failure below: one query, numbered in the database,
    on the last page too, so that a page makes as many queries whatever the run's size. None when no failure
    follows."""
    # Both conditions are window expressions, so the database numbers every row before either one filters.
    found = (
        rows.annotate(
            position=Window(RowNumber(), order_by=[_expression(term) for term in order]),
            failing=Window(
                Max(
                    Case(
                        When(status__in=FAILURES, then=Value(1)),
                        default=Value(0),
                        output_field=IntegerField(),
                    )
                ),
                partition_by=[F("pk")],
            ),
        )
        .filter(position__gt=page.end_index(), failing=1)
        .order_by("position")
        .values_list("pk", "position")
        .first()
    )
    if found is None:
        return None
    pk, position = found
    return {"page": (position - 1) // CONVERSATIONS_PER_PAGE + 1, "pk": pk}


def _expression(term):
    """An order_by term ("-turn_count", "index" or an expression) as the expression a window orders by."""
    if not isinstance(term, str):
        return term
    return F(term[1:]).desc() if term.startswith("-") else F(term).asc()
