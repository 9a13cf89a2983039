"""Where a suite's model references go among the endpoints defined now, and what looks likely to fail there:
engine.endpoint_checks against this site's registry, for the editor, the launch panel and the API. An
endpoint that belongs to one project is there for that project's suites only: another's launch is refused."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from engine import endpoint_checks
from engine.calibration import CalibrationSuite
from engine.codegrade import policy as code_policy
from engine.schema import Suite
from engine.source import SuiteProblem, format_path

from .models import Endpoint
from .registry import current_registry


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
    `project_id`: the project the suite is in, whose launches may not use another project's endpoints."""
    registry = current_registry()
    locate = endpoint_checks.locator(source) if source else None
    refs = endpoint_checks.model_refs(spec, model)  # walked once: a dataset's evals are many
    warnings = endpoint_checks.warnings(spec, registry, model, locate=locate, refs=refs)
    if project_id is not None:
        warnings = [*_elsewhere(refs, registry, project_id, locate), *warnings]
    if not settings.EVALSITE_CODE_GRADERS:
        warnings = [*code_policy.refusals(spec, locate), *warnings]
    if isinstance(spec, CalibrationSuite):  # samples it skips: the editor and the API show them with the rest
        warnings = [*spec.calibration.warnings, *warnings]
    return SuiteRoutes(lines=endpoint_checks.routes(spec, registry, model, refs=refs), warnings=warnings)


def _other_projects_endpoints(
    refs: list[endpoint_checks.ModelRef], registry, project_id: int
) -> dict[str, str]:
    """The endpoints among `refs`' that belong to another project than `project_id`: name -> a reference."""
    names = {registry.resolve(item.ref)[0]: item.ref for item in refs}
    foreign = Endpoint.objects.filter(name__in=names, project__isnull=False).exclude(project_id=project_id)
    return {name: names[name] for name in foreign.values_list("name", flat=True)}


def _not_here(name: str) -> str:
    return f"the endpoint `{name}` belongs to another project: only that project's suites may use it"


def _elsewhere(refs: list[endpoint_checks.ModelRef], registry, project_id: int, locate) -> list[SuiteProblem]:
    foreign = _other_projects_endpoints(refs, registry, project_id)
    found = []
    for item in refs:
        name = registry.resolve(item.ref)[0]
        if name in foreign:
            foreign.pop(name)  # once per endpoint, where the suite first names it
            line, column = locate(item.path) if locate is not None and item.path else (0, 0)
            path = format_path(item.path) if item.path else item.role
            found.append(SuiteProblem(line, column, path, _not_here(name)))
    return found


def project_refusal(spec: Suite, project_id: int, model: str | None = None) -> str | None:
    """Why a launch in `project_id` may not run, when a model reference of it goes to an endpoint of another
    project; None when every endpoint it uses is shared or the project's own."""
    registry = current_registry()
    foreign = _other_projects_endpoints(endpoint_checks.model_refs(spec, model), registry, project_id)
    if not foreign:
        return None
    name, ref = sorted(foreign.items())[0]
    return f"`{ref}`: {_not_here(name)}"
