"""Where a suite's model references go, and what is likely to fail there, found out before a run.

`routes(suite, registry)` says which endpoint each model reference (the model under test, the judge, a
check's, a stop condition's or a named grader's own judge, a simulated user's model, a model playing a tool)
goes to; `warnings(...)` lists what would send a run astray: a `name/` prefix that names no endpoint (a typo,
or an id such as OpenRouter's `anthropic/claude-3.5-sonnet` meant whole for the default endpoint, which is
written `default/anthropic/claude-3.5-sonnet`), which every launch refuses (`no_endpoint`), and an endpoint
whose key variable is not set. `probe(endpoint)` asks an endpoint for its models.

Plain functions, used by the editor, the launch form, the API, the admin and the CLI.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ForwardRef, Literal, TypeVar, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel

from .clients import DEFAULT, MOCK, EndpointConfig, EndpointRegistry
from .clients.answers import error_text
from .errors import written_path
from .redact import redact
from .schema import JudgeSpec, LlmTool, NamedGrader, NaturalLanguage, Simulate, Suite
from .source import SuiteError, SuiteProblem, format_path, parse_yaml, where_written

PROBE_TIMEOUT = 10.0
# Gateways whose model ids have a slash of their own (`anthropic/claude-3.5-sonnet`), as vibecheck writes them.
GATEWAY_HOSTS = frozenset({"openrouter.ai"})
ROLES = {
    JudgeSpec: "check judge",
    NaturalLanguage: "stop condition judge",
    Simulate: "simulated user",
    NamedGrader: "grader judge",
    LlmTool: "tool model",
}


@dataclass(frozen=True)
class ModelRef:
    role: str  # "model", "judge", or a role of ROLES ("check judge", "simulated user", …)
    ref: str
    path: tuple[
        str | int, ...
    ]  # where the suite names it; () when it comes from elsewhere (a launch override)


@dataclass(frozen=True)
class Route:
    """Where one model reference goes: the endpoint's name, its URL ("" for the mock) and the model id sent;
    `missing`: the `name/` prefix that names no endpoint, for a reference that goes nowhere (a launch
    refuses it)."""

    ref: str
    endpoint: str
    model: str
    base_url: str = ""
    key_env: str = ""  # the variable holding the key; "" when none is needed
    missing: str = ""

    def __str__(self) -> str:
        if self.missing:
            return f"no endpoint named `{self.missing}`"
        return f"{self.endpoint} ({self.base_url})" if self.base_url else self.endpoint


@dataclass(frozen=True)
class RouteLine:
    """One entry of "model `x` → fake (http://…) · judge `y` → default (…)"."""

    role: str
    ref: str
    route: Route
    count: int = 1  # how many places name this reference in this role

    def __str__(self) -> str:
        role = f"{self.role}s" if self.count > 1 else self.role
        times = f" (×{self.count})" if self.count > 1 else ""
        return f"{role} `{self.ref}`{times} → {self.route}"


def describe(registry: EndpointRegistry, ref: str) -> Route:
    if (prefix := refused_prefix(registry, ref)) is not None:
        return Route(ref=ref.strip(), endpoint="", model=ref.strip(), missing=prefix)
    name, model = registry.resolve(ref)
    endpoint = registry.endpoint(name) if name != MOCK else None
    if endpoint is None:
        return Route(ref=ref.strip(), endpoint=name, model=model)
    return Route(
        ref=ref.strip(), endpoint=name, model=model, base_url=endpoint.base_url, key_env=endpoint.api_key_env
    )


def model_refs(suite: Suite, model: str | None = None) -> list[ModelRef]:
    """Every model reference a run of the suite uses, with where the suite names it.

    `model`: a launch's override of the suite's model. The judge defaults to the model under test.
    """
    refs: list[ModelRef] = []
    model_ref = (model or "").strip() or suite.model
    if model_ref:
        from_suite = not (model or "").strip()
        where = ("model",) if from_suite and _named_at_top(suite, "model") else ("metadata", "model")
        refs.append(ModelRef("model", model_ref, where if from_suite else ()))
    if suite.judge:
        refs.append(ModelRef("judge", suite.judge, ("judge",)))
    elif model_ref:
        refs.append(ModelRef("judge", model_ref, ()))
    # The suite's own graders and tools, which every eval gets, then each eval's.
    for path, role, ref in _walk(suite.graders, ("graders",)):
        refs.append(ModelRef(role, ref, path))
    for path, role, ref in _walk(suite.tools, ("tools",)):
        refs.append(ModelRef(role, ref, path))
    for index, ev in enumerate(suite.evals):
        for path, role, ref in _walk(ev, ("evals", index)):
            refs.append(ModelRef(role, ref, path))
    return refs


def _named_at_top(suite: Suite, field: str) -> bool:
    return suite.metadata is None or getattr(suite.metadata, field) is None


def _walk(obj: object, path: tuple) -> Iterator[tuple[tuple, str, str]]:
    if isinstance(obj, BaseModel):
        role = ROLES.get(type(obj))
        if role is not None and obj.model:
            yield (*path, "model"), role, obj.model
        for name, key in _fields_to_walk(type(obj)):
            value = getattr(obj, name)
            if value is not None and not isinstance(value, str | int | float | bool):
                yield from _walk(value, (*path, key))
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            yield from _walk(item, (*path, index))
    elif isinstance(obj, dict):  # named graders, by name
        for key, item in obj.items():
            yield from _walk(item, (*path, key))


@functools.cache
def _fields_to_walk(cls: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """The fields of a model (name, alias) whose declared type can lead to a model reference of ROLES; a
    class the suite's schema does not declare keeps every field.

    A large suite's evals hold thousands of checks and turns, nearly all of whose fields hold text or
    nothing: visiting only the fields that can hold a reference keeps the walk quick."""
    declared, holding = _schema_holders()
    if cls not in declared:
        return tuple((name, field.alias or name) for name, field in cls.model_fields.items())
    return tuple(
        (name, field.alias or name)
        for name, field in cls.model_fields.items()
        if any(found in holding for found in _models_in(field.annotation))
    )


@functools.cache
def _schema_holders() -> tuple[frozenset[type[BaseModel]], frozenset[type[BaseModel] | None]]:
    """Every model class the suite's schema reaches, and those of them that hold (or are) a reference of
    ROLES, with None for a field that could hold anything. Worked out to a fixed point: the schema is
    recursive (checks hold checks)."""
    declared: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [Suite]
    while todo:
        cls = todo.pop()
        if cls not in declared:
            declared.add(cls)
            todo.extend(found for field in cls.model_fields.values() for found in _models_in(field.annotation)
                        if found is not None)  # fmt: skip
    holding: set[type[BaseModel] | None] = {None, *(cls for cls in declared if issubclass(cls, tuple(ROLES)))}
    grew = True
    while grew:
        grew = False
        for cls in declared - holding:
            if any(
                found in holding
                for field in cls.model_fields.values()
                for found in _models_in(field.annotation)
            ):
                holding.add(cls)
                grew = True
    return frozenset(declared), frozenset(holding)


def _models_in(annotation: object) -> Iterator[type[BaseModel] | None]:
    """The model classes a field's declared type names, through unions, lists, dicts and Annotated; None for
    a name left unresolved, which could be any. A field of `Any` holds the YAML's own values as they are,
    never a model, so it names none."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    elif isinstance(annotation, str | ForwardRef | TypeVar):
        yield None
    elif annotation is Any or get_origin(annotation) is Literal:
        return
    elif get_origin(annotation) is Annotated:
        yield from _models_in(get_args(annotation)[0])
    else:
        for argument in get_args(annotation):
            yield from _models_in(argument)


