"""Deleting what a project holds (a suite, a run), for its admins: one confirm page that says what goes, or
why it stays, then the deletion, which the audit log records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render


class DeleteRefused(Exception):
    """It cannot be deleted now; the message says why."""


@dataclass(frozen=True)
class Deletion:
    title: str  # the page's question: "Delete this run?"
    what: str  # its name, as the audit log keeps it
    goes: str  # what goes with it
    button: str
    back: str  # the page it is deleted from
    done: str  # where to go once it is deleted (a URL name)
    delete: Callable[[], None]  # raises DeleteRefused
    kept: str = ""  # why it stays, known before asking; "" when it can go
    said: str = ""  # what the message once it is deleted calls it, if not `what`


def confirm_delete(request: HttpRequest, deletion: Deletion) -> HttpResponse:
    """GET: the confirm page (with why it stays, if it does). POST: the deletion, then `done` with a message;
    refused, the page again with the reason (409)."""
    error = deletion.kept
    if request.method == "POST" and not error:
        try:
            deletion.delete()
        except DeleteRefused as exc:
            error = str(exc)
        else:
            said = deletion.said or deletion.what
            messages.success(request, f"Deleted {said}. The project's audit log keeps its name.")
            return redirect(deletion.done)
    context = {
        "title": deletion.title,
        "what": deletion.what,
        "goes": deletion.goes,
        "error": error,
        "back": deletion.back,
        "button": deletion.button,
    }
    return render(
        request,
        "projects/confirm_delete.html",
        context,
        status=409 if error and request.method == "POST" else 200,
    )
