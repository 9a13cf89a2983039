"""The response cache: a model call answered from what the same call answered before.

A call's key is a digest of everything that shapes its answer: the endpoint (its base URL and the account its
API key speaks for, or the mock and its spec), the model, the messages as sent, the tools and every other
keyword of the call (temperature, generation settings), the role that makes it (the model under test, a
judge, the simulated user) and the iteration it belongs to, so that the repeats of an eval stay independent
draws. The endpoint's name is in no key: two names for one URL and key reach the same model, and share.
Messages hold a secret as its `{{secret:NAME}}` placeholder, filled only as the model under test's client
sends them; that client's keys also hold an HMAC-SHA-256 of the values the placeholders are filled with
(`secrets_digest`, keyed by the store's `pepper`), so a changed secret asks again; the values themselves are
in no key and never stored. A store (`ResponseStore`) keeps the answers: the CLI's is a local diskcache
(`DiskStore`), the server's the database or Redis (runs.response_cache). A cached answer costs nothing: its
`Completion` says `cached`, and what it would have cost at the prices of the endpoint this run calls is
`saved_cost`, not spent (an endpoint without prices saves an unknown amount, counted 0, as its calls cost);
its tokens are still the reply's, so checks on them grade it as they did the first time.

Who plays a conversation says which iteration it is (`playing_iteration`); a role other than the client's own
is said the same way (`calling_as`), as the simulated user asks through the judge's client.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from .clients.base import Completion, EndpointConfig
from .meter import sent
from .results import Usage
from .schema.settings import CacheRoles
from .suitevars import SECRET_REF

log = logging.getLogger(__name__)

Role = Literal["model", "judge", "simulated_user"]
ROLES: tuple[Role, ...] = ("model", "judge", "simulated_user")
# What a local store keeps: answers a month old are asked again, and the whole stays under a gigabyte.
DEFAULT_TTL_SECONDS = 30 * 24 * 3600
DEFAULT_SIZE_BYTES = 1 << 30

_iteration: ContextVar[int] = ContextVar("evalsite_cache_iteration", default=0)
_role: ContextVar[Role | None] = ContextVar("evalsite_cache_role", default=None)
_tally: ContextVar[Tally | None] = ContextVar("evalsite_cache_tally", default=None)


class Tally:
    """The calls of one turn answered from the cache: each one's role and what it saved. Threads that grade
    the turn see the same Tally (they run in a copy of the turn's context), and a list append is atomic."""

    __slots__ = ("hits",)

    def __init__(self) -> None:
        self.hits: list[tuple[str, float]] = []


def tally() -> Tally:
    """A new turn begins: its cache hits are counted in the Tally returned, until the next turn's."""
    counted = Tally()
    _tally.set(counted)
    return counted


def marked(turn: Any, counted: Tally) -> Any:
    """The turn record with its cache hits noted (engine.results.TurnRecord's `cached` fields)."""
    if not counted.hits:
        return turn
    hits = list(counted.hits)
    return turn.model_copy(
        update={
            "cached": any(role == "model" for role, _ in hits),
            "cached_calls": len(hits),
            "saved_cost": round(sum(saved for _, saved in hits), 8),
        }
    )


def _hit(role: str, data: dict, prices: Any) -> Completion | None:
    """The stored answer, counted as a hit, saving what it costs at `prices` (an EndpointConfig; None: free);
    None when it cannot be read (an entry written otherwise, or damaged): a miss, which the model's answer
    then replaces."""
    try:
        completion = _answered(data, prices)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    _counted(role, completion.saved_cost)
    if isinstance(prices, EndpointConfig):
        # What it saved is unknown at an endpoint without prices, as its calls' cost is: the run says so.
        sent(prices.name, prices.priced)
    return completion


def _counted(role: str, saved: float) -> None:
    """A hit, counted in the current turn's Tally."""
    counted = _tally.get()
    if counted is not None:
        counted.hits.append((role, saved))


@contextmanager
def playing_iteration(iteration: int) -> Iterator[None]:
    """Model calls within this block belong to this iteration of their eval (0-based)."""
    token = _iteration.set(iteration)
    try:
        yield
    finally:
        _iteration.reset(token)


@contextmanager
def calling_as(role: Role) -> Iterator[None]:
    """Model calls within this block are made in this role, whichever client makes them."""
    token = _role.set(role)
    try:
        yield
    finally:
        _role.reset(token)


class ResponseStore(Protocol):
    """Where cached answers live: a JSON-ready dict per key, or None when the key is unknown or expired.

    A store may have a `pepper` (bytes kept apart from its entries): the key of the HMAC that a secret's value
    goes into the cache key through (secrets_digest), so that reading the store is not enough to test guesses
    of a weak secret against its keys."""

    def get(self, key: str) -> dict | None: ...

    def put(self, key: str, value: dict) -> None: ...


class MemoryStore:
    """A store in this process's memory (tests, and a run that asks for no persistence)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict] = {}

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def put(self, key: str, value: dict) -> None:
        self.entries[key] = value


class GuardedStore:
    """A store whose failure costs a miss, not the conversation: an answer that cannot be read (a damaged
    entry, a folder gone, a server away) is asked of the model again, and one that cannot be kept is not
    kept. The first failure is said once (`say`); the run goes on."""

    def __init__(self, inner: ResponseStore, say: Callable[[str], None]) -> None:
        self.inner = inner
        self.say = say
        self.said = False
        self.pepper = getattr(inner, "pepper", b"")

    def _failed(self, what: str, exc: Exception) -> None:
        if not self.said:
            self.said = True
            self.say(
                f"the response cache could not be {what} ({type(exc).__name__}: {exc}); the calls it cannot "
                "answer are made"
            )

    def get(self, key: str) -> dict | None:
        try:
            return self.inner.get(key)
        except Exception as exc:
            self._failed("read", exc)
            return None

    def put(self, key: str, value: dict) -> None:
        try:
            self.inner.put(key, value)
        except Exception as exc:
            self._failed("written", exc)


def open_disk_store(say: Callable[[str], None]) -> GuardedStore | None:
    """The CLI's store, guarded; None, said once, when its folder cannot be used at all (not a folder, not
    writable, not a cache): the run goes on without the cache."""
    try:
        return GuardedStore(DiskStore(), say)
    except Exception as exc:
        say(
            f"the response cache in {default_directory()} cannot be used ({type(exc).__name__}: {exc}); "
            "this run goes without it"
        )
        return None


class DiskStore:
    """The CLI's store: a diskcache under the user's cache directory, bounded in bytes, each entry kept for
    `ttl` seconds. diskcache is safe across processes, so runs side by side share it."""

    def __init__(
        self, directory: str | Path | None = None, *, ttl: float | None = None, size: int | None = None
    ):
        import diskcache  # only a run that uses the cache pays for the import

        self.ttl = ttl if ttl is not None else _env_number("EVALSITE_CACHE_TTL", DEFAULT_TTL_SECONDS)
        size_limit = size if size is not None else int(_env_number("EVALSITE_CACHE_SIZE", DEFAULT_SIZE_BYTES))
        self.cache = diskcache.Cache(str(directory or default_directory()), size_limit=size_limit)
        self.pepper = _pepper_file(Path(self.cache.directory) / "pepper")

    def get(self, key: str) -> dict | None:
        # An answer is as old as its writing says: a TTL shortened since it was kept holds for it too.
        found = self.cache.get(key)
        kept = found.get("kept_at") if isinstance(found, dict) else None
        if isinstance(kept, float) and time.time() - kept > self.ttl:
            return None
        return found

    def put(self, key: str, value: dict) -> None:
        if self.ttl > 0:  # as on the server: a TTL of 0 keeps nothing
            self.cache.set(key, {**value, "kept_at": time.time()}, expire=self.ttl)

    def purge(self) -> int:
        return self.cache.clear()

    def close(self) -> None:
        self.cache.close()


def _pepper_file(path: Path) -> bytes:
    """32 random bytes kept in `path` (readable by its owner only), made by the first process to need them."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "wb") as out:
            out.write(os.urandom(32))
    pepper = path.read_bytes()
    return pepper if len(pepper) == 32 else b""  # another process is writing it: this run goes without


