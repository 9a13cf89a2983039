"""What every run page shares: finding the run for a member of its project or a share-link visitor, and the
share-link wrapper."""

from __future__ import annotations

from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRefresh

from projects.roles import Can

from .. import selectors, services
from ..access import Access


def owner(request: HttpRequest, run_id, can: Can = Can.VIEW) -> Access:
    """The run for a member of its project whose role allows `can` (projects.access.check)."""
    return Access(selectors.get_run_for_user(request.user, run_id, can))


def visitor(token: str) -> Access:
    run, link = selectors.get_shared_run(token)
    services.link_used(link)
    return Access(run, token=token)


def share_view(view):
    """A share-link page: a revoked or unknown token gets a page that says so (still a 404), and a page
    polling through a link revoked meanwhile reloads to show it. No cache, shared or local, keeps a copy:
    revoking the link must end access, including through a proxy's or browser's cache."""

    @wraps(view)
    def wrapper(request: HttpRequest, token: str, *args, **kwargs) -> HttpResponse:
        try:
            response = view(request, token, *args, **kwargs)
        except selectors.ShareLinkGone:
            if request.htmx:
                response = HttpResponseClientRefresh()
            else:
                response = render(request, "runs/share_gone.html", status=404)
        patch_cache_control(response, private=True, no_store=True)
        return response

    return require_GET(wrapper)
