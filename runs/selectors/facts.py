"""What the pages ask of a run's suite: its parsed spec, and the SuiteFacts worked out from it once per suite
version and stored, so that no request parses a large suite again."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from django.db import DatabaseError, IntegrityError, transaction

from engine.calibration import CalibrationSuite
from engine.clients.settings import settings_report
from engine.source import SuiteError
from suites.parsed import schema_digest

from .. import specs
from ..models import Run, VersionFacts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SuiteFacts:
    """What the run page asks of a run's suite on every request, worked out once per suite version: a large
    dataset must not be walked per request."""

    sizes: dict[int, int]  # eval index -> iterations, for the evals that run more than once
    kinds: list[str]  # the conversation styles its evals use
    tags: dict[int, list[str]]  # eval index -> its tags, for the tagged evals
    grader_names: list[str]  # named graders, the suite's then its evals' own, in order
    has_gates: bool
    thresholds: dict[int, float]  # eval index -> the pass rate it needs, for the repeated evals
    eval_ids: dict[int, str]  # eval index -> its id, for the repeated evals
    evals: int
    calibration: bool  # a calibration set played as a suite: the run has a page of figures
    offers_tools: bool  # the suite or one of its evals offers tools: the table can filter by "called X"
    settings: (
        dict | None
    )  # the suite's generation settings per role (engine.clients.settings.settings_report)
    max_cost: float | None  # the suite's cost limit
    cache: dict | None  # the roles the suite's response cache answers (engine.schema.settings.CacheRoles)

    @property
    def every_eval_repeated(self) -> bool:
        return bool(self.sizes) and len(self.sizes) == self.evals


# Suite versions whose facts this process holds, the oldest dropped first.
_FACTS_HELD = 64
_facts: dict[tuple[int, str], SuiteFacts] = {}


def suite_facts(run: Run) -> SuiteFacts | None:
    """The run's SuiteFacts (None when its suite does not parse), held in this process and stored in the
    database (VersionFacts, worked out at launch), so that no web process parses a large suite to show a run."""
    version = run.suite_version
    key = (version.pk, version.sha256)
    if key not in _facts:
        facts = _stored_facts(version.pk)
        if facts is None:
            spec = suite_spec(run)
            if spec is None:
                return None
            facts = _facts_of(spec)
            _store_facts(version.pk, facts)
        if len(_facts) >= _FACTS_HELD:
            _facts.pop(next(iter(_facts)))
        _facts[key] = facts
    return _facts[key]


# The SuiteFacts fields keyed by eval index, which JSON keeps as strings.
_BY_INDEX = ("sizes", "tags", "thresholds", "eval_ids")


def _stored_facts(version_id: int) -> SuiteFacts | None:
    stored = (
        VersionFacts.objects.filter(version_id=version_id, schema=schema_digest())
        .values_list("facts", flat=True)
        .first()
    )
    if stored is None:
        return None
    for name in _BY_INDEX:
        stored[name] = {int(index): value for index, value in stored.get(name, {}).items()}
    try:
        return SuiteFacts(**stored)
    except TypeError:  # stored by code whose facts had other fields: worked out again
        return None


def _store_facts(version_id: int, facts: SuiteFacts) -> None:
    """Best effort: a reader that finds none works them out again."""
    try:
        with transaction.atomic():
            VersionFacts.objects.update_or_create(
                version_id=version_id, defaults={"schema": schema_digest(), "facts": asdict(facts)}
            )
    except IntegrityError:
        pass  # another process stored them at the same moment
    except DatabaseError:
        log.warning("suite version %s: its facts could not be stored", version_id, exc_info=True)


def _facts_of(spec) -> SuiteFacts:
    repeated = [(index, ev) for index, ev in enumerate(spec.evals) if (ev.iterations or spec.iterations) > 1]
    return SuiteFacts(
        sizes={index: ev.iterations or spec.iterations for index, ev in repeated},
        kinds=sorted({str(ev.style) for ev in spec.evals}),
        tags={index: list(ev.tags) for index, ev in enumerate(spec.evals) if ev.tags},
        grader_names=list(dict.fromkeys(name for _, name, _ in spec.named_graders())),
        has_gates=bool(spec.gates),
        thresholds={
            index: ev.pass_rate_threshold if ev.pass_rate_threshold is not None else spec.pass_rate_threshold
            for index, ev in repeated
        },
        eval_ids={index: spec.eval_id(index) for index, _ in repeated},
        evals=len(spec.evals),
        calibration=isinstance(spec, CalibrationSuite),
        offers_tools=bool(getattr(spec, "tools", None))
        or any(getattr(ev, "tools", None) for ev in spec.evals),
        settings=settings_report(spec),
        max_cost=spec.max_cost,
        cache=spec.cache.model_dump() if getattr(spec, "cache", None) is not None else None,
    )


def suite_spec(run: Run):
    """The run's parsed suite, with its variables filled as the run had them (cached per process); None
    when it does not parse (saved under an older schema)."""
    try:
        return specs.bound(run.suite_version, run.vars)
    except (SuiteError, ValueError):
        return None
