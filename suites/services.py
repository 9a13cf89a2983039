"""Writes for suites. A save validates first; a broken suite creates nothing and leaves the last version."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from engine.loader import SuiteError, load_suite
from engine.schema import Suite as SuiteSpec

from .models import Suite, SuiteVersion


def validate_source(source: str | bytes, filename: str = "suite.yaml") -> SuiteSpec:
    """Parse and validate; raises engine.loader.SuiteError with located problems."""
    return load_suite(source, filename)


@transaction.atomic
def save_version(*, suite: Suite, source: str, user, note: str = "") -> SuiteVersion:
    """Validate `source` and store it as the suite's next version. Raises SuiteError and stores nothing."""
    spec = validate_source(source)
    latest = suite.versions.select_for_update().order_by("-number").first()
    if latest is not None and latest.source == source:
        return latest  # saving unchanged text is not a new version
    version = SuiteVersion.objects.create(
        suite=suite, number=(latest.number + 1) if latest else 1, source=source, created_by=user, note=note
    )
    if spec.description is not None and spec.description != suite.description:
        suite.description = spec.description
    suite.save(update_fields=["description", "updated_at"])
    return version


@transaction.atomic
def create_suite(*, owner, source: str, note: str = "") -> Suite:
    """Create a suite named after the YAML's `name`. Raises SuiteError, or ValueError for a taken name."""
    spec = validate_source(source)
    try:
        with transaction.atomic():
            suite = Suite.objects.create(owner=owner, name=spec.name, description=spec.description or "")
    except IntegrityError:
        raise ValueError(f"you already have a suite named {spec.name!r}") from None
    save_version(suite=suite, source=source, user=owner, note=note or "created")
    return suite


__all__ = ["SuiteError", "create_suite", "save_version", "validate_source"]
