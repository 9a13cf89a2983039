"""A suite version's parse, kept as JSON beside it (models.ParsedVersion) so that no other process parses
its YAML again: the save that validates a version keeps what it parsed, and runs.specs reads it back (or,
for a version saved before, parses and keeps it on first load)."""

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
    """A digest of the engine's suite schema: a kept parse is read back only under the schema that wrote it.
    Computing it takes pydantic ~0.1 s, once per process (workers do it when they start)."""
    return hashlib.sha256(json.dumps(SuiteSpec.model_json_schema(), sort_keys=True).encode()).hexdigest()


def keep(version_id: int, spec: SuiteSpec) -> None:
    """Keep the parsed suite for the other processes. Without its defaults: a 3,000-eval suite is 0.5 MB of
    JSON, less than its YAML. Best effort: a reader that finds none parses the YAML. Plain suites only: a
    calibration set played as a suite carries its set beside the schema's fields
    (engine.calibration.CalibrationSuite), which the JSON would lose."""
    if type(spec) is not SuiteSpec:
        return
    parsed = spec.model_dump_json(exclude_defaults=True)
    try:
        with transaction.atomic():
            ParsedVersion.objects.update_or_create(
                version_id=version_id, defaults={"schema": schema_digest(), "suite": parsed}
            )
    except IntegrityError:
        pass  # another process kept it at the same moment
    except DatabaseError:
        log.warning("suite version %s: its parse could not be kept", version_id, exc_info=True)
