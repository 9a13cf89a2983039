"""Comparing two runs: the eval-by-eval table (regressions first) and one eval's two conversations side by
side, turn by turn; pinning a run as its suite's baseline, which the compare page shows by default.

The comparison itself is engine.compare; these views fetch two runs' summaries (one query each, no turns)
or two conversations' turns, and format.
"""

from __future__ import annotations

import difflib
import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from engine import compare
from projects.access import needs
from projects.roles import Can
from suites import selectors as suite_selectors

from .. import selectors, services
from ..matrix import label_of
from ..models import Run

ROWS_PER_PAGE = 100

CHANGE_LABELS = {
    compare.Change.REGRESSION: "regressed",
    compare.Change.FIX: "fixed",
    compare.Change.STILL_FAILING: "still failing",
    compare.Change.UNCHANGED: "unchanged",
    compare.Change.ADDED: "new",
    compare.Change.REMOVED: "removed",
    compare.Change.INCOMPLETE: "incomplete",
}


def _run_label(run: Run) -> str:
    """The suite, its version and the model; a matrix variant's name instead of the model, as two variants of
    one model (temperature 0 and 0.7) differ only by it."""
    return f"{run.suite_version.suite.name} v{run.suite_version.number} · {label_of(run)}"


@needs(Can.VIEW)
@login_required
@require_GET
def compare_runs(request: HttpRequest, run_id, other_id=None) -> HttpResponse:
    """This run (after) against another (before): `other_id`, else its suite's pinned baseline, else a choice."""
    run = selectors.get_run_for_user(request.user, run_id)
    if other_id is None:
        baseline = selectors.pinned_baseline(run)
        if baseline is not None and baseline.pk != run.pk:
            return redirect("runs:compare_with", run.pk, baseline.pk)
        return render(
            request,
            "runs/compare_choose.html",
            {"section": "runs", "run": run, "candidates": selectors.comparable_runs(run)},
        )
    before = selectors.get_run_for_user(request.user, other_id)
    result = compare.compare_runs(selectors.summaries(before), selectors.summaries(run))
    shown = request.GET.get("change", "")
    rows = [row for row in result.rows if not shown or row.change == shown]
    # Regressions come first; past a page, the rest is paged rather than rendered at once.
    page = Paginator(rows, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    # A run on an endpoint without prices spent an amount nobody knows: no difference can be told.
    costs_known = not (before.unpriced or run.unpriced)
    context = {
        "section": "runs",
        "run": run,
        "before": before,
        "run_label": _run_label(run),
        "before_label": _run_label(before),
        "result": result,
        "rows": [_row(row, costs_known) for row in page.object_list],
        "page": page,
        "shown": shown,
        "tabs": _tabs(result, shown),
        "candidates": selectors.comparable_runs(run, limit=10),
        "is_pinned_baseline": before.pinned_at is not None,
        "score_delta_text": _signed(result.score_delta, 3),
        "cost_delta_text": _signed(result.cost_delta, 4) if costs_known else "unknown",
    }
    return render(request, "runs/compare.html", context)


def _signed(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def _row(row: compare.EvalDiff, costs_known: bool = True) -> dict:
    return {
        "sides": [row.before, row.after],
        "score_delta_text": _signed(row.score_delta, 2),
        "cost_delta_text": _signed(row.cost_delta, 4) if row.cost_delta is not None and costs_known else "",
        "id": row.id,
        "prompt": row.prompt,
        "change": str(row.change),
        "change_label": CHANGE_LABELS[row.change],
        "before": row.before,
        "after": row.after,
        "score_delta": row.score_delta,
        "cost_delta": row.cost_delta,
        "iterated": row.iterated,
        "rates_differ": row.rates_differ,
        "openable": row.before is not None and row.after is not None,
        "tool_change": row.tool_change,
    }


def _tabs(result: compare.Comparison, shown: str) -> list[dict]:
    tabs = [{"key": "", "label": "All", "count": len(result.rows)}]
    tabs += [
        {"key": str(change), "label": CHANGE_LABELS[change], "count": count}
        for change, count in result.counts.items()
        if count
    ]
    for tab in tabs:
        tab["current"] = tab["key"] == shown
    return tabs


@needs(Can.VIEW)
@login_required
@require_GET
def compare_eval(request: HttpRequest, run_id, other_id, eval_id: str) -> HttpResponse:
    """One eval's conversation in both runs, turn by turn. Iterated evals: `?iteration=N` in both."""
    run = selectors.get_run_for_user(request.user, run_id)
    before_run = selectors.get_run_for_user(request.user, other_id)
    try:
        iteration = max(0, int(request.GET.get("iteration", 0)))
    except ValueError:
        iteration = 0
    after_conversation = selectors.conversation_by_eval(run, eval_id, iteration)
    before_conversation = selectors.conversation_by_eval(before_run, eval_id, iteration)
    if after_conversation is None or before_conversation is None:
        raise Http404("that eval is not in both runs")
    before = selectors.eval_result(before_conversation)
    after = selectors.eval_result(after_conversation)
    view = compare.side_by_side(before, after)
    context = {
        "section": "runs",
        "run": run,
        "before_run": before_run,
        "run_label": _run_label(run),
        "before_label": _run_label(before_run),
        "eval_id": eval_id,
        "before": before,
        "after": after,
        "pairs": [_pair(pair) for pair in view.pairs],
        "diverged_at": view.diverged_at,
        "iteration": iteration,
        "back": reverse("runs:compare_with", args=[run.pk, before_run.pk]),
    }
    return render(request, "runs/compare_eval.html", context)


def _pair(pair: compare.TurnPair) -> dict:
    before, after = pair.before, pair.after
    return {
        "sides": [before, after],
        "turn": pair.turn,
        "before": before,
        "after": after,
        "only": pair.only,
        "prompt_changed": pair.prompt_changed,
        "reply_changed": pair.reply_changed,
        "branch_changed": pair.branch_changed,
        "flips": pair.flips,
        "calls": [_call_pair(call) for call in pair.calls],
        "tools_changed": pair.tools_changed,
        "diff": _word_diff(before.response, after.response)
        if before and after and pair.reply_changed
        else None,
    }


def _call_pair(pair: compare.CallPair) -> dict:
    """Two facing tool calls as the side-by-side shows them: each side's name, arguments and result on one
    line, and what differs."""
    return {
        "sides": [_call_line(pair.before), _call_line(pair.after)],
        "only": pair.only,
        "arguments_changed": pair.arguments_changed,
        "result_changed": pair.result_changed,
    }


def _call_line(call) -> dict | None:
    if call is None:
        return None
    arguments = (
        json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        if call.arguments is not None
        else call.raw_arguments
    )
    return {"name": call.name, "arguments": arguments, "result": call.result, "error": call.error}


def _word_diff(before: str, after: str, limit: int = 20_000) -> list[tuple[str, str]] | None:
    """The after-reply as (kind, text) segments, kind "same", "ins" or "del", word by word; the template
    escapes each text. None for replies too long to diff in a page's time."""
    if len(before) + len(after) > limit:
        return None
    a, b = before.split(" "), after.split(" ")
    segments: list[tuple[str, str]] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            segments.append(("same", " ".join(b[b1:b2])))
        if op in ("delete", "replace"):
            segments.append(("del", " ".join(a[a1:a2])))
        if op in ("insert", "replace"):
            segments.append(("ins", " ".join(b[b1:b2])))
    return segments


@needs(Can.EDIT)
@login_required
@require_POST
def pin(request: HttpRequest, run_id) -> HttpResponse:
    run = selectors.get_run_for_user(request.user, run_id, Can.EDIT)
    if request.POST.get("unpin"):
        services.unpin_baseline(run, by=request.user)
        messages.success(request, "This run is no longer its suite's baseline.")
    else:
        services.pin_baseline(run, by=request.user)
        messages.success(
            request, "Pinned as the baseline of its suite: other runs compare with it by default."
        )
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("runs:detail", args=[run.pk])
    return redirect(back)


@needs(Can.EDIT)
@login_required
@require_POST
def regrade(request: HttpRequest, run_id) -> HttpResponse:
    """Grade this run's stored conversations again under a version of its suite (`version`, default the
    latest), calling no model but judges: a new run, linked to this one."""
    run = selectors.get_run_for_user(request.user, run_id, Can.EDIT)
    suite = run.suite_version.suite
    number = request.POST.get("version") or ""
    version = suite_selectors.version_of(suite, int(number) if number.isdigit() else None)
    if version is None:
        raise Http404("no such version")
    try:
        new = services.regrade(run, version=version, user=request.user)
    except services.RegradeRefused as exc:
        messages.error(request, str(exc))
        return redirect("runs:detail", run.pk)
    except services.LaunchError as exc:
        messages.error(request, f"Could not re-grade: {exc}")
        return redirect("runs:detail", run.pk)
    messages.success(request, f"Re-grading under v{version.number}: no model is called but judges.")
    return redirect("runs:detail", new.pk)
