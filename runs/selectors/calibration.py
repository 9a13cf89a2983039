"""Calibration runs: a calibration set's figures from its stored judge checks, the runs it can be compared
with, and the sets a reviewer's labels can be added to."""

from __future__ import annotations

from engine.calibration import CalibrationSuite, judgement
from engine.calibration import report as calibration
from engine.calibration.report import CalibrationReport
from engine.source import SuiteError
from suites.models import Suite

from .. import specs
from ..models import FINISHED, Run, Turn


def calibration_suite(run: Run) -> CalibrationSuite | None:
    """The run's calibration set played as a suite, or None when the run is of an ordinary suite."""
    try:
        spec = specs.suite(run.suite_version)
    except SuiteError:
        return None
    return spec if isinstance(spec, CalibrationSuite) else None


def calibration_report(run: Run, suite: CalibrationSuite) -> CalibrationReport:
    """The figures of a calibration run, from each finished conversation's stored judge check (two queries)."""
    finished = {
        (row["id"]): row
        for row in run.conversations.filter(status__in=FINISHED).values("id", "index", "iteration", "error")
    }
    first_checks = {
        turn["conversation_id"]: (turn["record"].get("checks") or [None])[0]
        for turn in Turn.objects.filter(conversation_id__in=list(finished), position=1).values(
            "conversation_id", "record"
        )
    }
    judged = [
        judgement(suite, row["index"], row["iteration"], first_checks.get(pk), row["error"])
        for pk, row in finished.items()
    ]
    return calibration.report(suite.calibration, judged)


def other_calibrations(run: Run, limit: int = 20) -> list[Run]:
    """The finished runs of the same suite (any version) that a calibration can be compared with, newest first."""
    return list(
        Run.objects.filter(suite_version__suite=run.suite_version.suite_id, status__in=FINISHED)
        .exclude(pk=run.pk)
        .select_related("suite_version")
        .order_by("-created_at")[:limit]
    )


def calibration_sets_in(project_id: int) -> list:
    """The project's suites whose latest version is a calibration set: where its labels can be added."""
    out = []
    for suite in Suite.objects.filter(project_id=project_id).prefetch_related("versions"):
        version = suite.latest_version
        if version is None:
            continue
        try:
            spec = specs.suite(version)
        except SuiteError:
            continue
        if isinstance(spec, CalibrationSuite):
            out.append(suite)
    return out
