"""What a run's page shows, read through the selectors and the page's caches. Its cost does not grow with the
run: counts and totals are aggregates, the conversation table is one page read from the database (filtered,
searched and sorted there), and only repeated evals and gates read a few columns of every conversation."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from . import display, page_cache, selectors
from .access import Access
from .models import Run, Status
from .timing import format_duration, waiting

BAR_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.RUNNING)
COUNT_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.RUNNING, Status.QUEUED, Status.CANCELLED)
REPEATED_PER_PAGE = 10  # repeated evals a page of the Iterations section shows
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
TRIAGE_KEYS = ("status", "kind", "tag", "iteration", "q", "sort")
OVERRIDDEN = "overridden"  # the status filter's extra choice: conversations a reviewer overrode


@dataclass
class RunPage:
    """The run page's data, one field per name its templates read."""

    run: Run
    shared: bool
    live: bool  # the page keeps polling
    fingerprint: str  # changes whenever the progress section or the conversation table would
    whole: bool  # with the sections that read many rows (repeated evals, gates)
    # The header and the progress section.
    state: dict
    progress: dict
    waiting: dict | None
    calling: dict | None
    can_retry: bool
    segments: list[dict]
    status_counts: list[tuple[str, int]]
    # Counted apart: a reviewer's verdicts are in the counts above, and how many there are is said here.
    overridden_count: int
    elapsed: str
    # Gates; `gates_failed` and `gates_total` count the gates the run's verdict counts.
    gates: list[dict]
    gates_failed: int
    gates_total: int
    # Repeated evals: one page of them, all or the flaky ones only.
    iterated: list
    iterated_page: Page
    iterated_total: int
    flaky_count: int
    flaky_only: bool
    # The conversation table: one page of rows, or only the rows changed since the last poll (`delta`), or
    # a settled run's table as rendered before (`conversations_html`, cached under `table_key`).
    conversations: list
    conversations_html: str | None
    table_key: str | None
    delta: bool
    changed: list
    triage: dict
    conversation_total: int
    show_iterations: bool
    show_judge: bool
    show_user: bool
    grader_names: list[str]
    strip_max: int
    urls: dict[str, Any]
    # The owner's controls only.
    share_links: list = field(default_factory=list)
    baseline: Run | None = None
    versions: list[int] = field(default_factory=list)

    def context(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def progress_of(run: Run, facts) -> dict:
    """The progress aggregate: stored on the run when it ended, or counted."""
    by_eval = facts is not None and facts.every_eval_repeated
    return page_cache.settled_aggregate(
        run,
        f"progress:{by_eval}",
        lambda: selectors.kept_progress(run, by_eval) or selectors.progress(run, by_eval=by_eval),
    )


def fingerprint(run: Run, progress: dict) -> str:
    """Changes whenever anything the progress section or the conversation table shows changes."""
    counts = ",".join(f"{key}={value}" for key, value in sorted(progress["counts"].items()))
    waits = progress["waiting"]
    calling = progress.get("calling") or {}
    state = (
        f"{run.status}|{counts}|{progress['turns']}|{progress['prompt_tokens']}|{progress['completion_tokens']}|"
        f"{progress['judge_tokens']}|{progress['cost']:.8f}|{waits['count']}|{waits['until']}|"
        f"{calling.get('count')}|{calling.get('since')}"
    )
    return hashlib.blake2s(state.encode(), digest_size=8).hexdigest()


def is_live(run: Run, progress: dict) -> bool:
    """While the run is active, and after a cancel until the conversations still talking to the model have
    finished their turn."""
    return run.is_active or display.in_flight(progress) > 0


def ms(moment: datetime | None) -> int | None:
    """A time as the page's URLs carry it: milliseconds since the epoch."""
    return int(moment.timestamp() * 1000) if moment is not None else None


def run_page(
    access: Access,
    query: QueryDict,
    *,
    exports: list[tuple[str, str]],
    absolute_uri: Callable[[str], str],
    progress: dict | None = None,
    since: datetime | None = None,
    whole_sent: datetime | None = None,
    oob: bool = False,
) -> RunPage:
    """The page for `access` and the URL's `query`. `absolute_uri` makes the share links whole. `since`: the poll's, whose table has only the rows
    changed since then; `whole_sent`: when the poll last had the sections that read many rows, None to
    have them now; `oob`: for the poll, whose sections replace the page's out of band."""
    run = access.run
    facts = selectors.suite_facts(run)
    progress = progress if progress is not None else progress_of(run, facts)
    whole = whole_sent is None
    sizes = facts.sizes if facts is not None else {}  # eval index -> iterations, for repeated evals
    # Verdicts and flakiness of every repeated eval come from one aggregate (the progress bar's own when the
    # suite repeats every eval); strips and statistics only for the evals on this page of the section.
    outcomes = progress.get("by_eval") or (
        page_cache.settled_aggregate(run, "outcomes", lambda: selectors.repeated_outcomes(run, sizes))
        if sizes
        else {}
    )
    verdicts = {index: display.repeated_status(o, facts.thresholds[index]) for index, o in outcomes.items()}
    flaky_evals = {index for index, o in outcomes.items() if o[Status.PASSED] and o[Status.FAILED]}
    flaky_only = query.get("flaky") == "1" and bool(sizes)
    iterated_page = Paginator(sorted(flaky_evals if flaky_only else sizes), REPEATED_PER_PAGE).get_page(
        query.get("ipage")
    )
    results, strips = page_cache.repeated(
        run, list(iterated_page.object_list) if whole else [], outcomes, facts
    )
    gates = []
    if facts is not None and facts.has_gates and whole:
        gates = page_cache.settled_aggregate(
            run, "gates", lambda: display.gates(selectors.gate_results(run, selectors.summary_rows(run)))
        )
    flaky = flaky_evals if flaky_only else None
    triage = _triage(query, facts)
    # A poll of the unfiltered table in suite order sends only the rows changed since the last one; filtered
    # or sorted tables are sent whole (a page at most), as rows may enter, leave or move.
    delta = since is not None and not triage["query"] and flaky is None
    table_key = None if delta else page_cache.table_key(run, access.token, oob, query.urlencode())
    stored = page_cache.stored_table(table_key)
    if stored is None:
        page = _page(query, run, triage, facts, flaky, progress["total"])
        triage.update(page=page, matched=page.paginator.count)
        shown, page_number = page.object_list, page.number
    else:
        shown, page_number = [], stored["page"]
    if delta:
        changed = selectors.changed_since([c.pk for c in shown], since)
        shown = [c for c in shown if c.pk in changed]
    grader_names = selectors.grader_columns(run)
    now = timezone.now()
    _prepare_rows(shown, access, sizes, grader_names, now)
    # The table's own settings (which columns it has, whether its rows go out of band): part of each row's key.
    columns = (
        bool(sizes),
        bool(progress["judge_tokens"]),
        bool(progress["user_tokens"]),
        display.STRIP_MAX_MARKS,
    )
    page_cache.cached_rows(shown, (*columns, delta))
    print_ = fingerprint(run, progress)
    urls = {
        "run": access.url("detail"),
        "all_evals": access.url("detail"),
        "flaky_only": access.url("detail", query={"flaky": 1}),
        "progress": access.url(
            "progress",
            query={
                "fp": print_,
                "since": ms(now),
                # When the sections that read many rows were last sent: the poll sends them again after a while.
                "whole": ms(now if whole else whole_sent),
                "flaky": 1 if flaky_only else None,
                "page": page_number if page_number > 1 else None,
                **triage["query"],
            },
        ),
        "json": access.url("json"),
        "exports": exports,
        # A run of a calibration set has a page of figures: how far each judge agrees with the labels.
        "calibration": access.url("calibration") if facts is not None and facts.calibration else None,
    }
    page = RunPage(
        run=run,
        shared=access.shared,
        live=is_live(run, progress),
        fingerprint=print_,
        whole=whole,
        state=display.run_state(run, progress, gates, *_eval_counts(progress, outcomes, verdicts)),
        progress=progress,
        waiting=display.waiting(
            progress["waiting"]["reason"],
            progress["waiting"]["until"],
            now,
            count=progress["waiting"]["count"],
        ),
        calling=display.calling(progress.get("calling"), now),
        can_retry=not run.is_active
        and run.status != Status.CANCELLED
        and progress["counts"][Status.ERROR] > 0,
        segments=_segments(progress),
        status_counts=[(status.value, progress["counts"][status]) for status in COUNT_ORDER],
        overridden_count=progress["overridden"],
        elapsed=format_duration(run.elapsed),
        gates=gates,
        gates_failed=sum(not gate["passed"] for gate in gates if gate["top"]),
        gates_total=sum(gate["top"] for gate in gates),
        iterated=display.iterated_rows(strips, results, outcomes, access.conversation_url),
        iterated_page=iterated_page,
        iterated_total=len(sizes),
        flaky_count=len(flaky_evals),
        flaky_only=flaky_only,
        conversations=shown,
        conversations_html=mark_safe(stored["html"]) if stored else None,  # rendered by the page's template
        table_key=table_key,
        delta=delta,
        changed=shown if delta else [],
        triage=triage,
        conversation_total=progress["total"],
        show_iterations=columns[0],
        show_judge=columns[1],
        show_user=columns[2],
        grader_names=grader_names,
        strip_max=display.STRIP_MAX_MARKS,
        urls=urls,
    )
    if not access.shared:
        page.share_links = share_links(run, absolute_uri)
        page.baseline = selectors.baseline_besides(run)
        page.versions = list(
            run.suite_version.suite.versions.order_by("-number").values_list("number", flat=True)
        )
    return page


def share_links(run: Run, absolute_uri: Callable[[str], str]) -> list:
    """The run's active share links, each with its whole URL."""
    links = selectors.active_share_links(run)
    for link in links:
        link.url = absolute_uri(reverse("share:run", args=[link.token]))
    return links


def _prepare_rows(shown: list, access: Access, sizes: dict, grader_names: list[str], now: datetime) -> None:
    """What each row shows beside its conversation's fields: its link, what it waits for, its grader cells."""
    for conversation in shown:
        conversation.url = access.conversation_url(conversation.index, conversation.iteration)
        conversation.waiting = waiting(conversation, now)
        conversation.iterations = sizes.get(conversation.index, 1)
        conversation.grader_cells = display.grader_cells(conversation, grader_names)


def _segments(progress: dict) -> list[dict]:
    """The progress bar: one coloured segment per status, as a share of all conversations."""
    total = progress["total"] or 1
    return [
        {
            "status": status,
            "count": progress["counts"][status],
            # A whole percent, at least 1 so one conversation of thousands still shows (app.css .bar-w-N).
            "width": max(1, round(100 * progress["counts"][status] / total)),
        }
        for status in BAR_ORDER
        if progress["counts"][status]
    ]


def _eval_counts(progress: dict, outcomes: dict, verdicts: dict) -> tuple[int, int]:
    """(evals, failed evals) for the header: an eval run once counts by its conversation, a repeated one once,
    by its pass rate."""
    single_total = progress["total"] - sum(o["total"] for o in outcomes.values())
    single_failed = progress["counts"][Status.FAILED] - sum(o[Status.FAILED] for o in outcomes.values())
    return single_total + len(verdicts), single_failed + sum(v == Status.FAILED for v in verdicts.values())


def _triage(query: QueryDict, facts) -> dict:
    """The conversation table's filters (status, kind, tag, iteration, a search over prompts and replies) and
    its sort, all from the URL, so a filtered view can be shared and reloaded; _page adds the page."""
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
        "iterations": max(sizes.values(), default=1),
        "sorts": [(key, label) for key, (label, _) in SORTS.items()],
    }


def _page(query: QueryDict, run: Run, triage: dict, facts, flaky: set[int] | None, total: int) -> Page:
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
    return paginator.get_page(query.get("page"))
