"""A suite version's parse, stored as JSON beside it (models.ParsedVersion) so that no other process parses
its YAML again: the save that validates a version stores what it parsed, and runs.specs reads it back (or,
for a version with none stored, parses and stores it on first load)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging

from django.db import DatabaseError, IntegrityError, transaction

from engine.schema import Suite as SuiteSpec

from .models import ParsedVersion

log = logging.getLogger(__name__)


@functools.cache
def schema_digest() -> str:
    """A digest of the engine's suite schema: a stored parse is read back only under the schema that wrote it.
    Computed once per process (workers do it when they start)."""
    return hashlib.sha256(json.dumps(SuiteSpec.model_json_schema(), sort_keys=True).encode()).hexdigest()


def store_parse(version_id: int, spec: SuiteSpec) -> None:
    """Store the parsed suite for the other processes, without its defaults (smaller than its YAML). Best
    effort: a reader that finds none parses the YAML. Plain suites only: a calibration set played as a suite
    carries its set beside the schema's fields (engine.calibration.CalibrationSuite), which JSON would lose."""
    if type(spec) is not SuiteSpec:
        return
    parsed = spec.model_dump_json(exclude_defaults=True)
    try:
        with transaction.atomic():
            ParsedVersion.objects.update_or_create(
                version_id=version_id, defaults={"schema": schema_digest(), "suite": parsed}
            )
    except IntegrityError:
        pass  # another process stored it at the same moment
    except DatabaseError:
        log.warning("suite version %s: its parse could not be stored", version_id, exc_info=True)
