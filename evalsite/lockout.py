"""django-axes, for sign-ins and API tokens: the page it shows instead of the sign-in form once a username
has failed too often, and the throttle on wrong bearer tokens.

Wrong tokens are recorded as axes failures of one stand-in username per client address, so they are counted,
listed in the admin and lifted exactly as failed sign-ins are, from the address axes reads (REMOTE_ADDR, or
AXES_CLIENT_IP_CALLABLE behind a proxy), and they never lock a person's own sign-in: axes keys a sign-in on
the username and the address together."""

from __future__ import annotations

import math

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.timesince import timeuntil

# Django's usernames hold letters, digits and @.+-_ only, so no person's username is ever this one.
TOKEN_USERNAME = "(API token)"
_TOKEN_CREDENTIALS = {"username": TOKEN_USERNAME}


def failure_limit(request: HttpRequest, credentials: dict | None) -> int:
    """AXES_FAILURE_LIMIT: failures before a lockout, the tokens' own or the sign-in's. (The cool-off is
    one for both: see AXES_COOLOFF_TIME in the settings.)"""
    if _for_token(request, credentials):
        return settings.EVALSITE_TOKEN_FAILURE_LIMIT
    return settings.EVALSITE_LOGIN_FAILURE_LIMIT


def _for_token(request: HttpRequest | None, credentials: dict | None) -> bool:
    if credentials is not None and credentials.get("username") == TOKEN_USERNAME:
        return True
    return getattr(request, "evalsite_token_auth", False)


def token_allowed(request: HttpRequest) -> bool:
    """Whether the client's address may present a bearer token now (it is not cooling off)."""
    request.evalsite_token_auth = True
    return AxesProxyHandler.is_allowed(request, _TOKEN_CREDENTIALS)


def token_failed(request: HttpRequest) -> bool:
    """Record a wrong token from the client's address; True when that failure locked the address out."""
    request.evalsite_token_auth = True
    user_login_failed.send(sender=__name__, credentials=_TOKEN_CREDENTIALS, request=request)
    return bool(getattr(request, "axes_locked_out", False))


def token_refusal(request: HttpRequest) -> JsonResponse:
    """The API's answer to an address cooling off: 429, and Retry-After for when its lockout ends (the
    cool-off runs from the last wrong token counted; refused ones are not counted, so it does end)."""
    last = (
        AccessAttempt.objects.filter(
            username=TOKEN_USERNAME, ip_address=getattr(request, "axes_ip_address", None)
        )
        .values_list("attempt_time", flat=True)
        .first()
    )
    ends = (last or timezone.now()) + get_cool_off(request)
    seconds = max(1, math.ceil((ends - timezone.now()).total_seconds()))
    response = JsonResponse(
        {"detail": f"too many wrong API tokens from this address: retry in {seconds} s"}, status=429
    )
    response["Retry-After"] = str(seconds)
    return response


def lockout_response(request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None):
    if _for_token(request, credentials):
        return token_refusal(request)
    now = timezone.now()
    context = {
        "username": get_client_username(request, credentials) or "",
        "wait": timeuntil(now + get_cool_off(request), now),
    }
    # 429 tells scripts to back off; the admin's sign-in form lands here too.
    return render(request, "registration/locked_out.html", context, status=429)