def default_directory() -> Path:
    """~/.cache/evalsite/responses, or under $XDG_CACHE_HOME when it is set."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evalsite" / "responses"


def _env_number(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number < float("inf"):
        raise ValueError(f"{name}={value!r}: expected a number of at least 0")
    return number


def call_key(
    endpoint: str,
    model: str,
    messages: list[dict],
    role: str,
    iteration: int,
    *,
    secrets: str | None = None,
    **keywords: Any,
) -> str:
    """The digest a call is cached under; `secrets`: the secrets_digest of what fills the messages'
    placeholders, when the call fills them. Keywords with no value are left out, so a call that sends none of a
    setting and one that sends it as None share their answer; so are absent secrets, so a call without any
    keeps the key it always had."""
    sent = {name: _plain(value) for name, value in sorted(keywords.items()) if value is not None}
    document = {
        "endpoint": endpoint,
        "model": model,
        "messages": messages,
        "keywords": sent,
        "role": role,
        "iteration": iteration,
    }
    if secrets is not None:
        document["secrets"] = secrets
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def secrets_digest(
    messages: list[dict], environ: Mapping[str, str] | None = None, pepper: bytes = b""
) -> str | None:
    """An HMAC-SHA-256, keyed by `pepper`, of each `{{secret:NAME}}` the messages hold with the value it is
    sent as (the environment variable NAME, read as engine.suitevars.fill_secrets reads it), or None when they
    hold none. An unset one
    counts as empty: its call fails before it is answered, so nothing is kept under it."""
    names = sorted({found.group("name") for text in _texts(messages) for found in SECRET_REF.finditer(text)})
    if not names:
        return None
    env = os.environ if environ is None else environ
    filled = json.dumps([[name, env.get(name) or ""] for name in names], ensure_ascii=False)
    return hmac.new(pepper, filled.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _texts(messages: list[dict]) -> Iterator[str]:
    """The texts of the messages that may hold a placeholder: their content, or its parts' text."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            if "{{" in content:
                yield content
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str) and "{{" in part["text"]:
                    yield part["text"]


