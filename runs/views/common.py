"""What every run page shares: who is looking (`Access`: the owner, or a share-link visitor) and the links
it builds, so a shared page never links to anything that needs a login; the share-link wrapper; durations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property, wraps
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRefresh

from .. import display, selectors
from ..models import Conversation, Run, Status

SHARE_NAMES = {"detail": "run"}


def format_duration(elapsed: timedelta | None) -> str:
    if elapsed is None:
        return ""
    seconds = max(elapsed.total_seconds(), 0.0)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def with_durations(runs) -> list[Run]:
    runs = list(runs)
    for run in runs:
        run.duration = format_duration(run.elapsed)
    return runs


@dataclass(frozen=True)
class Access:
    """Who is looking at a run: its owner (every control) or a share-link visitor (read-only)."""

    run: Run
    token: str | None = None

    @property
    def shared(self) -> bool:
        return self.token is not None

    def url(self, name: str, *args, query: dict | None = None) -> str:
        if self.shared:
            path = reverse(f"share:{SHARE_NAMES.get(name, name)}", args=[self.token, *args])
        else:
            path = reverse(f"runs:{name}", args=[self.run.pk, *args])
        query = {key: value for key, value in (query or {}).items() if value not in (None, "")}
        return f"{path}?{urlencode(query)}" if query else path

    def conversation_url(self, index: int, iteration: int = 0) -> str:
        path = f"{self._conversations_path}{index}/"
        return f"{path}?{urlencode({'iteration': iteration})}" if iteration else path

    @cached_property
    def _conversations_path(self) -> str:
        """The path a conversation's index is appended to (`…/c/`), reversed once rather than for each of the
        hundred rows of a run page."""
        return self.url("conversation", 0).removesuffix("0/")  # the URLconf's `c/<int:index>/`


def owner(request: HttpRequest, run_id) -> Access:
    return Access(selectors.get_run_for_user(request.user, run_id))


def visitor(token: str) -> Access:
    run, _link = selectors.get_shared_run(token)
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


def waiting(conversation: Conversation, now) -> dict | None:
    """What a running conversation waits for before its next model call (a rate limit, an outage), if any."""
    if conversation.status != Status.RUNNING:
        return None
    return display.waiting(conversation.waiting_reason, conversation.waiting_until, now)
