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
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from projects.access import role_of
from projects.roles import Can, allows

from . import concurrency as caps
from . import display, page_cache, run_table, selectors
from .access import Access
from .endpoints import build_registry
from .models import Run, Status
from .timing import format_duration

BAR_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.SKIPPED, Status.RUNNING)
COUNT_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.RUNNING, Status.QUEUED, Status.CANCELLED)
REPEATED_PER_PAGE = 10  # repeated evals a page of the Iterations section shows


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
    refusal: dict | None  # the setting the endpoint refused, which stopped the run (display.refusal_notice)
    progress: dict
    summary: dict  # the progress card's count in words
    waiting: dict | None
    calling: dict | None
    workers: dict | None  # no worker to play the queued conversations, or fewer slots than the run asks
    # What holds an active run below its concurrency now ("held to 20 by endpoint fk"), else None.
    held: str | None
    can_retry: bool
    # Why no retry is offered although conversations errored (a re-grade's divergences); "" otherwise.
    no_retry: str
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
    # The table's columns, one list its header and its rows both read, and their digest the poll sends back.
    columns: list
    columns_signature: str
    grader_names: list[str]
    strip_max: int
    urls: dict[str, Any]
    # The owner's controls only.
    share_links: ShareLinks | None = None
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
        lambda: selectors.stored_progress(run, by_eval) or selectors.progress(run, by_eval=by_eval),
    )


def fingerprint(run: Run, progress: dict) -> str:
    """Changes whenever anything the progress section or the conversation table shows changes."""
    counts = ",".join(f"{key}={value}" for key, value in sorted(progress["counts"].items()))
    waits = progress["waiting"]
    calling = progress.get("calling") or {}
    state = (
        f"{run.status}|{counts}|{progress['turns']}|{progress['prompt_tokens']}|{progress['completion_tokens']}|"
        f"{progress['judge_tokens']}|{progress['cost']:.8f}|{waits['count']}|{waits['until']}|"
        f"{calling.get('count')}|{calling.get('since')}|{progress.get('workers')}"
    )
    return hashlib.blake2s(state.encode(), digest_size=8).hexdigest()


def is_live(run: Run, progress: dict) -> bool:
    """While the run is active, and after a cancel until the conversations still talking to the model have
    finished their turn."""
    return run.is_active or display.in_flight(progress) > 0


def held(run: Run) -> str | None:
    """What holds the run below its concurrency while it plays: its endpoint's cap, lowered in the admin (or
    the environment) since the launch, which refuses a launch asking more."""
    if not run.is_active or run.is_mock:
        return None
    return caps.held(build_registry(), run.endpoint_name, run.concurrency)


def ms(moment: datetime | None) -> int | None:
    """A time as the page's URLs carry it: milliseconds since the epoch."""
    return int(moment.timestamp() * 1000) if moment is not None else None


def build(
    access: Access,
    query: QueryDict,
    *,
    exports: list[tuple[str, str]],
    absolute_uri: Callable[[str], str],
    progress: dict | None = None,
    since: datetime | None = None,
    whole_sent: datetime | None = None,
    oob: bool = False,
    viewer=None,
) -> RunPage:
    """The page for `access` and the URL's `query`; `absolute_uri` makes share links whole, for `viewer` (the
    signed-in member, when not a share-link visitor) the ones they may see. For the poll:
    `since`, when it last heard from the server (its table has only the rows changed since); `whole_sent`,
    when it last had the sections that read many rows (None: have them now); `oob`, sections out of band."""
    run = access.run
    facts = selectors.suite_facts(run)
    progress = progress if progress is not None else progress_of(run, facts)
    whole = whole_sent is None
    now = timezone.now()
    repeated = _repeated(access, query, facts, progress, whole)
    gates = _gates(run, facts) if whole else []
    table = run_table.table(
        access, query, facts, progress, repeated.flaky if repeated.flaky_only else None, since, oob, now
    )
    fp = fingerprint(run, progress)
    page_number = table.stored["page"] if table.stored else table.triage["page"].number
    urls = {
        "run": access.url("detail"),
        "all_evals": access.url("detail"),
        "flaky_only": access.url("detail", query={"flaky": 1}),
        "progress": access.url(
            "progress",
            query={
                "fp": fp,
                "since": ms(now),
                # When the sections that read many rows were last sent: the poll sends them again after a while.
                "whole": ms(now if whole else whole_sent),
                "flaky": 1 if repeated.flaky_only else None,
                "page": page_number if page_number > 1 else None,
                "cols": table.signature,
                **table.triage["query"],
            },
        ),
        "json": access.url("json"),
        "exports": exports,
        # A run of a calibration set has a page of figures: how far each judge agrees with the labels.
        "calibration": access.url("calibration") if facts is not None and facts.calibration else None,
    }
    waits = progress["waiting"]
    retryable, no_retry = _retry(run, progress)
    page = RunPage(
        run=run,
        shared=access.shared,
        live=is_live(run, progress),
        fingerprint=fp,
        whole=whole,
        state=display.run_state(
            run,
            progress,
            gates,
            *_eval_counts(progress, repeated.outcomes, repeated.verdicts),
            calibration=_calibration(run, facts),
        ),
        refusal=display.refusal_notice(run),
        progress=progress,
        summary=display.progress_summary(progress, stopped=bool(run.stop_reason)),
        waiting=display.waiting(waits["reason"], waits["until"], now, count=waits["count"]),
        calling=display.calling(progress.get("calling"), now),
        workers=display.workers(progress.get("workers"), progress, run.concurrency),
        held=held(run),
        can_retry=retryable,
        no_retry=no_retry,
        segments=_segments(progress),
        status_counts=_status_counts(progress),
        overridden_count=progress["overridden"],
        elapsed=format_duration(run.elapsed),
        gates=gates,
        gates_failed=sum(not gate["passed"] for gate in gates if gate["top"]),
        gates_total=sum(gate["top"] for gate in gates),
        iterated=repeated.rows,
        iterated_page=repeated.page,
        iterated_total=repeated.total,
        flaky_count=len(repeated.flaky),
        flaky_only=repeated.flaky_only,
        conversations=table.shown,
        conversations_html=mark_safe(table.stored["html"])
        if table.stored
        else None,  # rendered by our template
        table_key=table.key,
        delta=table.delta,
        changed=table.shown if table.delta else [],
        triage=table.triage,
        conversation_total=progress["total"],
        columns=table.columns,
        columns_signature=table.signature,
        grader_names=table.grader_names,
        strip_max=display.STRIP_MAX_MARKS,
        urls=urls,
    )
    if not access.shared:
        page.share_links = share_links(run, absolute_uri, viewer)
        page.baseline = selectors.baseline_besides(run)
        page.versions = list(
            run.suite_version.suite.versions.filter(ref="")
            .order_by("-number")
            .values_list("number", flat=True)
        )
    return page


