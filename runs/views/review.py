"""The review queue: a reviewer walks a run's conversations on one scale, fixed for the whole queue, and the
team sees who is asked to label, how far each has got, each one's labels and how far they agree."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from projects.access import needs, role_of
from projects.roles import Can, allows

from .. import reviews, selectors
from .common import owner
from .labels import label_form


def _labels_shown(request: HttpRequest, run, people: list[dict]) -> dict | None:
    """The reviewer whose labels are listed: the one asked for with ?by=, else the viewer."""
    wanted = request.GET.get("by", "")
    person = next((p for p in people if str(p["id"]) == wanted), None)
    person = person or next((p for p in people if p["id"] == request.user.pk), None)
    if person is None:
        return None
    return {
        **person,
        "mine": person["id"] == request.user.pk,
        "labels": selectors.labels_by(run, person["id"]),
    }


@login_required
@require_GET
@needs(Can.LABEL)
def review(request: HttpRequest, run_id) -> HttpResponse:
    access = owner(request, run_id, Can.LABEL)
    run = access.run
    queue = selectors.review_queue(run, request.user)
    if not queue:
        return render(request, "runs/review.html", {"run": run, "empty": True})
    scale, fixed = selectors.queue_scale(run, request.user, request.GET.get("scale"))
    ids = [pk for pk, _ in queue]
    wanted = request.GET.get("c", "")
    if wanted.isdigit() and int(wanted) in ids:
        position = ids.index(int(wanted))
    else:  # the first conversation this reviewer has not labelled, else the first
        position = next((n for n, (_, done) in enumerate(queue) if not done), 0)
    conversation = run.conversations.get(pk=ids[position])
    base = reverse("runs:review", args=[run.pk])

    def at(n: int) -> str | None:
        # Every link of the queue carries its scale: the next conversation is labelled on the same one.
        return f"{base}?{urlencode({'c': ids[n], 'scale': scale})}" if 0 <= n < len(ids) else None

    unlabelled_after = next((n for n in range(position + 1, len(ids)) if not queue[n][1]), None)
    people = selectors.reviewers(run)
    for person in people:  # the queue stays where it is, on its scale, with this person's labels listed
        by = {} if person["id"] == request.user.pk else {"by": person["id"]}
        person["labels_url"] = f"{base}?{urlencode({**by, 'c': ids[position], 'scale': scale})}"
    context = {
        "run": run,
        "conversation": conversation,
        "bubbles": reviews.conversation_messages(conversation),  # not "messages": the flash messages
        "position": position + 1,
        "total": len(ids),
        "labelled": sum(done for _, done in queue),
        "prev_url": at(position - 1),
        "next_url": at(position + 1),
        # After a save the queue moves on to the next conversation still to label (or the next one).
        "after_save": at(unlabelled_after)
        if unlabelled_after is not None
        else at(position + 1) or at(position),
        "reviewers": people,
        "shown": _labels_shown(request, run, people),
        "assignable": selectors.assignable(run),
        "can_assign": run.created_by_id == request.user.pk
        or allows(role_of(request.user, run.project_id), Can.EDIT),
        "inter_rater": selectors.inter_rater(run),
        "sets": selectors.calibration_sets_in(run.project_id),
        **label_form(conversation, request.user, scale, fixed=True),
        "queue_scale_fixed": fixed,
    }
    return render(request, "runs/review.html", context)


@login_required
@require_POST
@needs(Can.EDIT)
def assign(request: HttpRequest, run_id) -> HttpResponse:
    """Ask a member of the run's project who may label to review it, on a scale."""
    access = owner(request, run_id, Can.EDIT)
    run = access.run
    member = next(
        (m for m in selectors.assignable(run) if str(m.user_id) == request.POST.get("user", "")), None
    )
    if member is None:
        messages.error(request, "Choose a member of this project who may label.")
        return redirect(reverse("runs:review", args=[run.pk]))
    scale, fixed = selectors.queue_scale(run, member.user, request.POST.get("scale"))
    reviews.assign_reviewer(run, member.user, scale=scale, by=request.user)
    messages.success(request, f"Asked {member.user.get_username()} to label this run on {scale}.")
    return redirect(reverse("runs:review", args=[run.pk]))


@login_required
@require_POST
@needs(Can.EDIT)
def unassign(request: HttpRequest, run_id) -> HttpResponse:
    access = owner(request, run_id, Can.EDIT)
    user_id = request.POST.get("user", "")
    if user_id.isdigit():
        reviews.unassign_reviewer(access.run, int(user_id))
    return redirect(reverse("runs:review", args=[access.run.pk]))
