"""The launch panel of a suite's editor: its form, the models it suggests, and where the chosen one goes; and
what a launch may cost, as the panel says it while the form is filled and as the API's launch answers it."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import yaml
from django import forms
from django.http import HttpRequest
from pydantic import ValidationError

from endpoints.models import Endpoint
from endpoints.registry import project_registry
from endpoints.routes import suite_routes
from engine import cost
from engine.cache import roles_of
from engine.clients import MOCK
from engine.errors import error_words, unknown_key_message
from engine.matrix import SETTING_MARK, Variant, VariantError, parse_variants
from engine.options import RunOptions, apply
from engine.schema import Suite as SuiteSpec
from engine.schema.settings import ModelSettings
from engine.source import SuiteError, load_typed_yaml

from . import concurrency as caps
from . import selectors, specs
from .models import Run
from .services import MAX_CONCURRENCY

RECENT_RUNS_READ = 200
MODELS_PER_ENDPOINT = 5
# The launch form's field for the suite variable NAME is `var-NAME` (engine.suitevars).
VAR_FIELD = "var-"


def launch_vars(data) -> dict[str, str]:
    """The suite variables a launch form gave: a field left blank gives none (the default applies, and a
    variable without one is refused, named)."""
    return {
        key.removeprefix(VAR_FIELD): value
        for key, value in data.items()
        if key.startswith(VAR_FIELD) and value.strip()
    }


SETTINGS_TEXT_MAX = 10_000


def settings_from_text(text: str) -> ModelSettings | None:
    """A settings field's YAML (or JSON) mapping as ModelSettings; None when blank. A ValidationError of the
    form names the key and the line it is on."""
    if not text.strip():
        return None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = load_typed_yaml(text)
    except SuiteError as exc:
        problem = exc.problems[0]
        where = f"line {problem.line}, {problem.path}" if problem.path else f"line {problem.line}"
        raise forms.ValidationError(f"{where}: {problem.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise forms.ValidationError(
            f"{where}not YAML or JSON ({getattr(exc, 'problem', None) or exc})"
        ) from None
    if not isinstance(data, dict):
        raise forms.ValidationError("write a mapping, e.g. {temperature: 0.2, max_tokens: 500}")
    try:
        return ModelSettings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(map(str, error["loc"]))
        lines = {key.value: key.start_mark.line + 1 for key, _ in getattr(node, "value", ())}
        line = lines.get(str(error["loc"][0])) if error["loc"] else None
        where = f"line {line}, {path}" if line else path
        message = unknown_key_message(path) if error["type"] == "extra_forbidden" else error_words(error)
        raise forms.ValidationError(f"{where}: {message}") from None


class SettingsField(forms.CharField):
    """Generation settings as a YAML or JSON mapping (engine.schema.settings.ModelSettings)."""

    def __init__(self, **kwargs):
        super().__init__(
            required=False, strip=True, max_length=SETTINGS_TEXT_MAX, widget=forms.Textarea, **kwargs
        )

    def clean(self, value):
        return settings_from_text(super().clean(value) or "")


class LaunchForm(forms.Form):
    model = forms.CharField(max_length=200, required=False, strip=True)
    # More variants (engine.matrix), one a line: with any, the launch is a matrix of a run per variant.
    compare = forms.CharField(max_length=4000, required=False, strip=True, widget=forms.Textarea)
    # Blank: the default, held to the endpoint's cap (runs.concurrency); a number more than it allows is refused.
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, required=False)
    version = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)
    # Generation settings over the suite's, key by key (engine.options).
    model_settings = SettingsField()
    judge_settings = SettingsField()
    user_settings = SettingsField()
    # Over the suite's `max_cost` (engine.options): once the run has spent this much, nothing more is played.
    max_cost = forms.FloatField(required=False, min_value=0.01, label="Cost limit (USD)")
    cache = forms.BooleanField(required=False, label="Use the response cache")

    def __init__(self, *args, versions: list[int] | tuple[int, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["version"].choices = [(number, f"v{number}") for number in versions]

    @property
    def settings_given(self) -> bool:
        """Whether the settings fields hold anything (or an error): the form shows them open then."""
        fields = (self["model_settings"], self["judge_settings"], self["user_settings"])
        return any(field.value() or field.errors for field in fields)

    def options(self, cache: bool | None = None) -> RunOptions | None:
        """What the launch sets over the suite (engine.options); None when it sets nothing. `cache`: the
        response cache turned on or off for every role (cache_option), None to leave the suite's."""
        data = self.cleaned_data
        options = RunOptions.model_validate(
            {
                "model_settings": data.get("model_settings"),
                "judge_settings": data.get("judge_settings"),
                "user_settings": data.get("user_settings"),
                "max_cost": data.get("max_cost") or None,
                **({"cache": cache} if cache is not None else {}),
            }
        )
        return None if options.is_empty() else options