def routes(
    suite: Suite, registry: EndpointRegistry, model: str | None = None, *, refs: list[ModelRef] | None = None
) -> list[RouteLine]:
    """Which endpoint each model reference goes to, one line per distinct (role, reference). `refs`: the
    suite's model_refs, when the caller has them already (walking a large dataset's evals is slow)."""
    counts: dict[tuple[str, str], int] = {}
    for item in model_refs(suite, model) if refs is None else refs:
        counts[(item.role, item.ref)] = counts.get((item.role, item.ref), 0) + 1
    return [RouteLine(role, ref, describe(registry, ref), count) for (role, ref), count in counts.items()]


def warnings(
    suite: Suite,
    registry: EndpointRegistry,
    model: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    locate=None,
    refs: list[ModelRef] | None = None,
) -> list[SuiteProblem]:
    """What would likely fail in a run of the suite: unknown `name/` prefixes and unset key variables.

    `environ` is the workers' environment; on one machine this process's is the best stand-in.
    `locate(path) -> (line, column)` places each warning in the suite's text (0, 0 without it).
    `refs`: the suite's model_refs, when the caller has them already.
    """
    found: list[SuiteProblem] = []
    keys_checked: set[str] = set()

    def problem(item: ModelRef, message: str) -> SuiteProblem:
        line, column = locate(item.path) if locate is not None and item.path else (0, 0)
        return SuiteProblem(line, column, format_path(item.path) if item.path else item.role, message)

    reported_refs: set[str] = set()
    for item in model_refs(suite, model) if refs is None else refs:
        route = describe(registry, item.ref)
        if item.ref not in reported_refs:
            message = unknown_prefix(registry, item.ref)
            if message:
                reported_refs.add(item.ref)
                found.append(problem(item, message))
        if route.endpoint == MOCK or route.endpoint in keys_checked:
            continue
        keys_checked.add(route.endpoint)
        message = missing_key(route, environ)
        if message:
            found.append(problem(item, message))
    return found + timeout_warnings(suite, registry, locate)


