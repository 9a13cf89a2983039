"""The review queue as a team reads it: the queue's scale, who is asked to label and how far each has got,
each reviewer's labels apart, and how far any two reviewers agree."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth import get_user_model
from django.db.models import Count

from engine import agreement
from engine.schema import SCALES
from projects.models import Membership
from projects.roles import Can, Role, allows

from ..models import FINISHED, Conversation, Label, ReviewAssignment, Run
from .calibration import calibration_suite

DEFAULT_SCALE = "-3..3"  # calibrate's own scale


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


def queue_scale(run: Run, user, asked: str | None) -> tuple[str, bool]:
    """The scale the whole queue labels on, and whether the run fixes it. A calibration set's run is on the
    set's scale; otherwise the scale chosen when the queue started, else the one the reviewer was assigned,
    else the one of their latest label in the run, else calibrate's own."""
    suite = calibration_suite(run)
    if suite is not None:
        return suite.calibration.spec.all_judges[0].scale, True
    if asked in SCALES:
        return asked, False
    assigned = ReviewAssignment.objects.filter(run=run, reviewer=user).values_list("scale", flat=True).first()
    if assigned:
        return assigned, False
    latest = (
        Label.objects.filter(conversation__run=run, created_by=user)
        .order_by("-updated_at")
        .values_list("scale", flat=True)
        .first()
    )
    return latest or DEFAULT_SCALE, False


def reviewers(run: Run) -> list[dict]:
    """Everyone asked to label the run or who labelled some of it: how many of its finished conversations
    each has labelled, and on which scale each was asked to. Assigned reviewers first, then by name."""
    counts = dict(
        Label.objects.filter(conversation__run=run, conversation__status__in=FINISHED)
        .order_by()
        .values_list("created_by_id")
        .annotate(n=Count("pk"))
    )
    assigned = {a.reviewer_id: a.scale for a in ReviewAssignment.objects.filter(run=run)}
    users = get_user_model().objects.filter(pk__in=set(counts) | set(assigned))
    people = [
        {"id": u.pk, "name": u.get_username(), "labelled": counts.get(u.pk, 0), "scale": assigned.get(u.pk)}
        for u in users
    ]
    return sorted(people, key=lambda p: (p["scale"] is None, p["name"]))


def labels_by(run: Run, user_id: int) -> list[Label]:
    """One reviewer's labels on the run, in the run's order."""
    return list(
        Label.objects.filter(conversation__run=run, created_by_id=user_id)
        .select_related("conversation")
        .order_by("conversation__index", "conversation__iteration")
    )


def assignable(run: Run) -> list[Membership]:
    """Members of the run's project who may label and are not asked to yet."""
    taken = ReviewAssignment.objects.filter(run=run).values_list("reviewer_id", flat=True)
    members = Membership.objects.filter(project_id=run.project_id).exclude(user_id__in=taken)
    return [
        m
        for m in members.select_related("user").order_by("user__username")
        if allows(Role(m.role), Can.LABEL)
    ]


def inter_rater(run: Run) -> list[dict]:
    """How far each pair of reviewers agree on the conversations both labelled on one scale: the human
    baseline a judge is held to. Per pair: the number of conversations, exact agreement, agreement within one
    level (none on a pass/fail scale) and Cohen's kappa (quadratic-weighted on ordered levels, plain on
    pass/fail), on the levels a calibration compares on (engine.agreement)."""
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
                    "within_one": figures.within_one,
                    "kappa": figures.weighted_kappa,
                }  # fmt: skip
            )
    return pairs