def cache_option(form: LaunchForm, spec: SuiteSpec | None) -> bool | None:
    """What the launch sets over the suite's `cache`: None when the box says what the suite says (a suite's
    choice per role stays), else on or off for every role. A form without the box (a version's Run button)
    leaves the suite's."""
    if "cache-shown" not in form.data:
        return None
    wanted = bool(form.cleaned_data.get("cache"))
    return None if spec is not None and wanted == (roles_of(spec) is not None) else wanted


def as_launched(form: LaunchForm, spec: SuiteSpec | None) -> SuiteSpec | None:
    """The suite as the form filled so far would launch it, for its estimate: the settings typed (a
    max_tokens caps its replies) and the cache box (engine.cost says the cache may answer some calls) over
    its own keys. An unfilled form, the page's first, launches the suite as it is."""
    if spec is None or not form.is_bound:
        return spec
    form.is_valid()
    typed = {key: form.cleaned_data.get(key) for key in ("model_settings", "judge_settings", "user_settings")}
    cache = cache_option(form, spec)
    if cache is not None:
        typed["cache"] = cache
    return apply(spec, RunOptions.model_validate(typed))


def launch_variants(form: LaunchForm, spec: SuiteSpec | None) -> list[Variant]:
    """The variants a launch names: the model field (blank: the suite's model) and each line of `compare`.
    One variant without settings is an ordinary run; more are a matrix. Raises VariantError."""
    first = form.cleaned_data.get("model") or (spec.model if spec is not None else None) or ""
    more = (form.cleaned_data.get("compare") or "").splitlines()
    if not any(line.strip() for line in more):
        return parse_variants([first], split=False) if SETTING_MARK in first else []
    if not first:
        raise VariantError("the suite names no model: choose the first model to compare")
    return parse_variants([first, *more], split=False)


def model_choices(user, spec: SuiteSpec | None, project_id: int | None = None) -> list[tuple[str, str]]:
    """What the launch form's model field suggests, as (value, label): the mock, the suite's model, each
    named endpoint the project may use as `name/` with the models the user's recent runs used on it, and the
    default endpoint's."""
    recent = selectors.recent_models(user, RECENT_RUNS_READ)
    used: dict[str, list[str]] = {}
    for endpoint_name, model in recent:
        models = used.setdefault(endpoint_name, [])
        if model not in models and len(models) < MODELS_PER_ENDPOINT:
            models.append(model)
    choices: dict[str, str] = {MOCK: "built-in mock: offline, free"}
    if spec is not None and spec.model:
        choices.setdefault(spec.model, "the suite's model")
    endpoints = list(Endpoint.objects.order_by("name"))
    elsewhere = {endpoint.name for endpoint in endpoints if not endpoint.serves(project_id)}
    for endpoint in endpoints:
        if endpoint.name in elsewhere:
            continue
        choices.setdefault(f"{endpoint.name}/", f"{endpoint.base_url} — type the model id after the /")
        for model in used.get(endpoint.name, []):
            choices.setdefault(model, f"used on {endpoint.name}")
    for endpoint_name, models in used.items():
        if endpoint_name in elsewhere:  # another project's now: a launch on it would be refused
            continue
        for model in models:
            choices.setdefault(model, f"used on {endpoint_name}")
    return list(choices.items())


