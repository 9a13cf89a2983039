"""Requests refused before any view reads them."""

from __future__ import annotations

import io
import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.views import defaults

from runs.outage import unavailable as _database_away

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


class LimitRequestBody:
    """A request body over its limit is refused with 413 before anything reads it.

    Two limits: EVALSITE_MAX_UPLOAD_BYTES for what carries attached files (a multipart upload, whose files
    wait in temporary files, not in memory; a launch through the API with `files`), and the smaller
    EVALSITE_MAX_REQUEST_BYTES for every other body, which is read into memory whole. The declared
    Content-Length decides, so an oversized POST costs the process nothing: no view, form or CSRF check has
    parsed it yet. A chunked body, which has no length, is read only as far as one byte past the limit, and
    only where the server marks where it ends (gunicorn does); elsewhere Django would read none of it, so it
    is refused with 411. The answer never repeats the body: JSON under /api/, a fragment for htmx (swapped
    into the element that asked), a page otherwise."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit, setting = _limit_for(request)
        declared = request.META.get("CONTENT_LENGTH")
        if declared:
            try:
                size = int(declared)
            except ValueError:
                return _refuse(request, 400, "The request's Content-Length is not a number.")
            if size > limit:
                return _refuse(request, 413, _too_large(_amount(size), limit, setting))
        elif "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            if not request.META.get("wsgi.input_terminated"):
                return _refuse(
                    request,
                    411,
                    "Send the request with a Content-Length: this server reads no body without one.",
                )
            body = request.META["wsgi.input"].read(limit + 1)
            if len(body) > limit:
                return _refuse(request, 413, _too_large("more than that", limit, setting))
            # Django made the request's stream from the missing length (empty): it reads this body instead.
            request.META["CONTENT_LENGTH"] = str(len(body))
            request._stream = LimitedStream(io.BytesIO(body), len(body))
        if request.path in _JSON_UPLOADS and request.method == "POST":
            # Read here, within its own limit: Django's own read of a JSON body stops at the smaller one
            # (DATA_UPLOAD_MAX_MEMORY_SIZE), which this launch's attached files may pass.
            request._body = request.read()
            request._stream = io.BytesIO(request._body)
        return self.get_response(request)


# The API's one write that carries attached files in its JSON (`evalsite run --server`).
_JSON_UPLOADS = frozenset({"/api/runs"})


def _limit_for(request: HttpRequest) -> tuple[int, str]:
    """The limit of this request's body, and the setting that gives it."""
    multipart = request.META.get("CONTENT_TYPE", "").lower().startswith("multipart/form-data")
    if multipart or request.path in _JSON_UPLOADS:
        return settings.EVALSITE_MAX_UPLOAD_BYTES, "EVALSITE_MAX_UPLOAD_BYTES"
    return settings.EVALSITE_MAX_REQUEST_BYTES, "EVALSITE_MAX_REQUEST_BYTES"


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 400 handler: form fields of a multipart upload over DATA_UPLOAD_MAX_MEMORY_SIZE (its files may be
    larger, its text may not) are refused as a body over its limit is, not with Django's bare 400 page."""
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _refuse(
            request,
            413,
            f"This request's form fields are larger than {_amount(limit)}; attached files may be larger, "
            "the text beside them may not (EVALSITE_MAX_REQUEST_BYTES). Nothing was stored.",
        )
    return defaults.bad_request(request, exception)


def _too_large(size: str, limit: int, setting: str) -> str:
    return (
        f"This request's body is {size}; this server accepts at most {_amount(limit)} in one "
        f"request ({setting}). Nothing was read or stored."
    )


def _amount(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB" if size >= 100_000 else f"{size:,} bytes"


def _refuse(request: HttpRequest, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=status)
    elif getattr(request, "htmx", False):
        response = HttpResponse(format_html('<p class="error" role="alert">{}</p>', message), status=status)
        # Inside the target, not over it, so that the element is still there for the next request.
        response["HX-Reswap"] = "innerHTML"
    else:
        response = render(request, "request_refused.html", {"message": message}, status=status)
    return response


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
