"""Who is looking at a run (its owner, or a share-link visitor) and the links its pages build for them, so a
shared page never links to anything that needs a login."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlencode

from django.urls import reverse

from .models import Run

SHARE_NAMES = {"detail": "run"}


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
        """The path a conversation's index is appended to (`…/c/`), reversed once rather than for each row of
        a run page."""
        return self.url("conversation", 0).removesuffix("0/")  # the URLconf's `c/<int:index>/`
