"""A run's page: live progress, gates, repeated evals' statistics, cancel, retry, share links, results.json,
and its shared read-only twin."""

from __future__ import annotations

import hashlib

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh, HttpResponseStopPolling

from engine.results import grader_names as names_of_graders
from engine.text import plural

from .. import display, selectors, services
from ..models import Run, Status
from .common import Access, format_duration, owner, share_view, visitor, waiting


def _fingerprint(run: Run, progress: dict) -> str:
    """Changes whenever anything the progress partial or the conversation table shows changes."""
    counts = ",".join(f"{key}={value}" for key, value in sorted(progress["counts"].items()))
    waiting = progress["waiting"]
    state = (
        f"{run.status}|{counts}|{progress['turns']}|{progress['prompt_tokens']}|{progress['completion_tokens']}|"
        f"{progress['judge_tokens']}|{progress['cost']:.8f}|{waiting['count']}|{waiting['until']}"
    )
    return hashlib.blake2s(state.encode(), digest_size=8).hexdigest()


BAR_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.RUNNING)
COUNT_ORDER = (Status.PASSED, Status.FAILED, Status.ERROR, Status.RUNNING, Status.QUEUED, Status.CANCELLED)


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


def _run_context(request: HttpRequest, access: Access, *, progress: dict | None = None) -> dict:
    run = access.run
    progress = progress if progress is not None else selectors.progress(run)
    fingerprint = _fingerprint(run, progress)
    conversations = selectors.conversations(run)
    # Simulated users' tokens change only with a stored turn, which the fingerprint already follows.
    progress = {"user_tokens": sum(c.user_tokens for c in conversations), **progress}
    graded = selectors.graded_turns(run, display.GRADED_STYLES) if display.wants_strips(conversations) else {}
    now = timezone.now()
    for conversation in conversations:
        conversation.url = access.conversation_url(conversation.index, conversation.iteration)
        conversation.strip = display.strip(
            conversation,
            display.turn_marks(graded.get(conversation.pk, ()), conversation.original.get("reviewed_turns")),
        )
        conversation.waiting = waiting(conversation, now)
    gates = display.gates(selectors.gate_results(run, conversations))
    grader_names = names_of_graders(conversations)
    for conversation in conversations:
        conversation.grader_cells = display.grader_cells(conversation, grader_names)
    iterated = display.iterated_rows(
        conversations, selectors.iterated_so_far(run, conversations), access.conversation_url
    )
    flaky_only = request.GET.get("flaky") == "1" and bool(iterated)
    shown_iterated, shown = iterated, conversations
    if flaky_only:
        flaky = {row.index for row in iterated if row.flaky}
        shown_iterated = [row for row in iterated if row.flaky]
        shown = [conversation for conversation in conversations if conversation.index in flaky]
    sizes = {row.index: row.total for row in iterated}
    for conversation in shown:
        conversation.iterations = sizes.get(conversation.index, 1)
    triage = _triage(request, run, shown)
    shown = triage["page"].object_list
    context = {
        "run": run,
        "shared": access.shared,
        "live": _live(run, progress),
        "state": display.run_state(run, progress, gates, display.eval_statuses(conversations, iterated)),
        "progress": progress,
        "waiting": display.waiting(
            progress["waiting"]["reason"],
            progress["waiting"]["until"],
            now,
            count=progress["waiting"]["count"],
        ),
        "can_retry": not run.is_active
        and run.status != Status.CANCELLED
        and progress["counts"][Status.ERROR] > 0,
        "segments": _segments(progress),
        "status_counts": [(status.value, progress["counts"][status]) for status in COUNT_ORDER],
        # Counted apart: a reviewer's verdicts are in the counts above, and how many there are is said here.
        "overridden_count": sum(1 for conversation in conversations if conversation.original),
        "fingerprint": fingerprint,
        "conversations": shown,
        "triage": triage,
        "conversation_total": len(conversations),
        "show_iterations": bool(iterated),
        "show_judge": any(c.judge_tokens for c in conversations),
        "show_user": any(c.user_tokens for c in conversations),
        "iterated": shown_iterated,
        "iterated_total": len(iterated),
        "flaky_count": sum(row.flaky for row in iterated),
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
                "progress", query={"fp": fingerprint, "flaky": 1 if flaky_only else None, **triage["query"]}
            ),
            "json": access.url("json"),
            "exports": [
                ("JUnit XML", access.url("export", "junit")),
                ("CSV, evals", access.url("export", "csv")),
                ("CSV, turns", access.url("export", "turns.csv")),
                ("Markdown summary", access.url("export", "md")),
            ],
            # A run of a calibration set has a page of figures: how far each judge agrees with the labels.
            "calibration": access.url("calibration") if selectors.calibration_suite(run) else None,
        },
    }
    if not access.shared:
        context["share_links"] = _share_links(request, run)
        baseline = selectors.pinned_baseline(run)
        context["baseline"] = baseline if baseline is not None and baseline.pk != run.pk else None
        context["versions"] = list(
            run.suite_version.suite.versions.order_by("-number").values_list("number", flat=True)
        )
    return context


