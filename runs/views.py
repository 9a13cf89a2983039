"""Run pages: the runs list, a run's live progress and gates, conversation transcripts (given history, live
turns, per-turn grades, the conversation as text), and their shared read-only twins.

The owner's pages and the share-link pages are the same views and templates; `Access` says who is looking
and builds the links, so a shared page never links to anything that needs a login.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh, HttpResponseStopPolling

from engine.results import TurnRecord
from engine.text import plural
from suites.models import Suite

from . import display, selectors, services
from .models import ACTIVE, Conversation, Run, Status, Turn

RUNS_PER_PAGE = 50
# The owner's URL names and their share-link twins; the share URLs take the token instead of the run id.
SHARE_NAMES = {"detail": "run"}


def format_duration(elapsed: timedelta | None) -> str:
    if elapsed is None:
        return ""
    seconds = max(elapsed.total_seconds(), 0.0)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def with_durations(runs) -> list[Run]:
    runs = list(runs)
    for run in runs:
        run.duration = format_duration(run.elapsed)
    return runs


@dataclass(frozen=True)
class Access:
    """Who is looking at a run: its owner (every control) or a share-link visitor (read-only)."""

    run: Run
    token: str | None = None

    @property
    def shared(self) -> bool:
        return self.token is not None

    def url(self, name: str, *args, query: dict | None = None) -> str:
        if self.shared:
            path = reverse(f"share:{SHARE_NAMES.get(name, name)}", args=[self.token, *args])
        else:
            path = reverse(f"runs:{name}", args=[self.run.pk, *args])
        query = {key: value for key, value in (query or {}).items() if value not in (None, "")}
        return f"{path}?{urlencode(query)}" if query else path

    def conversation_url(self, index: int, iteration: int = 0) -> str:
        return self.url("conversation", index, query={"iteration": iteration or None})


def _owner(request: HttpRequest, run_id) -> Access:
    return Access(selectors.get_run_for_user(request.user, run_id))


def _visitor(token: str) -> Access:
    run, _link = selectors.get_shared_run(token)
    return Access(run, token=token)


# --- Runs list ----------------------------------------------------------------------------------------------

LIST_FILTERS = {
    "": ("All", None),
    "active": ("Active", Q(status__in=ACTIVE)),
    "passed": ("Passed", Q(status=Status.PASSED)),
    "failed": ("Failed", Q(status=Status.FAILED)),
    "error": ("Error", Q(status=Status.ERROR)),
    "cancelled": ("Cancelled", Q(status=Status.CANCELLED)),
}


def _suite_filter(request: HttpRequest) -> tuple[Suite | None, bool]:
    """The suite named by ?suite=<public_id>, if it is the user's; and whether one was asked for at all."""
    value = request.GET.get("suite", "")
    if not value:
        return None, False
    try:
        public_id = uuid.UUID(value)
    except ValueError:
        return None, True
    return Suite.objects.filter(owner=request.user, public_id=public_id).only(
        "public_id", "name"
    ).first(), True


def _list_url(suite: Suite | None, status: str) -> str:
    query = {"suite": suite.public_id if suite else None, "status": status or None}
    query = {key: value for key, value in query.items() if value}
    return reverse("runs:list") + (f"?{urlencode(query)}" if query else "")


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    current = request.GET.get("status", "")
    if current not in LIST_FILTERS:
        current = ""
    suite, suite_asked = _suite_filter(request)
    runs = selectors.runs_for(request.user).order_by("-created_at")
    condition = LIST_FILTERS[current][1]
    if condition is not None:
        runs = runs.filter(condition)
    if suite is not None:
        runs = runs.filter(suite_version__suite=suite)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = with_durations(selectors.with_counts(page.object_list))
    context = {
        "page": page,
        "runs": page.object_list,
        "any_active": any(run.is_active or run.in_flight_count for run in page.object_list),
        "filters": [(key, label, _list_url(suite, key)) for key, (label, _) in LIST_FILTERS.items()],
        "current": current,
        "suite": suite,
        "suite_unknown": suite_asked and suite is None,
        "every_suite_url": _list_url(None, current),
    }
    if request.htmx:
        return render(request, "runs/list.html#table", context)
    return render(request, "runs/list.html", context)


