"""Requests refused before any view reads them."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse


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
