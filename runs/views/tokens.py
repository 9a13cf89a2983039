"""Personal API tokens: list, create (the token is shown once, on the page that made it), revoke."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from projects.access import needs
from projects.roles import Can

from .. import tokens as token_service


@needs(Can.VIEW)  # a user's own tokens
@never_cache  # the one response that holds a new token must not be kept by any cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    created = error = None
    name = ""
    if request.method == "POST":
        name = request.POST.get("name", "")
        try:
            row, token = token_service.create_token(request.user, name)
        except ValueError as exc:
            error = str(exc)
        else:
            created = {"row": row, "token": token}
            name = ""
    context = {
        "section": "tokens",
        "tokens": token_service.tokens_of(request.user),
        "created": created,
        "error": error,
        "name": name,
        "api_base": request.build_absolute_uri("/api/"),
    }
    return render(request, "runs/tokens.html", context, status=422 if error else 200)


@needs(Can.VIEW)  # a user's own token: anyone else's is a 404
@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    if token_service.revoke(request.user, token_id):
        messages.success(request, "Token revoked: it no longer works anywhere.")
    else:
        messages.info(request, "That token was already revoked.")
    return redirect("tokens")