@dataclass
class _Repeated:
    """The Iterations section: every repeated eval's outcome counts, verdict and flakiness, from one aggregate,
    and the rows of one page of them, with their strips and statistics."""

    outcomes: dict[int, dict]
    verdicts: dict[int, str]
    flaky: set[int]
    flaky_only: bool
    total: int
    page: Page
    rows: list


def _repeated(access: Access, query: QueryDict, facts, progress: dict, whole: bool) -> _Repeated:
    run = access.run
    sizes = facts.sizes if facts is not None else {}  # eval index -> iterations, for repeated evals
    # The progress aggregate has the outcomes already when the suite repeats every eval.
    outcomes = progress.get("by_eval") or (
        page_cache.settled_aggregate(run, "outcomes", lambda: selectors.repeated_outcomes(run, sizes))
        if sizes
        else {}
    )
    flaky = {index for index, o in outcomes.items() if o[Status.PASSED] and o[Status.FAILED]}
    flaky_only = query.get("flaky") == "1" and bool(sizes)
    page = Paginator(sorted(flaky if flaky_only else sizes), REPEATED_PER_PAGE).get_page(query.get("ipage"))
    results, strips = page_cache.repeated(run, list(page.object_list) if whole else [], outcomes, facts)
    return _Repeated(
        outcomes=outcomes,
        verdicts={
            index: display.repeated_status(o, facts.thresholds[index]) for index, o in outcomes.items()
        },
        flaky=flaky,
        flaky_only=flaky_only,
        total=len(sizes),
        page=page,
        rows=display.iterated_rows(strips, results, outcomes, access.conversation_url),
    )


def _calibration(run: Run, facts):
    """A finished calibration run's report, for its headline; None for other runs and while it plays."""
    if facts is None or not facts.calibration or run.status not in (Status.PASSED, Status.FAILED):
        return None

    def report():
        suite = selectors.calibration_suite(run)
        return selectors.calibration_report(run, suite) if suite is not None else None

    return page_cache.settled_aggregate(run, "calibration", report)


def _gates(run: Run, facts) -> list[dict]:
    if facts is None or not facts.has_gates:
        return []
    return page_cache.settled_aggregate(
        run, "gates", lambda: display.gates(selectors.gate_results(run, selectors.summary_rows(run)))
    )


@dataclass
class ShareLinks:
    """A run's active share links as one member sees them: those they may copy and revoke (their own; every
    one for the project's admins), each with its whole URL, and how many others there are. A link is as good
    as a sign-in to its run, and one copied from another member's would outlive the copier's membership."""

    shown: list
    others: int

    @property
    def total(self) -> int:
        return len(self.shown) + self.others


def share_links(run: Run, absolute_uri: Callable[[str], str], viewer) -> ShareLinks:
    """The run's active share links as `viewer` sees them (ShareLinks)."""
    links = selectors.active_share_links(run)
    every = allows(role_of(viewer, run.project_id), Can.MANAGE)
    shown = [link for link in links if every or link.created_by_id == viewer.pk]
    for link in shown:
        link.url = absolute_uri(reverse("share:run", args=[link.token]))
    return ShareLinks(shown=shown, others=len(links) - len(shown))


def _status_counts(progress: dict) -> list[tuple[str, int]]:
    """The header's counts by status; skipped only where there are some (a re-grade's added evals)."""
    counts = [(status.value, progress["counts"][status]) for status in COUNT_ORDER]
    skipped = progress["counts"][Status.SKIPPED]
    return counts + [(Status.SKIPPED.value, skipped)] if skipped else counts


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


def _retry(run: Run, progress: dict) -> tuple[bool, str]:
    """Whether "Retry errored conversations" can change anything, and if not although some errored, why. A
    re-grade's divergence replays the same stored turns and diverges again (runs.services.retry_errored
    refuses it too); other runs need no query for it."""
    errors = progress["counts"][Status.ERROR]
    if run.is_active or run.status == Status.CANCELLED or not errors:
        return False, ""
    if (
        run.regraded_from_id
        and not run.conversations.filter(status=Status.ERROR, diverged_at__isnull=True).exists()
    ):
        return False, (
            f"No retry: the {errors} errored conversation{'s' if errors != 1 else ''} diverged from the source "
            "run, and a retry would replay the same stored turns. Re-grade under another version, or launch a "
            "fresh run."
        )
    return True, ""
