"""The one NinjaAPI. Each app contributes a Router.

Two ways in: a personal API token (`Authorization: Bearer evs_…`, for CI and scripts; runs/tokens.py), or the
browser's session, for which ninja enforces CSRF on unsafe methods. A bearer token cannot be sent by another
site's page, so it needs no CSRF token. A token acts in its own project only, a session in the project a
request names or the current one (projects/requests.py); either way with the user's role there, so a request
sees exactly what its user sees. Outside the user's projects an object is a 404; a role too low is a 403.

Wrong tokens are throttled per client address like failed sign-ins (evalsite/lockout.py): past
EVALSITE_TOKEN_FAILURE_LIMIT, every token from that address is answered 429 with Retry-After until the
cool-off ends, the right one included, so guessing gains nothing from a lucky hit.

A request that does not validate is a 422 like every other refusal (`detail`, `problems`), located at the
fields it sent (engine.errors.sent_errors).
"""

import json
from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, ValidationError
from ninja.security import HttpBearer, django_auth

from engine.errors import sent_errors
from engine.source import format_path
from projects.requests import TOKEN_PROJECT, TokenElsewhere
from runs.api import router as runs_router
from runs.matrix_api import router as matrices_router
from runs.tokens import token_for
from suites.api import router as suites_router

from .lockout import token_allowed, token_failed, token_refusal


class TokensThrottled(Exception):
    """Too many wrong tokens from the client's address: it is cooling off."""


class BearerToken(HttpBearer):
    def authenticate(self, request, token):
        if not token_allowed(request):
            raise TokensThrottled()
        row = token_for(token)
        if row is None:
            # A token was presented and is wrong (unknown, revoked, its user gone from its project): 401 now,
            # rather than falling through to the session, which would answer a CSRF failure for a POST and
            # confuse a CI job.
            if token_failed(request):
                raise TokensThrottled()
            raise AuthenticationError()
        request.user = row.user  # views read request.user, as with a session
        setattr(request, TOKEN_PROJECT, row.project)
        return row.user


def docs_access(view):
    """With DEBUG off, the API's docs (/api/docs) and schema (/api/openapi.json) are for signed-in users:
    the docs page sends a visitor to sign in, the schema answers 401 like the API itself."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if settings.DEBUG or request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if request.resolver_match and request.resolver_match.url_name == "openapi-view":
            return redirect_to_login(request.get_full_path())
        return JsonResponse({"detail": "Unauthorized"}, status=401)

    return wrapped


api = NinjaAPI(
    title="evalsite API",
    version="1",
    auth=[BearerToken(), django_auth],
    urls_namespace="api",
    docs_decorator=docs_access,
)


@api.exception_handler(TokensThrottled)
def _throttled(request, exc):
    return token_refusal(request)


@api.exception_handler(TokenElsewhere)
def _elsewhere(request, exc):
    return api.create_response(request, {"detail": str(exc)}, status=404)


@api.exception_handler(PermissionDenied)
def _denied(request, exc):
    """A member whose role is too low is told, in JSON like every other refusal, which role it needs."""
    return api.create_response(request, {"detail": str(exc) or "Forbidden"}, status=403)


@api.exception_handler(ValidationError)
def _invalid(request, exc):
    """A request that does not validate, as every other refusal reads (`detail` and located `problems`): each
    problem at the field the user sent ("options.model_settings.temperature"), not at ninja's location,
    which names where the value came from, the view's argument and the union members it tried ("body",
    "body", "str")."""
    sent = _body(request)
    problems = [
        {"line": 0, "column": 0, "path": format_path(found.loc), "message": found.message, "file": ""}
        for source, errors in _by_source(exc.errors, sent).items()
        for found in sent_errors(errors, sent if source == "body" else None)
    ]
    first = problems[0]
    detail = f"{first['path']}: {first['message']}" if first["path"] else first["message"]
    if len(problems) > 1:
        detail += f" (and {len(problems) - 1} more)"
    return api.create_response(request, {"detail": detail, "problems": problems}, status=422)


def _by_source(errors: list[dict], sent: object) -> dict[str, list[dict]]:
    """ninja's errors by where the value came from (body, query, path), each located below it: a body's
    below the view's argument, which stands for the JSON sent (unless the JSON has that key: an argument
    that is one key of it)."""
    found: dict[str, list[dict]] = {}
    for error in errors:
        source, *loc = error["loc"]
        if source == "body" and loc and not (isinstance(sent, dict) and loc[0] in sent):
            loc = loc[1:]
        found.setdefault(source, []).append({**error, "loc": tuple(loc)})
    return found


def _body(request) -> object:
    """The JSON the request sent, as ninja read it; None when it sent none."""
    try:
        return json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return None


api.add_router("/suites", suites_router)
api.add_router("/runs", runs_router)
api.add_router("/matrices", matrices_router)