def panel(
    request: HttpRequest, spec: SuiteSpec | None, form: LaunchForm, project_id: int | None = None
) -> dict:
    """The launch form's model suggestions, and where the chosen model (and the judges) will go."""
    model = (form["model"].value() or "").strip()
    declared = (spec.vars or {}) if spec is not None else {}
    routes = suite_routes(spec, model=model or None, project_id=project_id) if spec is not None else None
    cache_on = form["cache"].value() if form.is_bound else spec is not None and roles_of(spec) is not None
    return {
        "launch_cache": bool(cache_on),  # the box: as sent, else as the suite's `cache` says
        "model_choices": model_choices(request.user, spec, project_id),
        "launch_routes": routes,
        "launch_cost": launch_costs(as_launched(form, spec), model, form["compare"].value(), project_id),
        "launch_cap": launch_cap(spec, model, form["compare"].value(), project_id),
        # One field per suite variable: what was sent (after a refused launch), else its default.
        "launch_vars": [
            (name, default, request.POST.get(f"{VAR_FIELD}{name}", default or ""))
            for name, default in declared.items()
        ],
        "launch_limit": limit_note(spec, model, form["compare"].value()),
    }


def launch_cap(spec: SuiteSpec | None, model: str, compare: str | None, project_id: int | None) -> caps.Hint:
    """The concurrency field's limit and hint for the model chosen (else the suite's) and each `compare` line's:
    what their endpoints allow, from those the project may use. Lines that do not parse yet count as none."""
    first = model or (spec.model if spec is not None else "") or ""
    refs = [first] if first else []
    if compare and compare.strip():
        with contextlib.suppress(VariantError):
            refs = [variant.model for variant in parse_variants([first, *compare.splitlines()], split=False)]
    registry = project_registry(project_id)
    return caps.hint(registry, [registry.resolve(ref)[0] for ref in refs])


def launch_costs(
    spec: SuiteSpec | None, model: str, compare: str | None, project_id: int | None
) -> list[tuple[str, list[str]]]:
    """What the launch may cost, as (variant, its lines): one run's estimate, or with `compare` lines a matrix's,
    one per variant and their sum. Variants that do not parse yet (typed half-way) leave the run's alone."""
    variants = typed_variants(spec, model, compare)
    if not variants:
        found = estimate(spec, model or None, project_id)
        return [("", found.lines())] if found is not None else []
    found = [(variant.name, estimate(spec, variant.model, project_id)) for variant in variants]
    return cost.variant_costs([(name, each) for name, each in found if each is not None])


def typed_variants(spec: SuiteSpec | None, model: str, compare: str | None) -> list[Variant]:
    """The matrix's variants the form names so far: the model and each `compare` line; none for a single run,
    or while they do not parse (typed half-way)."""
    if spec is None or not compare or not compare.strip():
        return []
    with contextlib.suppress(VariantError):
        return parse_variants([model or spec.model or "", *compare.splitlines()], split=False)
    return []


def limit_note(spec: SuiteSpec | None, model: str, compare: str | None) -> str:
    """What the cost limit field adds when the launch is a matrix: each variant's run has the limit of its own
    (as `evalsite run --model a,b` says, "limit $5.00 a variant"). "" for a single run."""
    variants = len(typed_variants(spec, model, compare))
    if variants < 2:
        return ""
    return (
        f"With {variants} variants, each variant's run has this limit of its own: together they may spend "
        f"{variants} times it."
    )


def estimate(spec: SuiteSpec | None, model: str | None, project_id: int | None) -> cost.Estimate | None:
    """What a run of the suite on `model` (else its own) may cost, from the prices the admin set on the
    endpoints the project may use (engine.cost); None when there is no suite to size."""
    if spec is None or not spec.evals:
        return None
    return cost.estimate(spec, project_registry(project_id).endpoint_of, model)


def launched_estimate(runs: Sequence[Run], names: Sequence[str] = ()) -> list[str]:
    """What a launched run may cost, or a matrix's runs (`names`: its variants', a line each and their sum),
    in the words `evalsite run` says it before it plays (engine.cost.before_run): from the suite as each run
    plays it (its variables, its launch's options, a variant's settings) at the prices of the endpoints its
    project may use. The API's launch answers it, so `evalsite run --server` says it as a run here does."""
    found = []
    limit = None
    for run, name in zip(runs, names or [""] * len(runs), strict=True):
        spec = specs.with_options(specs.bound(run.suite_version, run.vars), run.options)
        limit = spec.max_cost  # the launch's, over the suite's: every variant's run has the same
        found.append((name, cost.estimate(spec, project_registry(run.project_id).endpoint_of, run.model)))
    return cost.before_run(found, limit) if found else []
