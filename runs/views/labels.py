"""Labels: a reviewer scores conversations, on a transcript page or in the review queue (runs.views.review),
and adds them to a calibration set as samples (docs/calibration.md). Members with the reviewer role or above
label; adding to a set, which saves a new version of it, needs the editor role. Share links are read-only."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from engine.schema import SCALES
from engine.source import SuiteError
from projects.access import needs
from projects.roles import Can
from suites.models import Suite

from .. import reviews, selectors
from ..models import Conversation
from .common import owner


def _levels(scale: str) -> list[str]:
    """The scores a reviewer picks from with the number keys."""
    if scale == "-3..3":
        return [str(n) for n in range(-3, 4)]
    if scale == "0-1":
        return ["0", "1"]
    return [str(n) for n in range(0, 101, 10)]


def label_form(conversation: Conversation, user, scale: str | None = None, *, fixed: bool = False) -> dict:
    """The label card's context. `fixed`: the review queue has chosen the scale, so the card offers no
    other."""
    labels = selectors.labels_of(conversation)  # one query for the reviewer's label and the others'
    mine = next((label for label in labels if label.created_by_id == user.pk), None)
    scale = scale if scale in SCALES else (mine.scale if mine else selectors.DEFAULT_SCALE)
    return {
        "mine": mine if mine is None or mine.scale == scale else None,
        "mine_elsewhere": mine if mine is not None and mine.scale != scale else None,
        "scale": scale,
        "scale_fixed": fixed,
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
    scale = request.POST.get("scale", selectors.DEFAULT_SCALE)
    error = ""
    try:
        score = float(request.POST.get("score", ""))
        reviews.save_label(
            conversation, request.user, score=score, scale=scale, reason=request.POST.get("reason", "")
        )
    except ValueError as exc:  # a missing or non-numeric score, or LabelRefused
        error = str(exc) if isinstance(exc, reviews.LabelRefused) else "choose a score"
    following = request.POST.get("next", "")
    in_queue = following.startswith("/") and not following.startswith("//")
    if in_queue and not error:
        return redirect(following)  # the review queue's next conversation
    if request.htmx:
        context = {"conversation": conversation, "run": access.run, "error": error, "saved": not error,
                   **label_form(conversation, request.user, scale)}  # fmt: skip
        return render(request, "runs/_label.html", context, status=400 if error else 200)
    if error:
        messages.error(request, error)
    if in_queue:  # stay on this conversation of the queue, on its scale
        query = urlencode({"c": conversation.pk, "scale": scale})
        return redirect(f"{reverse('runs:review', args=[access.run.pk])}?{query}")
    return redirect(access.conversation_url(conversation.index, conversation.iteration))


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def added_message(result: reviews.LabelsAdded) -> str:
    """What adding labels to a set did, every conversation accounted for: those added by name, and why each
    of the others was left out."""
    parts = []
    if result.added:
        parts.append(
            f"Added {_plural(len(result.added), 'labelled conversation')} to {result.set_name}"
            f" ({_names(result.added)})"
        )
    if result.present:
        parts.append(f"{len(result.present)} already in the set ({_names(result.present)})")
    for scale, names in result.other_scale.items():
        parts.append(f"{len(names)} labelled on {scale} ({_names(names)}); this set is on {result.set_scale}")
    if not result.added:
        if not parts:
            return f"You have labelled no conversation of this run: none added to {result.set_name}."
        return "; ".join(parts) + f": none added to {result.set_name}."
    return "; ".join(parts) + "."


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
        result = reviews.add_labels_to_set(access.run, request.user, target)
    except reviews.LabelRefused as exc:
        messages.error(request, str(exc))
    except SuiteError as exc:  # the set with these samples would not load: say why, change nothing
        messages.error(request, f"{target.name} would not load with these samples: {exc.problems[0]}")
    else:
        (messages.success if result.added else messages.warning)(request, added_message(result))
    return redirect(reverse("runs:review", args=[access.run.pk]))
