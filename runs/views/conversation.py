"""A conversation's transcript: given history, live turns, per-turn grades, the conversation as text, the
reviewer's label, and its shared read-only twin."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseStopPolling

from engine.outcomes import GRADED
from engine.overrides import apply as apply_overrides
from engine.results import TurnRecord
from engine.text import plural
from projects.access import needs, role_of
from projects.roles import Can, allows

from .. import display, selectors
from ..access import Access
from ..models import ACTIVE, Conversation, Status, Turn
from ..timing import waiting
from .common import owner, share_view, visitor
from .labels import label_form


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
    elif status == Status.SKIPPED:
        text = verdict or "not in the source run"
    elif status == Status.RUNNING:
        turns = conversation.turn_count
        text = (
            f"Running — {plural(turns, 'turn')} so far" if turns else "Running — waiting for the first reply"
        )
    else:
        text = "Queued — waiting for a worker"
    return {"tone": status, "text": text[:1].upper() + text[1:]}


def _neighbours(access: Access, conversation: Conversation) -> dict:
    near = selectors.neighbours(access.run, conversation.index, conversation.iteration)
    return {
        **near,
        "previous": access.conversation_url(*near["previous"]) if near["previous"] else None,
        "next": access.conversation_url(*near["next"]) if near["next"] else None,
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
        "waiting": waiting(conversation, timezone.now()),
        "strip": display.strip(
            conversation, display.turn_marks(records, conversation.original.get("reviewed_turns"))
        ),
        "ending": display.ending(conversation, turns),
        "graders": conversation.graders or [],
        "spend": display.spend(turns),
        "text": display.transcript_text(conversation.history, turns, conversation.system),
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
    rows = selectors.override_rows(conversation)
    reviews = [selectors.override_record(row) for row in rows]
    may_label = not access.shared and allows(role_of(request.user, run.project_id), Can.LABEL)
    can_override = may_label and conversation.status in GRADED
    # An overridden conversation's turns as reviewed: each overturned outcome marked, its own kept below.
    shown = apply_overrides(turns, reviews) if reviews else turns
    context = {
        **_live_context(access, conversation, records, turns),
        "turns": shown,
        "tools": display.tools_by_turn(shown),
        "credited": display.credited_calls(shown),
        "reviews": display.review_rows(turns, rows, can_override),
        "original": conversation.original,
        "override_count": len(reviews),
        "given": display.given_history(conversation.history),
        "system": display.system_message(conversation),
        "style_label": display.STYLE_LABELS.get(conversation.style, conversation.style),
        "nav": nav,
        "iterations": _iterations(access, conversation, nav["iterations"]),
        "urls": {"run": access.url("detail"), "iterations": access.url("detail") + f"#iter-{index}"},
    }
    if may_label:  # people score conversations here, for calibrating judges (runs.views.labels)
        context["label_form"] = label_form(conversation, request.user, request.GET.get("scale") or None)
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
    new = [turn for turn in turns if turn.turn > after]
    context = {
        **_live_context(access, conversation, records, turns, after),
        "turns": new,  # appended below the ones already shown
        "tools": display.tools_by_turn(new),
        "credited": display.credited_calls(turns),  # a new turn's checks name the earlier turns' calls too
        "oob": True,
    }
    if active:
        return render(request, "runs/conversation/_poll.html", context)
    return HttpResponseStopPolling(render_to_string("runs/conversation/_poll.html", context, request))


@needs(Can.VIEW)
@login_required
@require_GET
def conversation(request: HttpRequest, run_id, index: int) -> HttpResponse:
    return _conversation_page(request, owner(request, run_id), index)


@needs(Can.VIEW)
@login_required
@require_GET
def conversation_poll(request: HttpRequest, run_id, index: int) -> HttpResponse:
    return _conversation_poll(request, owner(request, run_id), index)


# --- Shared, read-only: no login, looked up by an active share token ------------------------------------------


@share_view
def shared_conversation(request: HttpRequest, token: str, index: int) -> HttpResponse:
    return _conversation_page(request, visitor(token), index)


@share_view
def shared_conversation_poll(request: HttpRequest, token: str, index: int) -> HttpResponse:
    return _conversation_poll(request, visitor(token), index)
