"""Where a suite's model references go among the endpoints defined now, and what looks likely to fail there:
engine.endpoint_checks against this site's registry, for the editor, the launch panel and the API. An
endpoint that belongs to one project is there for that project's suites only: to another project it is as
absent as a name no endpoint has, and a launch there that names it is refused."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from engine import endpoint_checks
from engine.calibration import CalibrationSuite
from engine.codegrade import policy as code_policy
from engine.schema import Suite
from engine.source import SuiteProblem

from .models import Endpoint
from .registry import current_registry, project_registry


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


def project_refusal(spec: Suite, project_id: int, model: str | None = None) -> str | None:
    """Why a launch in `project_id` may not run: a model reference of it names another project's endpoint,
    which the workers would call (they read every endpoint); None when every endpoint it uses is shared or
    the project's own. Worded as for a name no endpoint has, which is what the project's pages say of it."""
    registry = current_registry()
    names = {registry.resolve(item.ref)[0]: item.ref for item in endpoint_checks.model_refs(spec, model)}
    foreign = Endpoint.objects.filter(name__in=names, project__isnull=False).exclude(project_id=project_id)
    name = foreign.order_by("name").values_list("name", flat=True).first()
    if name is None:
        return None
    return f"`{names[name]}`: this project has no endpoint named `{name}`"