def timeout_warnings(suite: Suite, registry: EndpointRegistry, locate=None) -> list[SuiteProblem]:
    """A warning for each endpoint the suite's `request_timeout` names that does not exist: its timeout
    would apply to nothing."""
    found = []
    timeouts = suite.request_timeout if isinstance(suite.request_timeout, dict) else {}
    for name in timeouts:
        if registry.endpoint(name) is None:
            path = ("request_timeout", name)
            line, column = locate(path) if locate is not None else (0, 0)
            close = closest_endpoint(registry, name)
            hint = f" (did you mean `{close}`?)" if close and close != MOCK else ""
            message = f"no endpoint is named `{name}`{hint}: this timeout applies to nothing"
            found.append(SuiteProblem(line, column, format_path(path), message))
    return found


def locator(source: str):
    """`locate` for `warnings`: a path of the suite to its line and column in `source`, parsed when first asked."""
    parsed: list = []

    def locate(path: tuple) -> tuple[int, int]:
        if not parsed:
            try:
                parsed.append(parse_yaml(source))
            except SuiteError:
                parsed.append(None)
        if parsed[0] is None:
            return 0, 0
        raw, builder = parsed[0]
        return where_written(written_path(path, raw), builder, key=False)

    return locate


def unnamed_prefix(registry: EndpointRegistry, ref: str) -> str | None:
    """The `name` of a `name/model` reference when no endpoint is named so (nor `mock`, nor `default`): a typo,
    or an id meant whole for the default endpoint, which `default/` says; every launch refuses it."""
    prefix, sep, rest = ref.strip().partition("/")
    if not (sep and rest) or prefix in (MOCK, DEFAULT) or prefix in registry.named:
        return None
    return prefix


def goes_whole(registry: EndpointRegistry) -> bool:
    """Whether an id with a slash of its own goes whole to the default endpoint: it does when that is a
    gateway whose own ids read `provider/model` (OpenRouter). Elsewhere a `name/` that names no endpoint is
    a typo far more often than an id, and `default/` sends one whole."""
    return (urlsplit(registry.default.base_url).hostname or "") in GATEWAY_HOSTS


def refused_prefix(registry: EndpointRegistry, ref: str) -> str | None:
    """The `name` of a `name/model` reference a launch refuses: no endpoint is named so, and the default
    endpoint is no gateway that takes the id whole."""
    return None if goes_whole(registry) else unnamed_prefix(registry, ref)


def closest_endpoint(registry: EndpointRegistry, prefix: str) -> str | None:
    hint = difflib.get_close_matches(prefix, [*sorted(registry.named), MOCK, DEFAULT], n=1, cutoff=0.6)
    return hint[0] if hint else None


def endpoint_names(registry: EndpointRegistry) -> str:
    """The names a `name/` prefix may take with this registry: its named endpoints, then `mock` and `default`."""
    return ", ".join(f"`{name}`" for name in [*sorted(registry.named), MOCK, DEFAULT])