# --- A run --------------------------------------------------------------------------------------------------


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
        conversation.strip = display.strip(conversation, display.turn_marks(graded.get(conversation.pk, ())))
        conversation.waiting = _waiting(conversation, now)
    gates = display.gates(selectors.gate_results(run, conversations))
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
        "fingerprint": fingerprint,
        "conversations": shown,
        "conversation_total": len(conversations),
        "show_iterations": bool(iterated),
        "show_judge": any(c.judge_tokens for c in conversations),
        "show_user": any(c.user_tokens for c in conversations),
        "iterated": shown_iterated,
        "iterated_total": len(iterated),
        "flaky_count": sum(row.flaky for row in iterated),
        "flaky_only": flaky_only,
        "gates": gates,
        "gates_failed": sum(not gate["passed"] for gate in gates),
        "strip_max": display.STRIP_MAX_MARKS,
        "elapsed": format_duration(run.elapsed),
        "urls": {
            "run": access.url("detail"),
            "all_evals": access.url("detail"),
            "flaky_only": access.url("detail", query={"flaky": 1}),
            "progress": access.url("progress", query={"fp": fingerprint, "flaky": 1 if flaky_only else None}),
            "json": access.url("json"),
            # A run of a calibration set has a page of figures: how far each judge agrees with the labels.
            "calibration": access.url("calibration") if selectors.calibration_suite(run) else None,
        },
    }
    if not access.shared:
        context["share_links"] = _share_links(request, run)
    return context


def _waiting(conversation: Conversation, now) -> dict | None:
    if conversation.status != Status.RUNNING:
        return None
    return display.waiting(conversation.waiting_reason, conversation.waiting_until, now)


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
    return _run_page(request, _owner(request, run_id))


@login_required
@require_GET
def progress(request: HttpRequest, run_id) -> HttpResponse:
    return _progress(request, _owner(request, run_id))


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
    return _json(_owner(request, run_id))


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


# --- A conversation -----------------------------------------------------------------------------------------


def _iteration(request: HttpRequest) -> int:
    value = request.GET.get("iteration", "0") or "0"
    if not value.isdigit():
        raise Http404("no such iteration")
    return int(value)


def _verdict(conversation: Conversation) -> dict:
    """The headline of a transcript: tone (a status colour) and text. How a simulated conversation ended
    is not in it: the transcript says that on a line of its own."""
    status = conversation.status
    verdict = conversation.reason or conversation.verdict
    if status == Status.PASSED:
        text = verdict or f"passed on turn {conversation.passed_on_turn}"
    elif status == Status.FAILED:
        text = verdict or f"failed after {plural(conversation.turn_count, 'turn')}"
    elif status == Status.ERROR:
        text = f"Error: {conversation.error or verdict or 'unknown error'}"
    elif status == Status.CANCELLED:
        text = verdict or "cancelled"
    elif status == Status.RUNNING:
        turns = conversation.turn_count
        text = (
            f"Running — {plural(turns, 'turn')} so far" if turns else "Running — waiting for the first reply"
        )
    else:
        text = "Queued — waiting for a worker"
    return {"tone": status, "text": text[:1].upper() + text[1:]}


def _neighbours(access: Access, conversation: Conversation) -> dict:
    keys = selectors.conversation_keys(access.run)
    here = keys.index((conversation.index, conversation.iteration))
    previous = keys[here - 1] if here > 0 else None
    following = keys[here + 1] if here + 1 < len(keys) else None
    return {
        "position": here + 1,
        "count": len(keys),
        "previous": access.conversation_url(*previous) if previous else None,
        "next": access.conversation_url(*following) if following else None,
        "iterations": sum(index == conversation.index for index, _ in keys),
    }


def _iterations(access: Access, conversation: Conversation, count: int) -> dict | None:
    """The switcher between an eval's iterations, when it ran more than once (one more query)."""
    if count < 2:
        return None
    siblings = selectors.iterations_of(access.run, conversation.index)
    return display.iteration_switcher(
        siblings,
        selectors.iterated_so_far(access.run, siblings),
        conversation.iteration,
        access.conversation_url,
    )


def _stored_turns(conversation: Conversation) -> tuple[list[Turn], list[TurnRecord]]:
    rows = selectors.turns(conversation)
    return rows, [TurnRecord.model_validate(row.record) for row in rows]


