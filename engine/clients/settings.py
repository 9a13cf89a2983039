"""Generation settings on the wire: what a ModelSettings adds to a chat request, a setting the endpoint
refuses, and the client that sends one role's settings with every call (`Configured`).

A request's body is built in this order: `model` and `messages`, the settings' keys, the call's own
`temperature` (a check's or the suite's `judge_temperature`, which is more specific than `judge_settings`),
`tools`, and `extra_body` last, so a key given there is sent as given. `extra_headers` go as HTTP headers.

A refused setting is an HTTP 400 (or 422) whose message names a key the request carried because of the
settings ("Unsupported parameter: 'temperature' …", "Unrecognized request argument supplied: seed"). It is
no failure that asking again fixes: the call raises SettingRefused, which `Configured` names by its role
("the endpoint refused model_settings.seed: …") and notes in the run's `Refusals`, so whoever plays the run
stops starting conversations that would be refused the same way.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from ..schema.settings import ModelSettings
from .base import Completion, EndpointError

REFUSING_STATUSES = ("HTTP 400 ", "HTTP 422 ")
# How endpoints name the parameter they refuse: quoted ("Unsupported parameter: 'seed'", "Invalid value for
# `stop`"), or after the word for it ("Unrecognized request argument supplied: seed"). A bare word is not
# enough: "stop" or "seed" may be in any message.
NAMED = (
    r"""['"`]{key}['"`]"""
    r"|(?:supplied|parameters?|arguments?|fields?|params?|keys?)(?: for)?:?\s+{key}(?![\w])"
)
ROLES = ("model_settings", "judge_settings", "user_settings")
# A refusal as SettingRefused says it, for reading it back from a stored reason or verdict: the role, the key,
# the endpoint's words.
SAID = re.compile(rf"the endpoint refused (?:({'|'.join(ROLES)})\.)?([^\s:]+): (.*)", re.DOTALL)


# What each settings object puts in a request, worked out once: a run sends the same few objects with every
# call, and dumping one costs more than building the rest of the body. Keyed by id, holding the object so the
# id stays its own; the oldest are dropped.
_WIRE_HELD = 256
_wire: dict[int, tuple[ModelSettings, dict[str, Any], dict[str, Any], dict[str, str]]] = {}
_wire_lock = threading.Lock()


def _on_wire(settings: ModelSettings) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    held = _wire.get(id(settings))
    if held is None or held[0] is not settings:
        fields = settings.model_dump(exclude_none=True, exclude={"extra_body", "extra_headers"})
        if isinstance(fields.get("response_format"), str):  # `json_object` alone, as OpenAI's API takes it
            fields["response_format"] = {"type": fields["response_format"]}
        held = (settings, fields, dict(settings.extra_body or {}), dict(settings.extra_headers or {}))
        with _wire_lock:
            _wire[id(settings)] = held
            while len(_wire) > _WIRE_HELD:
                _wire.pop(next(iter(_wire)))
    return held[1], held[2], held[3]


def body_fields(settings: ModelSettings | None) -> dict[str, Any]:
    """The request body's keys for these settings, `extra_body` not included (it goes last)."""
    return _on_wire(settings)[0] if settings is not None else {}


def extra_body(settings: ModelSettings | None) -> dict[str, Any]:
    return _on_wire(settings)[1] if settings is not None else {}


def headers(settings: ModelSettings | None) -> dict[str, str]:
    return _on_wire(settings)[2] if settings is not None else {}


def request_body(
    model: str,
    messages: list[dict],
    temperature: float | None,
    tools: list[dict] | None,
    settings: ModelSettings | None,
) -> dict:
    body: dict[str, Any] = {"model": model, "messages": messages, **body_fields(settings)}
    if temperature is not None:
        body["temperature"] = temperature
    if tools:
        body["tools"] = tools
    body.update(extra_body(settings))
    return body


class SettingRefused(EndpointError):
    """The endpoint refused a key the settings put in the request. `role` is the settings key it came from
    (model_settings, judge_settings, user_settings), set by the Configured client that sent it."""

    def __init__(self, key: str, detail: str, role: str | None = None) -> None:
        self.key, self.detail, self.role = key, detail, role
        super().__init__(f"{self.brief}: {detail}")

    @property
    def where(self) -> str:
        """The setting as a suite names it: `model_settings.seed`."""
        return f"{self.role}.{self.key}" if self.role else self.key

    @property
    def brief(self) -> str:
        """The refusal without the endpoint's words, where they are said already."""
        return f"the endpoint refused {self.where}"

    def of(self, role: str) -> SettingRefused:
        return self if self.role else SettingRefused(self.key, self.detail, role)

    @classmethod
    def read(cls, text: str) -> SettingRefused | None:
        """The refusal a stored reason is (a run's stop_reason), or None when it is another reason."""
        said = SAID.fullmatch(text or "")
        return cls(said[2], said[3], said[1]) if said else None


