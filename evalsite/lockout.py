"""django-axes, for sign-ins and API tokens: the page it shows instead of the sign-in form once a username
or an address has failed too often, and the throttle on wrong bearer tokens.

A sign-in is refused once its username has failed too often from its address (EVALSITE_LOGIN_FAILURE_LIMIT),
or once its address has failed too often whatever the usernames (EVALSITE_LOGIN_ADDRESS_FAILURE_LIMIT:
password spraying, one password tried on many usernames). axes' own settings cannot say the second: every
combination in AXES_LOCKOUT_PARAMETERS shares one failure limit (an address would lock at the username's five),
and a sign-in that succeeds clears every combination it matches (a sprayer holding one account would clear
the address's count). So `Handler` adds the address's count to axes' database handler.

Wrong tokens are recorded as axes failures of one stand-in username per client address, so they are counted,
listed in the admin and lifted exactly as failed sign-ins are, from the address axes reads (REMOTE_ADDR, or
AXES_CLIENT_IP_CALLABLE behind a proxy), and they never lock a person's own sign-in: a token's failures are
not a sign-in's, for the username's count or the address's."""

from __future__ import annotations

import math
from datetime import timedelta

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.db.models import F, QuerySet, Sum, Value
from django.db.models.functions import Least
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


def _sign_ins_from(request: HttpRequest) -> QuerySet[AccessAttempt]:
    """The address's failed sign-ins still counted (within the cool-off), whatever their usernames."""
    return AccessAttempt.objects.filter(
        ip_address=request.axes_ip_address, attempt_time__gte=get_cool_off_threshold(request)
    ).exclude(username=TOKEN_USERNAME)


def address_failures(request: HttpRequest, credentials: dict | None = None) -> int:
    """The address's failed sign-ins, each username's counted up to its own limit: one username hammered is
    already refused by that limit, and must not lock the colleagues behind the same address out too."""
    capped = Least(F("failures_since_start"), Value(get_failure_limit(request, credentials)))
    return _sign_ins_from(request).aggregate(total=Sum(capped))["total"] or 0


def address_locked(request: HttpRequest, credentials: dict | None = None) -> bool:
    return address_failures(request, credentials) >= settings.EVALSITE_LOGIN_ADDRESS_FAILURE_LIMIT


class Handler(AxesDatabaseHandler):
    """axes' database handler, whose sign-in failures (what it compares with the limit) reach the limit too
    once the address has failed too often whatever the usernames."""

    def get_failures(self, request, credentials: dict | None = None) -> int:
        failures = super().get_failures(request, credentials)
        if _for_token(request, credentials):
            return failures
        limit = get_failure_limit(request, credentials)
        if failures < limit and address_locked(request, credentials):
            return limit
        return failures


def _retry_after(request: HttpRequest, attempts: QuerySet[AccessAttempt]) -> int:
    """Seconds until a lockout ends: the cool-off runs from the last failure counted."""
    last = attempts.order_by("-attempt_time").values_list("attempt_time", flat=True).first()
    ends = (last or timezone.now()) + get_cool_off(request)
    return max(1, math.ceil((ends - timezone.now()).total_seconds()))


def token_refusal(request: HttpRequest) -> JsonResponse:
    """The API's answer to an address cooling off: 429, and Retry-After for when its lockout ends (the
    cool-off runs from the last wrong token counted; refused ones are not counted, so it does end)."""
    attempts = AccessAttempt.objects.filter(
        username=TOKEN_USERNAME, ip_address=getattr(request, "axes_ip_address", None)
    )
    seconds = _retry_after(request, attempts)
    response = JsonResponse(
        {"detail": f"too many wrong API tokens from this address: retry in {seconds} s"}, status=429
    )
    response["Retry-After"] = str(seconds)
    return response


def lockout_response(request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None):
    if _for_token(request, credentials):
        return token_refusal(request)
    username = get_client_username(request, credentials) or ""
    whole_address = address_locked(request, credentials)
    if whole_address:
        attempts = _sign_ins_from(request)
    else:
        attempts = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address)
    seconds = _retry_after(request, attempts)
    now = timezone.now()
    context = {
        "username": username,
        "whole_address": whole_address,
        "wait": timeuntil(now + timedelta(seconds=seconds), now),
    }
    # 429 and Retry-After tell scripts to back off; the admin's sign-in form lands here too.
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response
