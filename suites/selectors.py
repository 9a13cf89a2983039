"""Reads for suites, always scoped to the user: someone else's suite is a 404, never a 403."""

from django.db.models import Count, Max, Q, QuerySet
from django.shortcuts import get_object_or_404

from .models import Suite, SuiteVersion


def suites_for(user) -> QuerySet[Suite]:
    on_line = Q(versions__ref="")  # CI's versions are listed apart, never the latest
    return Suite.objects.filter(owner=user).annotate(
        version_count=Count("versions", filter=on_line), latest=Max("versions__number", filter=on_line)
    )


def get_suite_for_user(user, public_id) -> Suite:
    return get_object_or_404(Suite, owner=user, public_id=public_id)


def get_version_for_user(user, public_id, number: int) -> SuiteVersion:
    return get_object_or_404(
        SuiteVersion.objects.select_related("suite"),
        suite__owner=user,
        suite__public_id=public_id,
        number=number,
    )


def version_of(suite: Suite, number: int | None) -> SuiteVersion | None:
    """A suite's version by number, its latest when `number` is None; None when it has no such version."""
    if number is None:
        return suite.latest_version
    return suite.versions.filter(number=number).first()