def briefly(text: str) -> str:
    """`text` with a refusal it ends with said without the endpoint's words: "stopped at its first call: the
    endpoint refused model_settings.seed", for a line beside one that says them."""
    said = SAID.search(text)
    return text[: said.start(3) - 2] if said else text


def refusal(error: EndpointError, settings: ModelSettings | None) -> SettingRefused | None:
    """The error as a refused setting when it is one: a 400 or 422 whose message names a key the settings
    sent (the one named first, when it names several)."""
    message = str(error)
    if settings is None or isinstance(error, SettingRefused) or not message.startswith(REFUSING_STATUSES):
        return None
    sent = [*body_fields(settings), *extra_body(settings)]
    _, _, detail = message.partition(": ")
    # The error's `param` names the field when the endpoint fills it in ("response_format.type": its key).
    named = (getattr(error, "param", None) or "").split(".")[0].split("[")[0]
    if named in sent:
        return SettingRefused(named, detail)
    found = []
    for key in sent:
        match = re.search(NAMED.format(key=re.escape(key)), detail)
        if match:
            found.append((match.start(), key))
    if not found:
        return None
    return SettingRefused(min(found)[1], detail)


@dataclass
class Refusals:
    """The first setting a run's endpoint refused; shared by every client of the run, read by whoever
    starts its conversations."""

    first: SettingRefused | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, refused: SettingRefused) -> None:
        with self._lock:
            if self.first is None:
                self.first = refused


class Configured:
    """A chat client that sends one role's settings with every call: the call's own `settings` go over
    them key by key (an eval's `model_settings` over the suite's), and a refused one is named by the role.
    Everything else is the wrapped client's."""

    def __init__(
        self, client, settings: ModelSettings | None, role: str, refusals: Refusals | None = None
    ) -> None:
        self.client = client
        self.settings = settings
        self.role = role
        self.refusals = refusals
        self._merged: dict[int, tuple[ModelSettings, ModelSettings]] = {}

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def _settings(self, over: ModelSettings | None) -> ModelSettings | None:
        if self.settings is None or over is None:
            return over or self.settings
        # An eval's settings come with each of its calls: merged once per eval, not per call.
        held = self._merged.get(id(over))
        if held is None or held[0] is not over:
            held = self._merged[id(over)] = (over, self.settings.merged(over))
        return held[1]

    def _refused(self, exc: SettingRefused) -> SettingRefused:
        named = exc.of(self.role)
        if self.refusals is not None:
            self.refusals.note(named)
        return named

    def complete(self, model: str, messages: list[dict], *, settings: ModelSettings | None = None, **kwargs):
        sent = self._settings(settings)
        if sent is not None:
            kwargs["settings"] = sent
        try:
            return self.client.complete(model, messages, **kwargs)
        except SettingRefused as exc:
            raise self._refused(exc) from None

    def __repr__(self) -> str:
        return f"Configured({self.client!r}, role={self.role})"


class AsyncConfigured(Configured):
    """A Configured client whose calls can also be awaited, for a client that has `acomplete`."""

    async def acomplete(
        self, model: str, messages: list[dict], *, settings: ModelSettings | None = None, **kwargs
    ) -> Completion:
        sent = self._settings(settings)
        if sent is not None:
            kwargs["settings"] = sent
        try:
            return await self.client.acomplete(model, messages, **kwargs)
        except SettingRefused as exc:
            raise self._refused(exc) from None


def configured(client, settings: ModelSettings | None, role: str, refusals: Refusals | None = None):
    """`client` sending `settings` as `role`; the client itself when there is nothing to send or note."""
    if (settings is None or settings.is_empty()) and refusals is None:
        return client
    kind = AsyncConfigured if hasattr(client, "acomplete") else Configured
    return kind(client, None if settings is None or settings.is_empty() else settings, role, refusals)


# How results.json and the run page name each role's settings, and the suite key each comes from.
REPORTED = {"model": "model_settings", "judge": "judge_settings", "user": "user_settings"}


def settings_report(suite, options: dict | None = None) -> dict[str, dict] | None:
    """The settings a run sends, per role ({model, judge, user}, only those set): the suite's (any object
    with the three settings keys, or a report of them as this returns) with a launch's `options` over them
    (a RunOptions dump). None when no role has any. An eval's own `model_settings` go over these in its
    conversations."""
    report: dict[str, dict] = {}
    for role, key in REPORTED.items():
        own = suite.get(role) if isinstance(suite, dict) else getattr(suite, key, None)
        own = ModelSettings.model_validate(own) if isinstance(own, dict) else own
        over = (options or {}).get(key)
        over = ModelSettings.model_validate(over) if isinstance(over, dict) else over
        settings = own.merged(over) if own is not None else over
        if settings is not None and not settings.is_empty():
            report[role] = settings.model_dump(mode="json", exclude_none=True)
    return report or None
