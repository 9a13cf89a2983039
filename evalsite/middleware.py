"""Requests refused before any view reads them."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

# How long a client is told to wait before asking again while the database is away.
RETRY_AFTER_SECONDS = 5


class RefuseNulCharacters:
    """A NUL character (%00) in the address is a 400 that names where it is, for every page and the API.

    No one types it, and no view can use it: PostgreSQL refuses it in any text it is sent (a DataError, so a
    500, from every search and filter), and SQLite's full-text search reads it as the end of its query text
    (the run page's search failed with "unterminated string"). Refused here, once, rather than in each view
    that reads the address. Forms posted to the site refuse it already (Django's fields do)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = _nul_in(request)
        if where is None:
            return self.get_response(request)
        message = f"{where} holds a NUL character (%00), which no page, search or filter accepts"
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=400)
        # Plain text: the parameter's name comes from the address, and is never read as HTML.
        return HttpResponseBadRequest(message + ".\n", content_type="text/plain; charset=utf-8")


def _nul_in(request: HttpRequest) -> str | None:
    """Which part of the address holds a NUL: the path, or a query parameter by name; None when none does."""
    if "\x00" in request.path:
        return "The address's path"
    for key, values in request.GET.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            return f"The address's {key.replace(chr(0), '%00')!r} parameter"
    return None


class DatabaseUnavailable:
    """While the database is away (restarting, unreachable, a locked SQLite file), every page and API call
    answers 503 with a Retry-After hint, as soon as the connection is refused or the pool has none to give
    (settings: EVALSITE_DB_POOL_TIMEOUT, EVALSITE_DB_CONNECT_TIMEOUT), instead of a 500 or a request that
    hangs. htmx polls go on polling and say so (static/js/app.js)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return unavailable(request) if _database_away(exception) else None


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 handler: an error raised outside a view (a middleware reading the session) by a database
    that is away is a 503 too."""
    if _database_away(sys.exc_info()[1]):
        return unavailable(request)
    return defaults.server_error(request)


def _database_away(exception: BaseException | None) -> bool:
    return isinstance(exception, OperationalError | InterfaceError)


def unavailable(request: HttpRequest) -> HttpResponse:
    """The 503: JSON for the API, a page of its own for the rest, which reads nothing from the database
    (not even who is signed in)."""
    message = "The database is unavailable; try again in a few seconds."
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=503)
    else:
        html = render_to_string("503.html", {"message": message, "retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