CONVERSATIONS_PER_PAGE = 100
SORTS = {
    "": ("suite order", lambda c: (c.index, c.iteration)),
    "score": ("score, lowest first", lambda c: (c.score is None, c.score or 0.0, c.index, c.iteration)),
    "-score": ("score, highest first", lambda c: (c.score is None, -(c.score or 0.0), c.index, c.iteration)),
    "turns": ("most turns", lambda c: (-c.turn_count, c.index, c.iteration)),
    "tokens": ("most tokens", lambda c: (-c.total_tokens, c.index, c.iteration)),
    "cost": ("highest cost", lambda c: (-c.cost, c.index, c.iteration)),
}
TRIAGE_KEYS = ("status", "kind", "tag", "iteration", "q", "sort")


OVERRIDDEN = "overridden"  # the status filter's extra choice: conversations a reviewer overrode


def _triage(request: HttpRequest, run: Run, conversations: list) -> dict:
    """The conversation table's filters (status, kind, tag, iteration, a search over prompts and replies), its
    sort and its page, all from the URL, so a filtered view can be shared and reloaded."""
    wanted = {key: request.GET.get(key, "").strip()[:200] for key in TRIAGE_KEYS}
    tags = selectors.eval_tags(run)
    shown = conversations
    if wanted["status"] == OVERRIDDEN:
        shown = [c for c in shown if c.original]
    elif wanted["status"]:
        shown = [c for c in shown if c.status == wanted["status"]]
    if wanted["kind"]:
        shown = [c for c in shown if c.style == wanted["kind"]]
    if wanted["tag"]:
        shown = [c for c in shown if wanted["tag"] in tags.get(c.index, ())]
    if wanted["iteration"].isdigit():
        shown = [c for c in shown if c.iteration == int(wanted["iteration"]) - 1]
    if wanted["q"]:
        found = selectors.conversations_saying(run, wanted["q"])
        shown = [c for c in shown if c.pk in found]
    sort = wanted["sort"] if wanted["sort"] in SORTS else ""
    shown = sorted(shown, key=SORTS[sort][1])
    page = Paginator(shown, CONVERSATIONS_PER_PAGE).get_page(request.GET.get("page"))
    query = {key: value for key, value in wanted.items() if value}
    return {
        "page": page,
        "wanted": wanted,
        "query": query,
        "active": bool(query),
        "matched": len(shown),
        "statuses": [*(status.value for status in Status), OVERRIDDEN],
        "kinds": sorted({c.style for c in conversations if c.style}),
        "tags": sorted({tag for values in tags.values() for tag in values}),
        "iterations": max((getattr(c, "iterations", 1) for c in conversations), default=1),
        "sorts": [(key, label) for key, (label, _) in SORTS.items()],
    }


def _share_links(request: HttpRequest, run: Run) -> list:
    links = selectors.active_share_links(run)
    for link in links:
        link.url = request.build_absolute_uri(reverse("share:run", args=[link.token]))
    return links


def _run_page(request: HttpRequest, access: Access) -> HttpResponse:
    return render(request, "runs/detail.html", _run_context(request, access))


def _live(run: Run, progress: dict) -> bool:
    """Whether the page keeps polling: while the run is active, and after a cancel until the conversations
    still talking to the model have finished their turn."""
    return run.is_active or display.in_flight(progress) > 0


def _progress(request: HttpRequest, access: Access) -> HttpResponse:
    run = access.run
    progress = selectors.progress(run)
    live = _live(run, progress)
    if live and request.GET.get("fp") == _fingerprint(run, progress):
        return HttpResponse(status=204)  # nothing changed: htmx keeps what it shows and polls again
    context = _run_context(request, access, progress=progress)
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
    response = JsonResponse(selectors.report(run).model_dump(mode="json"), json_dumps_params={"indent": 2})
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
    report = selectors.report(run)
    if form == "junit":
        text = exports.junit_xml(report, specs.suite(run.suite_version).system)
    elif form == "csv":
        text = exports.evals_csv(report)
    elif form == "turns.csv":
        text = exports.turns_csv(report)
    else:
        text = exports.markdown_summary(report, run_url=request.build_absolute_uri(access.url("detail")))
    suffix, content_type = EXPORTS[form]
    version = run.suite_version
    response = HttpResponse(text, content_type=content_type)
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