def _plain(value: Any) -> Any:
    """A keyword's value as JSON: pydantic models (generation settings) by their set fields."""
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True, mode="json") if dump is not None else value


def _stored(completion: Completion) -> dict:
    """What a store keeps of an answer: the reply and its usage, not what it cost. Another endpoint at the same
    URL may answer from it at other prices (priced()), so a cost kept here would be the wrong one there."""
    data = asdict(completion)
    data["usage"] = completion.usage.model_dump()
    data["calls"] = list(completion.calls)
    for name in ("cost", "cached", "saved_cost"):
        data.pop(name, None)
    return data


def _answered(data: dict, prices: Any) -> Completion:
    """A stored answer as a completion that spent nothing: what it costs at `prices` is saved, its latency
    none. Its usage stays the reply's own (a `max_tokens` check grades the tokens the reply holds, not the
    call's)."""
    usage = Usage.model_validate(data["usage"]) if data.get("usage") else Usage()
    completion = Completion(
        text=data["text"],
        usage=usage,
        cost=0.0,
        latency_ms=0,
        finish_reason=data.get("finish_reason"),
        refusal=data.get("refusal"),
        tool_calls=bool(data.get("tool_calls")),
        calls=tuple(data.get("calls") or ()),
    )
    return replace(completion, cached=True, saved_cost=priced(usage, prices))


def priced(usage: Usage, prices: Any) -> float:
    """What `usage` costs at an endpoint's prices (an EndpointConfig), as a call to it would have cost; 0 for
    a client without any (the mock), and for an endpoint without prices, whose calls count 0 wherever a
    cost is summed."""
    return float(prices.cost(usage)) if prices is not None and hasattr(prices, "cost") else 0.0


