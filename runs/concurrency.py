"""What an endpoint's cap allows a run: a launch asking more is refused in one line that says where the cap
is set; a matrix's variants on one endpoint share its slots, and say so; a run whose endpoint's cap was
lowered under it says what it plays at. Dispatch (runs.worker.scheduling) holds every run to the same caps.

On a server an endpoint's cap is shared by every run on it, so a launch cannot raise it for itself (as
`evalsite run --concurrency N` raises the default endpoint's on one's own machine): the admin sets a named
endpoint's, the environment the default one's (EVALSITE_DEFAULT_CONCURRENCY).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from engine.clients import DEFAULT, MOCK, EndpointRegistry

# A launch that asks for no concurrency plays this many at once, held to its endpoint's cap: a default is no
# demand, so it is never refused.
DEFAULT_CONCURRENCY = 10
MAX_CONCURRENCY = settings.EVALSITE_MAX_RUN_CONCURRENCY


def endpoint_cap(registry: EndpointRegistry, name: str) -> int | None:
    """Conversations the endpoint allows in flight, across every run on it; None for the mock, which has no
    limit but each run's own. An endpoint no longer defined allows one at a time."""
    if name == MOCK:
        return None
    endpoint = registry.endpoint(name)
    return endpoint.max_concurrency if endpoint else 1


def endpoint_words(name: str) -> str:
    return "the default endpoint" if name == DEFAULT else f"the endpoint {name}"


def where_set(name: str) -> str:
    """Where the endpoint's cap is set, for a person who may raise it."""
    if name == DEFAULT:
        return "EVALSITE_DEFAULT_CONCURRENCY, in the server's environment"
    return f"its max concurrency, on its page in the admin: Endpoints → Endpoints → {name}"


def refusal(asked: int, registry: EndpointRegistry, name: str) -> str | None:
    """Why a launch asking `asked` conversations at once on the endpoint `name` may not start; None when it
    may. One line, naming the endpoint, its cap and where the cap is set."""
    if asked < 1:
        return f"concurrency {asked}: give 1 or more; nothing was started"
    if asked > MAX_CONCURRENCY:
        return (
            f"concurrency {asked}: a run may have at most {MAX_CONCURRENCY} conversations in flight on this "
            "server (EVALSITE_MAX_RUN_CONCURRENCY, in the server's environment); nothing was started"
        )
    cap = endpoint_cap(registry, name)
    if cap is None or asked <= cap:
        return None
    return (
        f"concurrency {asked}: {endpoint_words(name)} allows {cap} at once ({where_set(name)}); launch at {cap} "
        "or fewer, or raise it there; nothing was started"
    )


def unasked(registry: EndpointRegistry, name: str, wanted: int = DEFAULT_CONCURRENCY) -> int:
    """The concurrency of a run whose launch asked for none (or a re-grade, which keeps its source's): `wanted`,
    held to the endpoint's cap, so that the run says what it plays at."""
    cap = endpoint_cap(registry, name)
    return max(1, min(wanted, MAX_CONCURRENCY, cap if cap is not None else wanted))


def held(registry: EndpointRegistry, name: str, concurrency: int) -> str | None:
    """What holds a run below its concurrency now ("held to 20 by endpoint fk"): its endpoint's cap, lowered
    since the launch; None when the cap allows it."""
    cap = endpoint_cap(registry, name)
    if cap is None or cap >= concurrency:
        return None
    return f"held to {cap} by {'the default endpoint' if name == DEFAULT else f'endpoint {name}'}"


@dataclass(frozen=True)
class Shared:
    """An endpoint whose cap the variants of a matrix on it share, being less than they ask together."""

    endpoint: str
    allows: int
    variants: int
    text: str


def shared(registry: EndpointRegistry, runs: Iterable[tuple[str, int]]) -> list[Shared]:
    """The endpoints whose slots a matrix's variants share: `runs` as (endpoint name, concurrency), a variant
    each. Each variant plays at most its concurrency; together they play at most the endpoint's cap."""
    counts: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    for name, concurrency in runs:
        counts[name] += 1
        asked[name] += concurrency
    found = []
    for name, count in counts.items():
        cap = endpoint_cap(registry, name)
        if count > 1 and cap is not None and asked[name] > cap:
            label = "the default endpoint" if name == DEFAULT else name
            text = f"{label} allows {cap} at once, shared by its {count} variants"
            found.append(Shared(endpoint=name, allows=cap, variants=count, text=text))
    return found


@dataclass(frozen=True)
class Hint:
    """The launch form's concurrency field for the endpoints chosen: its highest value, the value it starts at,
    and what the endpoints allow, in words ("" when no endpoint limits it)."""

    max: int
    initial: int
    text: str


def hint(registry: EndpointRegistry, names: list[str]) -> Hint:
    """The concurrency field's hint for a launch on these endpoints, one name a variant."""
    highest = MAX_CONCURRENCY
    words = []
    for name, count in Counter(names).items():
        cap = endpoint_cap(registry, name)
        if cap is None:
            continue
        highest = min(highest, cap)
        label = "the default endpoint" if name == DEFAULT else name
        said = f"{label} allows up to {cap} at once"
        if name == DEFAULT:
            said += " (EVALSITE_DEFAULT_CONCURRENCY)"
        if count > 1:
            said += f", shared by the {count} variants on it"
        words.append(said)
    highest = max(1, highest)
    return Hint(max=highest, initial=min(DEFAULT_CONCURRENCY, highest), text="; ".join(words))
