"""The page django-axes shows instead of the sign-in form once a username has failed too often."""

from axes.helpers import get_client_username, get_cool_off
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.timesince import timeuntil


def lockout_response(request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None):
    now = timezone.now()
    context = {
        "username": get_client_username(request, credentials) or "",
        "wait": timeuntil(now + get_cool_off(request), now),
    }
    # 429 tells scripts to back off; the admin's sign-in form lands here too.
    return render(request, "registration/locked_out.html", context, status=429)
