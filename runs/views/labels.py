"""Labels: a reviewer scores conversations, on a transcript page or in a keyboard-driven review queue, and
adds them to a calibration set as samples (docs/calibration.md). Members with the reviewer role or above: share links are read-only."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from engine.schema import SCALES
from engine.source import SuiteError
from projects.access import needs
from projects.roles import Can
from suites.models import Suite

from .. import selectors, services
from ..models import Conversation
from .common import owner

DEFAULT_SCALE = "-3..3"  # calibrate's own scale


def _levels(scale: str) -> list[str]:
    """The scores a reviewer picks from with the number keys."""
    if scale == "-3..3":
        return [str(n) for n in range(-3, 4)]
    if scale == "0-1":
        return ["0", "1"]
    return [str(n) for n in range(0, 101, 10)]


def label_form(conversation: Conversation, user, scale: str | None = None) -> dict:
    labels = selectors.labels_of(conversation)  # one query for the reviewer's label and the others'
    mine = next((label for label in labels if label.created_by_id == user.pk), None)
    scale = scale if scale in SCALES else (mine.scale if mine else DEFAULT_SCALE)
    return {
        "mine": mine,
        "scale": scale,
        "scales": list(SCALES),
        "levels": _levels(scale),
        "others": [label for label in labels if label.created_by_id != user.pk],
    }


@needs(Can.LABEL)
@login_required
@require_POST
def label(request: HttpRequest, run_id, index: int) -> HttpResponse:
    access = owner(request, run_id, Can.LABEL)
    iteration = request.POST.get("iteration", "0")
    conversation = selectors.get_conversation(access.run, index, int(iteration) if iteration.isdigit() else 0)
    scale = request.POST.get("scale", DEFAULT_SCALE)
    error = ""
    try:
        score = float(request.POST.get("score", ""))
        services.save_label(
            conversation, request.user, score=score, scale=scale, reason=request.POST.get("reason", "")
        )
    except ValueError as exc:  # a missing or non-numeric score, or LabelRefused
        error = str(exc) if isinstance(exc, services.LabelRefused) else "choose a score"
    following = request.POST.get("next", "")
    if following.startswith("/") and not following.startswith("//") and not error:
        return redirect(following)  # the review queue's next conversation
    if request.htmx:
        context = {"conversation": conversation, "run": access.run, "error": error, "saved": not error,
                   **label_form(conversation, request.user, scale)}  # fmt: skip
        return render(request, "runs/_label.html", context, status=400 if error else 200)
    if error:
        messages.error(request, error)
    return redirect(access.conversation_url(conversation.index, conversation.iteration))


@needs(Can.LABEL)
@login_required
@require_GET
def review(request: HttpRequest, run_id) -> HttpResponse:
    access = owner(request, run_id, Can.LABEL)
    run = access.run
    queue = selectors.review_queue(run, request.user)
    if not queue:
        return render(request, "runs/review.html", {"run": run, "empty": True})
    ids = [pk for pk, _ in queue]
    wanted = request.GET.get("c", "")
    if wanted.isdigit() and int(wanted) in ids:
        position = ids.index(int(wanted))
    else:  # the first conversation this reviewer has not labelled, else the first
        position = next((n for n, (_, done) in enumerate(queue) if not done), 0)
    conversation = run.conversations.get(pk=ids[position])
    base = reverse("runs:review", args=[run.pk])

    def at(n: int) -> str | None:
        return f"{base}?c={ids[n]}" if 0 <= n < len(ids) else None

    unlabelled_after = next((n for n in range(position + 1, len(ids)) if not queue[n][1]), None)
    context = {
        "run": run,
        "conversation": conversation,
        "bubbles": services.conversation_messages(conversation),  # not "messages": the flash messages
        "position": position + 1,
        "total": len(ids),
        "labelled": sum(done for _, done in queue),
        "prev_url": at(position - 1),
        "next_url": at(position + 1),
        # After a save the queue moves on to the next conversation still to label (or the next one).
        "after_save": at(unlabelled_after)
        if unlabelled_after is not None
        else at(position + 1) or f"{base}?c={ids[position]}",
        "inter_rater": selectors.inter_rater(run),
        "sets": selectors.calibration_sets_in(run.project_id),
        **label_form(conversation, request.user, request.GET.get("scale") or None),
    }
    return render(request, "runs/review.html", context)


@needs(Can.EDIT)
@login_required
@require_POST
def add_to_set(request: HttpRequest, run_id) -> HttpResponse:
    access = owner(request, run_id, Can.EDIT)
    target = Suite.objects.filter(
        project_id=access.run.project_id, public_id=request.POST.get("set", "")
    ).first()
    if target is None:
        raise Http404("no such calibration set")
    try:
        added, skipped = services.add_labels_to_set(access.run, request.user, target)
    except services.LabelRefused as exc:
        messages.error(request, str(exc))
    except SuiteError as exc:  # the set with these samples would not load: say why, change nothing
        messages.error(request, f"{target.name} would not load with these samples: {exc.problems[0]}")
    else:
        note = f"; {skipped} already there or on another scale" if skipped else ""
        messages.success(
            request, f"Added {added} labelled conversation{'s' if added != 1 else ''} to {target.name}{note}."
        )
    return redirect(reverse("runs:review", args=[access.run.pk]))
