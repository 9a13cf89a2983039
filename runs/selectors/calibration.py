"""Calibration runs and labels: a calibration set's figures from its stored judge checks, the runs it can be
compared with, the review queue of people's labels and how far reviewers agree."""

from __future__ import annotations

from collections import defaultdict

from engine import agreement
from engine.calibration import CalibrationSuite, judgement
from engine.calibration import report as calibration
from engine.calibration.report import CalibrationReport
from engine.schema import SCALES
from engine.source import SuiteError
from suites.models import Suite

from .. import specs
from ..models import FINISHED, Conversation, Label, Run, Turn


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


def labels_of(conversation: Conversation) -> list[Label]:
    return list(conversation.labels.select_related("created_by"))


def review_queue(run: Run, user) -> list[tuple[int, bool]]:
    """The run's finished conversations in order, as (id, labelled by this user)."""
    mine = set(
        Label.objects.filter(conversation__run=run, created_by=user).values_list("conversation_id", flat=True)
    )
    rows = (
        run.conversations.filter(status__in=FINISHED)
        .order_by("index", "iteration")
        .values_list("id", flat=True)
    )
    return [(pk, pk in mine) for pk in rows]


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


def inter_rater(run: Run) -> list[dict]:
    """How far each pair of reviewers agree on the conversations both labelled on one scale: the human
    baseline a judge is held to. Per pair: the number of conversations, exact agreement and Cohen's kappa."""
    by_reviewer: dict[tuple, dict[int, float]] = defaultdict(dict)
    names: dict[int, str] = {}
    for label in Label.objects.filter(conversation__run=run).select_related("created_by"):
        by_reviewer[(label.created_by_id, label.scale)][label.conversation_id] = label.score
        names[label.created_by_id] = label.created_by.get_username()
    pairs = []
    keys = sorted(by_reviewer)
    for i, (a, scale) in enumerate(keys):
        for b, other_scale in keys[i + 1 :]:
            if other_scale != scale:
                continue
            common = sorted(set(by_reviewer[(a, scale)]) & set(by_reviewer[(b, scale)]))
            if len(common) < 2:
                continue
            first = [by_reviewer[(a, scale)][pk] for pk in common]
            second = [by_reviewer[(b, scale)][pk] for pk in common]
            levels = agreement.levels_for(scale, first + second, SCALES[scale][2])
            judgements = [
                agreement.Judgement(n, 0, x, y) for n, (x, y) in enumerate(zip(first, second, strict=True))
            ]
            figures = agreement.metrics(judgements, scale, SCALES[scale][2], levels)
            pairs.append(
                {
                    "reviewers": (names[a], names[b]),
                    "scale": scale,
                    "conversations": len(common),
                    "exact_agreement": figures.exact_agreement,
                    "kappa": figures.weighted_kappa,
                }  # fmt: skip
            )
    return pairs