def endpoint_identity(client: Any, pepper: bytes = b"") -> str:
    """What names the endpoint a client calls in a key: its base URL and the account its API key speaks for,
    or the mock and the spec that makes its answers (another spec answers otherwise).

    The account is an HMAC-SHA-256 of the key's value, keyed by the store's `pepper`, never the key: one key
    is one account (an organisation, a project, a gateway's team), and the same model name can be another
    model under another account (its fine-tunes, a gateway's routing per key), which pays for its own
    answers. Two endpoints with one URL and one key share their answers whatever they are named; a key
    rotated asks again."""
    endpoint = getattr(client, "endpoint", None)
    if endpoint is not None and getattr(endpoint, "base_url", None):
        where = endpoint.base_url.rstrip("/")
        key = os.environ.get(getattr(endpoint, "api_key_env", "") or "", "")
        if not key:
            return where
        account = hmac.new(pepper, key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"{where} account:{account}"
    spec = getattr(client, "spec", None)
    if spec is not None and hasattr(spec, "model_dump_json"):
        return "mock:" + hashlib.sha256(spec.model_dump_json().encode()).hexdigest()
    return getattr(client, "label", "") or type(client).__name__


class CachingClient:
    """A chat client that answers from `store` the calls it has seen, in the roles `roles` turns on, and asks
    `inner` (then keeps its answer) otherwise. Everything else is the inner client's."""

    def __init__(
        self, inner: Any, store: ResponseStore, roles: CacheRoles, role: Role, *, first_only: bool = False
    ) -> None:
        self.inner = inner
        self.first_only = first_only
        self.store = store if isinstance(store, GuardedStore) else GuardedStore(store, log.warning)
        self.roles = roles
        self.role = role
        self.pepper = getattr(store, "pepper", b"")
        self.identity = endpoint_identity(inner, self.pepper)
        # What a hit saves: the call at this endpoint's prices, whichever endpoint's call kept the answer.
        self.prices = getattr(inner, "endpoint", None)
        # Only the model under test's client fills the suite's secrets (engine.clients.http); a judge's answer
        # reads the placeholder, whatever its value.
        self.fills_secrets = bool(getattr(inner, "secrets", False))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _key(self, model: str, messages: list[dict], keywords: dict) -> tuple[str, str | None]:
        role = _role.get() or self.role
        if not getattr(self.roles, role) or (self.first_only and _iteration.get()):
            return role, None
        secrets = None
        if self.fills_secrets:  # the secrets its messages and its headers are sent with
            settings = keywords.get("settings")
            sent_headers = (getattr(settings, "extra_headers", None) or {}).values()
            secrets = secrets_digest(
                [*messages, *({"content": value} for value in sent_headers)], pepper=self.pepper
            )
        return role, call_key(
            self.identity, model, messages, role, _iteration.get(), secrets=secrets, **keywords
        )

    def complete(self, model: str, messages: list[dict], **keywords: Any) -> Completion:
        role, key = self._key(model, messages, keywords)
        found = self.store.get(key) if key is not None else None
        if found is not None and (hit := _hit(role, found, self.prices)):
            return hit
        completion = self.inner.complete(model, messages, **keywords)
        if key is not None:
            self.store.put(key, _stored(completion))
        return completion

    def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]], Usage, float]:
        """A `semantic` check's embeddings, cached as the judge's calls are (they are the same texts' vectors
        whatever the iteration)."""
        role = _role.get() or self.role
        if not getattr(self.roles, role):
            return self.inner.embed(model, texts)
        messages = [{"role": "embedding input", "content": text} for text in texts]
        key = call_key(self.identity, model, messages, role, 0, kind="embeddings")
        found = self.store.get(key)
        if isinstance(found, dict) and isinstance(found.get("vectors"), list):
            try:
                usage = Usage.model_validate(found["usage"])
            except (KeyError, TypeError, ValueError):
                pass  # written otherwise: asked again, and kept in its place
            else:
                _counted(role, priced(usage, self.prices))
                return found["vectors"], usage, 0.0
        vectors, usage, cost = self.inner.embed(model, texts)
        self.store.put(key, {"vectors": vectors, "usage": usage.model_dump()})
        return vectors, usage, cost


class AsyncCachingClient(CachingClient):
    """A CachingClient whose chat calls can be awaited; the store is read and written in a thread, as a
    database or Redis store would hold the event loop."""

    async def acomplete(self, model: str, messages: list[dict], **keywords: Any) -> Completion:
        role, key = self._key(model, messages, keywords)
        found = await asyncio.to_thread(self.store.get, key) if key is not None else None
        if found is not None and (hit := _hit(role, found, self.prices)):
            return hit
        completion = await self.inner.acomplete(model, messages, **keywords)
        if key is not None:
            await asyncio.to_thread(self.store.put, key, _stored(completion))
        return completion


def roles_of(suite: Any) -> CacheRoles | None:
    """The roles the suite caches, or None when it caches none."""
    roles = getattr(suite, "cache", None)
    if roles is None or not (roles.model or roles.judge or roles.simulated_user):
        return None
    return roles


def first_draw_only(suite: Any, roles: CacheRoles | None) -> bool:
    """Whether only a conversation's first iteration may be answered from the cache: a calibration's repeats
    ask the judge afresh (its agreement with itself is what they measure) unless the set says `repeats:
    true`; its first answer about each sample is cached as any judge's."""
    return getattr(suite, "calibration", None) is not None and roles is not None and not roles.repeats


def caching(
    client: Any,
    store: ResponseStore | None,
    roles: CacheRoles | None,
    role: Role,
    *,
    first_only: bool = False,
) -> Any:
    """The client wrapped to answer from `store`, or the client itself when nothing is cached. `first_only`:
    only the first iteration's calls are cached (first_draw_only)."""
    if store is None or roles is None:
        return client
    cls = AsyncCachingClient if hasattr(client, "acomplete") else CachingClient
    return cls(client, store, roles, role, first_only=first_only)
