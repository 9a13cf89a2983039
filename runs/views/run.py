"""A run's page: live progress, gates, repeated evals' statistics, cancel, retry, share links, results.json,
and its shared read-only twin."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import caches
from django.core.cache.utils import make_template_fragment_key
from django.core.paginator import Paginator
from django.db.models import F
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.safestring import mark_safe
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh, HttpResponseStopPolling

from engine.text import plural

from .. import display, selectors, services
from ..models import ACTIVE, Run, Status
from .common import Access, format_duration, owner, share_view, visitor, waiting


def _fingerprint(run: Run, progress: dict) -> str:
    """Changes whenever anything the progress partial or the conversation table shows changes."""
    counts = ",".join(f"{key}={value}" for key, value in sorted(progress["counts"].items()))
    waiting = progress["waiting"]
    calling = progress.get("calling") or {}
    state = (
        f"{run.status}|{counts}|{progress['turns']}|{progress['prompt_tokens']}|{progress['completion_tokens']}|"
        f"{progress['judge_tokens']}|{progress['cost']:.8f}|{waiting['count']}|{waiting['until']}|"
        f"{calling.get('count')}|{calling.get('since')}"
    )
    return hashlib.blake2s(state.encode(), digest_size=8).hexdigest()


BAR_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.RUNNING)
COUNT_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.RUNNING, Status.QUEUED, Status.CANCELLED)


def _progress_of(run: Run, facts) -> dict:
    by_eval = facts is not None and facts.every_eval_repeated
    return _kept(
        run,
        f"progress:{by_eval}",
        lambda: selectors.stored_progress(run, by_eval) or selectors.progress(run, by_eval=by_eval),
    )


# A run in one of these has every conversation finished, and only a reviewer's override (or a retry, which
# makes it running again) changes them; both count in its revision.
KEPT = (Status.PASSED, Status.FAILED, Status.ERROR)


def _kept(run: Run, name: str, compute):
    """compute(), kept in this process's `aggregates` cache while the run stays as it is, when it has finished:
    the aggregates of a run of 100,000 conversations scan every one of them. A cancelled run is not kept, as
    the conversations still talking to the model finish their turn after it."""
    if run.status not in KEPT or run.finished_at is None:
        return compute()
    key = f"{name}:{run.pk}:{run.status}:{run.finished_at.timestamp()}:{run.revision}"
    cache = caches["aggregates"]
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, KEPT_SECONDS)
    return value


KEPT_SECONDS = 3600


def _repeated(run: Run, indexes: list[int], outcomes: dict, facts) -> tuple[dict, list]:
    """The statistics and strips of these repeated evals, each kept in the `aggregates` cache apart: an eval's
    statistics cover its finished iterations, and while the run goes those only ever grow in number (a
    retry or an override bumps the run's revision), so its finished counts say which they are; its strip
    shows unfinished iterations too, and is kept once none is left. In a live run, dispatched in suite
    order, the evals that have ended are read once and the one or two still going at each refresh."""
    cache = caches["aggregates"]
    empty = dict.fromkeys(FINISHED_COUNTED, 0)
    counted = {
        i: ",".join(str(outcomes.get(i, empty)[status]) for status in FINISHED_COUNTED) for i in indexes
    }
    stat_keys = {i: f"stats:{run.pk}:{run.revision}:{i}:{counted[i]}" for i in indexes}
    kept = cache.get_many(stat_keys.values())
    results = {i: kept[key] for i, key in stat_keys.items() if key in kept}
    fresh = selectors.repeated_so_far(run, [i for i in indexes if i not in results], facts)
    cache.set_many({stat_keys[i]: result for i, result in fresh.items()}, KEPT_SECONDS)
    results.update(fresh)
    representatives = {
        i: r.stats.representative for i, r in results.items() if r.stats.representative is not None
    }
    done = {i for i in indexes if i in outcomes and not outcomes[i]["unfinished"]}
    strip_keys = {i: f"strip:{stat_keys[i]}:{representatives.get(i)}" for i in done}
    kept = cache.get_many(strip_keys.values())
    strips = {i: kept[key] for i, key in strip_keys.items() if key in kept}
    missing = [i for i in indexes if i not in strips]
    wanted = {i: representatives[i] for i in missing if i in representatives}
    for row in selectors.strips(run, missing, display.ITERATION_MARKS_MAX, wanted):
        strips.setdefault(row.index, []).append(row)
    cache.set_many({strip_keys[i]: strips[i] for i in missing if i in done and i in strips}, KEPT_SECONDS)
    return results, [row for i in sorted(strips) for row in strips[i]]


FINISHED_COUNTED = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED)


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


def _run_context(
    request: HttpRequest,
    access: Access,
    *,
    progress: dict | None = None,
    since=None,
    whole: bool = True,
    oob: bool = False,
) -> dict:
    """What the run page shows. Its cost does not grow with the run: counts and totals are aggregates, the
    conversation table is one page read from the database (filtered, searched and sorted there), and only
    repeated evals (their strips and statistics) and gates read a few columns of every conversation.
    `whole`: with those sections (a live run's poll has them every WHOLE_EVERY); `oob`: for the poll, whose
    sections replace the page's out of band. A finished run's table is kept rendered (the `tables` cache)."""
    run = access.run
    facts = selectors.suite_facts(run)
    progress = progress if progress is not None else _progress_of(run, facts)
    fingerprint = _fingerprint(run, progress)
    sizes = facts.sizes if facts is not None else {}  # eval index -> iterations, for repeated evals
    # Repeated evals: their verdicts and which are flaky from one aggregate (the progress bar's own when the
    # suite repeats every eval); their strips and statistics for the evals on this page of the section only
    # (a run may repeat 100 evals 1,000 times).
    outcomes = progress.get("by_eval") or (
        _kept(run, "outcomes", lambda: selectors.repeated_outcomes(run, sizes)) if sizes else {}
    )
    verdicts = {index: display.repeated_status(o, facts.thresholds[index]) for index, o in outcomes.items()}
    flaky_evals = {index for index, o in outcomes.items() if o[Status.PASSED] and o[Status.FAILED]}
    flaky_only = request.GET.get("flaky") == "1" and bool(sizes)
    listed = sorted(flaky_evals if flaky_only else sizes)
    iterated_page = Paginator(listed, REPEATED_PER_PAGE).get_page(request.GET.get("ipage"))
    page_evals = list(iterated_page.object_list) if whole else []
    results, strips = _repeated(run, page_evals, outcomes, facts)
    iterated = display.iterated_rows(strips, results, outcomes, access.conversation_url)
    gates = []
    if facts is not None and facts.has_gates and whole:
        gates = _kept(
            run, "gates", lambda: display.gates(selectors.gate_results(run, selectors.summary_rows(run)))
        )
    flaky = flaky_evals if flaky_only else None
    triage = _triage(request, facts)
    # A poll of the unfiltered table in suite order sends only the rows that changed since the last one: the
    # rest stay as they are on the page. Filtered or sorted tables are sent whole (a page at most), as rows
    # may enter, leave or move.
    delta = since is not None and not triage["query"] and flaky is None
    table_key = None if delta else _table_key(request, access, oob)
    kept_table = caches["tables"].get(table_key) if table_key else None
    if kept_table is None:
        page = _page(request, run, triage, facts, flaky, progress["total"])
        triage.update(page=page, matched=page.paginator.count)
        shown, page_number = page.object_list, page.number
    else:
        shown, page_number = [], kept_table["page"]
    if delta:
        changed = selectors.changed_since([c.pk for c in shown], since)
        shown = [c for c in shown if c.pk in changed]
    grader_names = selectors.grader_columns(run)
    now = timezone.now()
    # The table's own settings (which columns it has, whether its rows go out of band): part of each row's key.
    columns = (
        bool(sizes),
        bool(progress["judge_tokens"]),
        bool(progress["user_tokens"]),
        display.STRIP_MAX_MARKS,
        delta,
    )
    for conversation in shown:
        conversation.url = access.conversation_url(conversation.index, conversation.iteration)
        conversation.waiting = waiting(conversation, now)
        conversation.iterations = sizes.get(conversation.index, 1)
        conversation.grader_cells = display.grader_cells(conversation, grader_names)
    _cached_rows(shown, columns)
    context = {
        "run": run,
        "shared": access.shared,
        "live": _live(run, progress),
        "state": display.run_state(run, progress, gates, *_eval_counts(progress, outcomes, verdicts)),
        "progress": progress,
        "waiting": display.waiting(
            progress["waiting"]["reason"],
            progress["waiting"]["until"],
            now,
            count=progress["waiting"]["count"],
        ),
        "calling": display.calling(progress.get("calling"), now),
        "can_retry": not run.is_active
        and run.status != Status.CANCELLED
        and progress["counts"][Status.ERROR] > 0,
        "segments": _segments(progress),
        "status_counts": [(status.value, progress["counts"][status]) for status in COUNT_ORDER],
        # Counted apart: a reviewer's verdicts are in the counts above, and how many there are is said here.
        "overridden_count": progress["overridden"],
        "fingerprint": fingerprint,
        "whole": whole,
        "conversations": shown,
        "conversations_html": mark_safe(kept_table["html"]) if kept_table else None,
        "delta": delta,
        "changed": shown if delta else [],
        "triage": triage,
        "conversation_total": progress["total"],
        "show_iterations": bool(sizes),
        "show_judge": bool(progress["judge_tokens"]),
        "show_user": bool(progress["user_tokens"]),
        "iterated": iterated,
        "iterated_page": iterated_page,
        "iterated_total": len(sizes),
        "flaky_count": len(flaky_evals),
        "flaky_only": flaky_only,
        "gates": gates,
        "gates_failed": sum(not gate["passed"] for gate in gates if gate["top"]),
        "gates_total": sum(gate["top"] for gate in gates),
        "grader_names": grader_names,
        "strip_max": display.STRIP_MAX_MARKS,
        "elapsed": format_duration(run.elapsed),
        "urls": {
            "run": access.url("detail"),
            "all_evals": access.url("detail"),
            "flaky_only": access.url("detail", query={"flaky": 1}),
            "progress": access.url(
                "progress",
                query={
                    "fp": fingerprint,
                    "since": _ms(now),
                    # When the sections that read many rows were last sent: the poll sends them again after
                    # WHOLE_EVERY.
                    "whole": _ms(now if whole else _stamp(request, "whole")),
                    "flaky": 1 if flaky_only else None,
                    "page": page_number if page_number > 1 else None,
                    **triage["query"],
                },
            ),
            "json": access.url("json"),
            "exports": [
                ("JUnit XML", access.url("export", "junit")),
                ("CSV, evals", access.url("export", "csv")),
                ("CSV, turns", access.url("export", "turns.csv")),
                ("Markdown summary", access.url("export", "md")),
            ],
            # A run of a calibration set has a page of figures: how far each judge agrees with the labels.
            "calibration": access.url("calibration") if facts is not None and facts.calibration else None,
        },
    }
    if not access.shared:
        context["share_links"] = _share_links(request, run)
        context["baseline"] = selectors.baseline_besides(run)
        context["versions"] = list(
            run.suite_version.suite.versions.order_by("-number").values_list("number", flat=True)
        )
    if table_key and kept_table is None:
        html = render_to_string("runs/detail.html#conversations", {**context, "oob": oob}, request)
        caches["tables"].set(table_key, {"html": str(html), "page": page_number}, KEPT_SECONDS)
        context["conversations_html"] = html
    return context


def _table_key(request: HttpRequest, access: Access, oob: bool) -> str | None:
    """The key the conversation table is kept under, rendered, while its run stays as it is (None while the
    run may still change; see _kept): everything the table shows follows from the run's state, who is
    looking (the owner or a share link, whose links differ) and the page's query (filters, sort, page)."""
    run = access.run
    if run.status not in KEPT or run.finished_at is None:
        return None
    state = (
        f"{run.pk}|{run.status}|{run.finished_at.timestamp()}|{run.revision}|{access.token}|{oob}|"
        f"{request.GET.urlencode()}"
    )
    return "table:" + hashlib.blake2s(state.encode(), digest_size=16).hexdigest()


def _eval_counts(progress: dict, outcomes: dict, verdicts: dict) -> tuple[int, int]:
    """(evals, failed evals) for the header: an eval run once counts by its conversation, a repeated one once,
    by its pass rate."""
    single_total = progress["total"] - sum(o["total"] for o in outcomes.values())
    single_failed = progress["counts"][Status.FAILED] - sum(o[Status.FAILED] for o in outcomes.values())
    return single_total + len(verdicts), single_failed + sum(v == Status.FAILED for v in verdicts.values())


REPEATED_PER_PAGE = 10  # repeated evals a page of the Iterations section shows


CONVERSATIONS_PER_PAGE = 100
# The name the rows of the conversation table are cached under ({% cache %} in runs/detail.html).
ROW_FRAGMENT = "run_row"
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


def _triage(request: HttpRequest, facts) -> dict:
    """The conversation table's filters (status, kind, tag, iteration, a search over prompts and replies) and
    its sort, all from the URL, so a filtered view can be shared and reloaded; _page adds the page."""
    wanted = {key: request.GET.get(key, "").strip()[:200] for key in TRIAGE_KEYS}
    tags = facts.tags if facts is not None else {}
    sizes = facts.sizes if facts is not None else {}
    query = {key: value for key, value in wanted.items() if value}
    return {
        "wanted": wanted,
        "query": query,
        "active": bool(query),
        "statuses": [*(status.value for status in Status), OVERRIDDEN],
        "kinds": facts.kinds if facts is not None else [],
        "tags": sorted({tag for values in tags.values() for tag in values}),
        "iterations": max(sizes.values(), default=1),
        "sorts": [(key, label) for key, (label, _) in SORTS.items()],
    }


def _page(request: HttpRequest, run: Run, triage: dict, facts, flaky: set[int] | None, total: int):
    """The page of conversations the table shows. The database does the filtering, sorting and paging: a page
    costs the same in a run of 100 and of 100,000."""
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
    return paginator.get_page(request.GET.get("page"))


def _share_links(request: HttpRequest, run: Run) -> list:
    links = selectors.active_share_links(run)
    for link in links:
        link.url = request.build_absolute_uri(reverse("share:run", args=[link.token]))
    return links


def _cached_rows(shown: list, columns: tuple) -> None:
    """Each finished row's HTML from the `rows` cache where it is (`row_html`), its key where it is not
    (`row_key`, the template caches it), and the ✓✗ strip of every row to be rendered: a page's turns are
    its costliest read, and only the rows rendered need them. The key need not cover the strip, as stored
    turns never change: a conversation's own fields (turn_count; `original` for a reviewer's overrides) say
    which strip it has. Queued and running rows change by the second and are rendered each time."""
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
    graded = selectors.graded_turns_of(rendered)
    for conversation in rendered:
        conversation.strip = display.strip(
            conversation,
            display.turn_marks(graded.get(conversation.pk, ()), conversation.original.get("reviewed_turns")),
        )


def _run_page(request: HttpRequest, access: Access) -> HttpResponse:
    return render(request, "runs/detail.html", _run_context(request, access))


# Rows changed this close before the last poll are sent again: a worker's clock may lag the web server's a
# little (separate hosts), and sending a row twice costs nothing.
SINCE_MARGIN = timedelta(seconds=5)


def _stamp(request: HttpRequest, name: str):
    """A time the page sent back (ms since the epoch, as the poll's URL gave it), or None."""
    value = request.GET.get(name, "")
    if not value.isdigit() or len(value) > 15:
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):  # past the year 9999: not a time the page sent
        return None


def _ms(moment) -> int | None:
    return int(moment.timestamp() * 1000) if moment is not None else None


def _since(request: HttpRequest):
    """When the page last heard from the server (the poll's `since`), less the margin."""
    since = _stamp(request, "since")
    return since - SINCE_MARGIN if since is not None else None


# While a run is live, the sections that read many rows (repeated evals' strips and statistics, gates) come
# with every poll this long apart, not every second: a poll of a run that repeats 100 evals 1,000 times
# sent 227 KB and read 10,000 iterations each time. The last poll, when the run ends, has them all.
WHOLE_EVERY = timedelta(seconds=5)


def _live(run: Run, progress: dict) -> bool:
    """Whether the page keeps polling: while the run is active, and after a cancel until the conversations
    still talking to the model have finished their turn."""
    return run.is_active or display.in_flight(progress) > 0


def _progress(request: HttpRequest, access: Access) -> HttpResponse:
    run = access.run
    progress = _progress_of(run, selectors.suite_facts(run))
    live = _live(run, progress)
    if live and request.GET.get("fp") == _fingerprint(run, progress):
        return HttpResponse(status=204)  # nothing changed: htmx keeps what it shows and polls again
    whole = _stamp(request, "whole")
    due = not live or whole is None or timezone.now() - whole >= WHOLE_EVERY
    context = _run_context(request, access, progress=progress, since=_since(request), whole=due, oob=True)
    if live:
        return render(request, "runs/detail.html#poll", context)
    return HttpResponseStopPolling(render_to_string("runs/detail.html#poll", context, request))


@login_required
@require_GET
def detail(request: HttpRequest, run_id) -> HttpResponse:
    return _run_page(request, owner(request, run_id))


@login_required
@require_GET
def progress(request: HttpRequest, run_id) -> HttpResponse:
    return _progress(request, owner(request, run_id))


@login_required
@require_POST
def cancel(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id)
    if services.cancel(run):
        messages.success(
            request, "Run cancelled. Conversations already talking to the model stop after this turn."
        )
    else:
        messages.info(request, "The run had already finished.")
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("runs:detail", run_id=run.pk)


@login_required
@require_POST
def retry_errored(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id)
    try:
        count = services.retry_errored(run)
    except services.RetryRefused as exc:
        messages.info(request, f"Nothing retried: {exc}.")
    else:
        messages.success(
            request,
            f"Retrying {plural(count, 'errored conversation')}: each resumes after its last stored turn.",
        )
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("runs:detail", run_id=run.pk)


def _json(access: Access) -> HttpResponse:
    run = access.run
    version = run.suite_version
    response = selectors.streamed_report(run)
    filename = f"{slugify(version.suite.name) or 'suite'}-v{version.number}-{str(run.pk)[:8]}.json"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    return response


@login_required
@require_GET
def results_json(request: HttpRequest, run_id) -> HttpResponse:
    return _json(owner(request, run_id))


EXPORTS = {
    # form: (file suffix, content type)
    "junit": ("junit.xml", "application/xml"),
    "csv": ("csv", "text/csv; charset=utf-8"),
    "turns.csv": ("turns.csv", "text/csv; charset=utf-8"),
    "md": ("md", "text/markdown; charset=utf-8"),
}


def _export(request: HttpRequest, access: Access, form: str) -> HttpResponse:
    """The run's results as JUnit XML, CSV (evals, or turns) or a Markdown summary, downloaded."""
    from engine import exports

    from .. import specs

    if form not in EXPORTS:
        raise Http404("no such export")
    run = access.run
    suffix, content_type = EXPORTS[form]
    # The CSVs stream, a chunk of conversations at a time; JUnit and the summary need the whole report.
    if form == "csv":
        response = StreamingHttpResponse(
            exports.evals_csv_lines(selectors.eval_results(run), selectors.grader_columns(run)),
            content_type=content_type,
        )
    elif form == "turns.csv":
        response = StreamingHttpResponse(
            exports.turns_csv_lines(selectors.eval_results(run)), content_type=content_type
        )
    elif form == "junit":
        report = selectors.report(run)
        response = HttpResponse(
            exports.junit_xml(report, specs.suite(run.suite_version).system), content_type=content_type
        )
    else:
        report = selectors.report(run)
        text = exports.markdown_summary(report, run_url=request.build_absolute_uri(access.url("detail")))
        response = HttpResponse(text, content_type=content_type)
    version = run.suite_version
    filename = f"{slugify(version.suite.name) or 'suite'}-v{version.number}-{str(run.pk)[:8]}.{suffix}"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    return response


@login_required
@require_GET
def results_export(request: HttpRequest, run_id, form: str) -> HttpResponse:
    return _export(request, owner(request, run_id), form)


@share_view
def shared_export(request: HttpRequest, token: str, form: str) -> HttpResponse:
    return _export(request, visitor(token), form)


def _share_panel(request: HttpRequest, run: Run, *, created=None) -> HttpResponse:
    if request.htmx:
        context = {
            "run": run,
            "share_links": _share_links(request, run),
            "created": created,
            "share_open": True,
            "share_oob": True,  # the count on the header's Share button follows
        }
        return render(request, "runs/detail.html#share", context)
    return redirect(reverse("runs:detail", args=[run.pk]) + "#share")


@login_required
@require_POST
def share(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id)
    link = services.create_share_link(run, request.user)
    if not request.htmx:
        messages.success(request, "Share link created. Anyone with the link can view this run, read-only.")
    return _share_panel(request, run, created=link.pk)


@login_required
@require_POST
def revoke(request: HttpRequest, run_id, link_id: int) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id)
    link = get_object_or_404(run.share_links, pk=link_id)
    services.revoke_share_link(link)
    if not request.htmx:
        messages.success(request, "Share link revoked. It no longer opens this run.")
    return _share_panel(request, run)


@share_view
def shared_run(request: HttpRequest, token: str) -> HttpResponse:
    return _run_page(request, visitor(token))


@share_view
def shared_progress(request: HttpRequest, token: str) -> HttpResponse:
    return _progress(request, visitor(token))


@share_view
def shared_json(request: HttpRequest, token: str) -> HttpResponse:
    return _json(visitor(token))