def _live_context(
    access: Access, conversation: Conversation, records: list[Turn], turns: list[TurnRecord], after: int = 0
) -> dict:
    """What the polled part of a transcript needs: the verdict and ✓✗ strip, the totals, the conversation
    as text, and where to poll next. `records` and `turns`: every turn stored so far."""
    active = conversation.status in ACTIVE
    after = turns[-1].turn if turns else after
    return {
        "run": access.run,
        "conversation": conversation,
        "shared": access.shared,
        "verdict": _verdict(conversation),  # "Passed after 4 turns", over "Ended: condition met: …"
        "waiting": _waiting(conversation, timezone.now()),
        "strip": display.strip(conversation, display.turn_marks(records)),
        "ending": display.ending(conversation, turns),
        "spend": display.spend(turns),
        "text": display.transcript_text(conversation.history, turns),
        "active": active,
        "estimated": conversation.tokens_estimated or any(turn.usage.estimated for turn in turns),
        "poll_url": access.url(
            "conversation_poll",
            conversation.index,
            query={
                "iteration": conversation.iteration or None,
                "after": after,
                "status": conversation.status,
                "waiting": _wait_mark(conversation),
            },
        ),
    }


def _wait_mark(conversation: Conversation) -> str:
    """Changes with each wait noted on the conversation, so the transcript's poll shows a new one."""
    until = conversation.waiting_until
    return str(int(until.timestamp() * 1000)) if until and conversation.status == Status.RUNNING else ""


def _conversation_page(request: HttpRequest, access: Access, index: int) -> HttpResponse:
    run = access.run
    conversation = selectors.get_conversation(run, index, _iteration(request))
    records, turns = _stored_turns(conversation)
    nav = _neighbours(access, conversation)
    context = {
        **_live_context(access, conversation, records, turns),
        "turns": turns,
        "given": display.given_history(conversation.history),
        "system": display.system_message(conversation),
        "style_label": display.STYLE_LABELS.get(conversation.style, conversation.style),
        "nav": nav,
        "iterations": _iterations(access, conversation, nav["iterations"]),
        "urls": {"run": access.url("detail"), "iterations": access.url("detail") + f"#iter-{index}"},
    }
    return render(request, "runs/conversation.html", context)


def _conversation_poll(request: HttpRequest, access: Access, index: int) -> HttpResponse:
    """New turns since `after`, to append, with the verdict, strip and text swapped out of band."""
    conversation = selectors.get_conversation(access.run, index, _iteration(request))
    after = request.GET.get("after", "0")
    after = int(after) if after.isdigit() else 0
    active = conversation.status in ACTIVE
    if (
        active
        and request.GET.get("status") == conversation.status
        and request.GET.get("waiting", "") == _wait_mark(conversation)
        and not selectors.has_turns_after(conversation, after)
    ):
        return HttpResponse(status=204)
    records, turns = _stored_turns(conversation)
    context = {
        **_live_context(access, conversation, records, turns, after),
        "turns": [turn for turn in turns if turn.turn > after],  # appended below the ones already shown
        "oob": True,
    }
    if active:
        return render(request, "runs/conversation.html#poll", context)
    return HttpResponseStopPolling(render_to_string("runs/conversation.html#poll", context, request))


@login_required
@require_GET
def conversation(request: HttpRequest, run_id, index: int) -> HttpResponse:
    return _conversation_page(request, _owner(request, run_id), index)


@login_required
@require_GET
def conversation_poll(request: HttpRequest, run_id, index: int) -> HttpResponse:
    return _conversation_poll(request, _owner(request, run_id), index)


# --- Shared, read-only: no login, looked up by an active share token ------------------------------------------


def share_view(view):
    """A share-link page: a revoked or unknown token gets a page that says so (still a 404), and a page
    polling through a link revoked meanwhile reloads to show it. No cache, shared or local, keeps a copy:
    revoking the link must end access, including through a proxy's or browser's cache."""

    @wraps(view)
    def wrapper(request: HttpRequest, token: str, *args, **kwargs) -> HttpResponse:
        try:
            response = view(request, token, *args, **kwargs)
        except selectors.ShareLinkGone:
            if request.htmx:
                response = HttpResponseClientRefresh()
            else:
                response = render(request, "runs/share_gone.html", status=404)
        patch_cache_control(response, private=True, no_store=True)
        return response

    return require_GET(wrapper)


@share_view
def shared_run(request: HttpRequest, token: str) -> HttpResponse:
    return _run_page(request, _visitor(token))


@share_view
def shared_progress(request: HttpRequest, token: str) -> HttpResponse:
    return _progress(request, _visitor(token))


@share_view
def shared_json(request: HttpRequest, token: str) -> HttpResponse:
    return _json(_visitor(token))


@share_view
def shared_conversation(request: HttpRequest, token: str, index: int) -> HttpResponse:
    return _conversation_page(request, _visitor(token), index)


@share_view
def shared_conversation_poll(request: HttpRequest, token: str, index: int) -> HttpResponse:
    return _conversation_poll(request, _visitor(token), index)
