"""Where a suite's model references go among the endpoints defined now, and what looks likely to fail there:
engine.endpoint_checks against this site's registry, for the editor, the launch panel and the API. An
endpoint that belongs to one project is there for that project's suites only: to another project it is as
absent as a name no endpoint has, and a launch there that names either is refused."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from engine import endpoint_checks
from engine.calibration import CalibrationSuite
from engine.codegrade import policy as code_policy
from engine.schema import Suite
from engine.source import SuiteProblem, format_path

from .registry import project_registry


@dataclass
class SuiteRoutes:
    """A suite's route lines ("model `x` → fake (http://…)") and located warnings about them."""

    lines: list[endpoint_checks.RouteLine] = field(default_factory=list)
    warnings: list[SuiteProblem] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " · ".join(str(line) for line in self.lines)


def suite_routes(
    spec: Suite, source: str | None = None, model: str | None = None, project_id: int | None = None
) -> SuiteRoutes:
    """`source`: the suite's text, to place each warning on its line; `model`: a launch's override;
    `project_id`: the project the suite is in (None: a user in none), whose endpoints are those it may use
    (project_registry): a reference to another project's reads as one to an endpoint that does not exist."""
    registry = project_registry(project_id)
    locate = endpoint_checks.locator(source) if source else None
    refs = endpoint_checks.model_refs(spec, model)  # walked once: a dataset's evals are many
    warnings = endpoint_checks.warnings(spec, registry, model, locate=locate, refs=refs)
    if not settings.EVALSITE_CODE_GRADERS:
        warnings = [*code_policy.refusals(spec, locate), *warnings]
    if isinstance(spec, CalibrationSuite):  # samples it skips: the editor and the API show them with the rest
        warnings = [*spec.calibration.warnings, *warnings]
    return SuiteRoutes(lines=endpoint_checks.routes(spec, registry, model, refs=refs), warnings=warnings)


def endpoint_refusal(
    spec: Suite, project_id: int | None, model: str | None = None, *, model_called: bool = True
) -> str | None:
    """Why a launch in `project_id` may not run: a model reference of it (the model under test, a judge, a
    simulated user's, …) whose `name/` prefix names no endpoint the project may use, a typo or another
    project's endpoint alike, which would otherwise go whole to the default endpoint. One line naming where
    the suite names it and listing the endpoints the project may use (engine.endpoint_checks.no_endpoint);
    None when every reference goes somewhere. `model_called`: False for a re-grade, which never calls the
    model under test (its judge, when that is the same model, is still checked)."""
    registry = project_registry(project_id)
    for item in endpoint_checks.model_refs(spec, model):
        if item.role == "model" and not model_called:
            continue
        if message := endpoint_checks.no_endpoint(registry, item.ref, project=True):
            where = format_path(item.path) if item.path else item.role
            return f"{where} {message}"
    return None
