"""The endpoint checks of engine.endpoint_checks against the endpoints the admin defines, for views and API."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from engine import endpoint_checks
from engine.calibration import CalibrationSuite
from engine.clients import MOCK
from engine.codegrade import policy as code_policy
from engine.schema import Suite
from engine.source import SuiteProblem

from . import selectors
from .endpoints import build_registry
from .models import Endpoint

RECENT_RUNS_READ = 200
MODELS_PER_ENDPOINT = 5


@dataclass
class SuiteRoutes:
    """Where a suite's model references go ("model `x` → fake (http://…)"), and what looks likely to fail."""

    lines: list[endpoint_checks.RouteLine] = field(default_factory=list)
    warnings: list[SuiteProblem] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " · ".join(str(line) for line in self.lines)


def suite_routes(spec: Suite, source: str | None = None, model: str | None = None) -> SuiteRoutes:
    """`source`: the suite's text, to place each warning on its line; `model`: a launch's override."""
    registry = build_registry()
    locate = endpoint_checks.locator(source) if source else None
    warnings = endpoint_checks.warnings(spec, registry, model, locate=locate)
    if not settings.EVALSITE_CODE_GRADERS:
        warnings = [*code_policy.refusals(spec, locate), *warnings]
    if isinstance(spec, CalibrationSuite):  # samples it skips: the editor and the API show them with the rest
        warnings = [*spec.calibration.warnings, *warnings]
    return SuiteRoutes(lines=endpoint_checks.routes(spec, registry, model), warnings=warnings)


def model_choices(user, spec: Suite | None) -> list[tuple[str, str]]:
    """What the launch form's model field suggests, as (value, label): the mock, the suite's model, each
    named endpoint as `name/` with the models the user's recent runs used on it, and the default endpoint's."""
    recent = selectors.recent_models(user, RECENT_RUNS_READ)
    used: dict[str, list[str]] = {}
    for endpoint_name, model in recent:
        models = used.setdefault(endpoint_name, [])
        if model not in models and len(models) < MODELS_PER_ENDPOINT:
            models.append(model)
    choices: dict[str, str] = {MOCK: "built-in mock: offline, free"}
    if spec is not None and spec.model:
        choices.setdefault(spec.model, "the suite's model")
    for endpoint in Endpoint.objects.order_by("name"):
        choices.setdefault(f"{endpoint.name}/", f"{endpoint.base_url} — type the model id after the /")
        for model in used.get(endpoint.name, []):
            choices.setdefault(model, f"used on {endpoint.name}")
    for endpoint_name, models in used.items():
        for model in models:
            choices.setdefault(model, f"used on {endpoint_name}")
    return list(choices.items())


def probe(endpoint: Endpoint) -> endpoint_checks.ProbeResult:
    """Test an admin-defined endpoint; a model a run used on it stands in when it serves no /models."""
    registry = build_registry()
    last = selectors.last_model_on(endpoint)
    model = registry.resolve(last)[1] if last is not None else None
    return endpoint_checks.probe(endpoint.to_config(), model=model)
