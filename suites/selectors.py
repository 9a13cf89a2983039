"""Reads for suites, scoped by project: a suite of a project the user is not a member of is a 404, and a role
too low for the action a 403 (projects.access.check)."""

from django.db.models import Count, Max, Q, QuerySet
from django.shortcuts import get_object_or_404

from projects.access import check
from projects.roles import Can

from .models import Suite, SuiteVersion


def suites_in(project) -> QuerySet[Suite]:
    """The project's suites, whoever made them, with their version count and latest number on the editor's
    line (CI's versions are listed apart, never the latest)."""
    on_line = Q(versions__ref="")
    return Suite.objects.filter(project=project).annotate(
        version_count=Count("versions", filter=on_line), latest=Max("versions__number", filter=on_line)
    )


def get_suite_for_user(user, public_id, can: Can = Can.VIEW) -> Suite:
    suite = get_object_or_404(Suite, public_id=public_id)
    check(user, suite.project_id, can)
    return suite


def get_version_for_user(user, public_id, number: int, can: Can = Can.VIEW) -> SuiteVersion:
    version = get_object_or_404(
        SuiteVersion.objects.select_related("suite"), suite__public_id=public_id, number=number
    )
    check(user, version.suite.project_id, can)
    return version


def version_of(suite: Suite, number: int | None) -> SuiteVersion | None:
    """A suite's version by number, its latest when `number` is None; None when it has no such version."""
    if number is None:
        return suite.latest_version
    return suite.versions.filter(number=number).first()