def no_endpoint(registry: EndpointRegistry, ref: str, *, project: bool = False) -> str | None:
    """Why a launch refuses `ref`, in one line, when its `name/` prefix names no endpoint of `registry`: the
    name as written, the nearest endpoint's, every name it may take, and how an id with a slash of its own
    goes whole to the default endpoint; None when the reference goes somewhere. `project`: the registry is
    a project's (endpoints.registry.project_registry), and the words say so."""
    ref = ref.strip()
    prefix = refused_prefix(registry, ref)
    if prefix is None:
        return None
    close = closest_endpoint(registry, prefix)
    hint = f" (did you mean `{close}`?)" if close else ""
    lacks, may = ("this project has", "it may use") if project else ("there is", "the endpoints are")
    return (
        f"`{ref}`: {lacks} no endpoint named `{prefix}`{hint}; {may} {endpoint_names(registry)} "
        f"(`{DEFAULT}/{ref}` sends `{ref}` whole to the default endpoint)"
    )


def unknown_prefix(registry: EndpointRegistry, ref: str) -> str | None:
    """A warning when `ref` looks like `endpoint/model` but no endpoint has that name: a launch refuses it."""
    ref = ref.strip()
    prefix = unnamed_prefix(registry, ref)
    if prefix is None:
        return None
    names = sorted(registry.named)
    hint = closest_endpoint(registry, prefix)
    if hint:
        why = f"did you mean `{hint}`?"
    elif names:
        why = f"endpoints: {', '.join(names)}"
    else:
        why = "named endpoints are added in the admin, under Endpoints → Endpoints"
    if goes_whole(registry):
        return (
            f"`{ref}` goes to the default endpoint ({registry.default.base_url}) as model `{ref}`: "
            f"no endpoint is named `{prefix}` ({why})"
        )
    return (
        f"no endpoint is named `{prefix}` ({why}): a run of `{ref}` is refused; "
        f"`{DEFAULT}/{ref}` sends it whole to the default endpoint"
    )


def missing_key(route: Route, environ: Mapping[str, str] = os.environ) -> str | None:
    """A warning when the endpoint needs a key whose variable is not set here."""
    if route.endpoint == MOCK or not route.key_env or environ.get(route.key_env):
        return None
    return (
        f"{route.key_env} is not set in this server's environment (the workers' is most likely the same): "
        f"runs on `{route.endpoint}` send no key, and fail with 401 if it needs one"
    )


# --- asking an endpoint ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    message: str


def probe(
    endpoint: EndpointConfig,
    *,
    environ: Mapping[str, str] = os.environ,
    model: str | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> ProbeResult:
    """Ask the endpoint for its models; when it serves no /models, for a one-token completion of `model`.

    The key is read from the endpoint's variable and never appears in the message.
    """
    import openai  # heavy: the admin's probe needs it, `evalsite run` (which checks references here) does not

    key = environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    client = openai.OpenAI(
        base_url=endpoint.base_url,
        api_key=key or "not-set",
        max_retries=0,
        timeout=min(timeout, endpoint.timeout),
    )
    unset = (
        f" ({endpoint.api_key_env} is not set in this server's environment)"
        if endpoint.api_key_env and not key
        else ""
    )
    try:
        try:
            listed = client.get("/models", cast_to=dict)
        except openai.NotFoundError:
            listed = None
        except openai.APIStatusError as exc:
            if exc.status_code != 405:
                raise
            listed = None
        if listed is not None:
            ids = [item.get("id") for item in listed.get("data") or [] if isinstance(item, dict)]
            ids = [str(name) for name in ids if name]
            example = f", e.g. {', '.join(ids[:3])}{'…' if len(ids) > 3 else ''}" if ids else ""
            return ProbeResult(True, f"OK: {len(ids)} model{'' if len(ids) == 1 else 's'}{example}")
        if not model:
            return ProbeResult(
                False,
                f"{endpoint.base_url}/models is not served, and no run has used a model on `{endpoint.name}` "
                "yet to try a one-token completion with",
            )
        body = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
        answer = client.post("/chat/completions", body=body, cast_to=dict)
        text = ((answer.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        return ProbeResult(
            True, f"OK: /models is not served; a one-token completion from `{model}` answered “{text}”"
        )
    except openai.APIStatusError as exc:
        message = f"HTTP {exc.status_code} from {endpoint.base_url}: {error_text(exc)}{unset}"
        return ProbeResult(False, redact(message, key))
    except openai.APITimeoutError:
        return ProbeResult(False, f"no answer from {endpoint.base_url} within {client.timeout:g}s")
    except openai.APIConnectionError as exc:
        return ProbeResult(False, redact(f"cannot reach {endpoint.base_url}: {exc.__cause__ or exc}", key))
    finally:
        client.close()
