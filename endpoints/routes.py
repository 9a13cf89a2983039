"""Where a suite's model references go among the endpoints defined now, and what looks likely to fail there:
engine.endpoint_checks against this site's registry, for the editor, the launch panel and the API."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from engine import endpoint_checks
from engine.calibration import CalibrationSuite
from engine.codegrade import policy as code_policy
from engine.schema import Suite
from engine.source import SuiteProblem

from .registry import current_registry


@dataclass
class SuiteRoutes:
    """A suite's route lines ("model `x` → fake (http://…)") and located warnings about them."""

    lines: list[endpoint_checks.RouteLine] = field(default_factory=list)
    warnings: list[SuiteProblem] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " · ".join(str(line) for line in self.lines)


def suite_routes(spec: Suite, source: str | None = None, model: str | None = None) -> SuiteRoutes:
    """`source`: the suite's text, to place each warning on its line; `model`: a launch's override."""
    registry = current_registry()
    locate = endpoint_checks.locator(source) if source else None
    warnings = endpoint_checks.warnings(spec, registry, model, locate=locate)
    if not settings.EVALSITE_CODE_GRADERS:
        warnings = [*code_policy.refusals(spec, locate), *warnings]
    if isinstance(spec, CalibrationSuite):  # samples it skips: the editor and the API show them with the rest
        warnings = [*spec.calibration.warnings, *warnings]
    return SuiteRoutes(lines=endpoint_checks.routes(spec, registry, model), warnings=warnings)
