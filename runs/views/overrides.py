"""Overrides: a reviewer overturns one check's outcome on a transcript, with a note, or withdraws it
(engine.overrides recomputes the verdict). Another member's override is theirs: withdrawing it takes the
admin role, as revoking another member's share link does. Owners only: share links show overrides but cannot
make them."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from projects.access import check, needs
from projects.roles import Can

from .. import reviews, selectors
from .common import owner


def _conversation(request: HttpRequest, run_id, index: int):
    access = owner(request, run_id, Can.LABEL)
    iteration = request.POST.get("iteration", "0")
    conversation = selectors.get_conversation(access.run, index, int(iteration) if iteration.isdigit() else 0)
    return access, conversation


def _back(access, conversation, turn: str) -> HttpResponse:
    url = access.conversation_url(conversation.index, conversation.iteration)
    return redirect(f"{url}#turn-{turn}" if turn.isdigit() else url)


@needs(Can.LABEL)
@login_required
@require_POST
def override(request: HttpRequest, run_id, index: int) -> HttpResponse:
    access, conversation = _conversation(request, run_id, index)
    turn = request.POST.get("turn", "")
    try:
        reviews.override_outcome(
            conversation,
            request.user,
            turn=int(turn) if turn.isdigit() else 0,
            target=request.POST.get("target", ""),
            passed=request.POST.get("passed") == "1",
            note=request.POST.get("note", ""),
        )
    except reviews.OverrideRefused as exc:
        messages.error(request, f"Not overridden: {exc}.")
    else:
        messages.success(request, "Overridden: the conversation's verdict follows the reviewed outcome.")
    return _back(access, conversation, turn)


@needs(Can.LABEL)
@login_required
@require_POST
def remove_override(request: HttpRequest, run_id, index: int, override_id: int) -> HttpResponse:
    access, conversation = _conversation(request, run_id, index)
    given = conversation.overrides.filter(pk=override_id).first()
    if given is not None and given.created_by_id != request.user.pk:  # another member's override
        check(request.user, access.run.project_id, Can.MANAGE)
    reviews.remove_override(conversation, override_id, by=request.user)
    messages.success(request, "Override withdrawn.")
    return _back(access, conversation, request.POST.get("turn", ""))
