"""Writes for projects: creating one (its creator is its admin) and changing its members. A project always
keeps at least one admin, so someone can still manage it. A member removed loses what their access kept
open there too: the apps that hold such things (runs: share links) receive `member_removed`."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils.text import slugify

from . import audit
from .models import Action, Membership, Project
from .roles import Role

# Sent in the removal's transaction once a membership is gone, with `membership` (its user and project) and
# `by`. Each receiver ends what the member's access kept open in the project and returns what it ended as
# audit detail ({"share_links_revoked": 2}, or {} for nothing), which the removal's event keeps.
member_removed = Signal()


class MembershipRefused(ValueError):
    """A change to a project's members that would leave it broken (no admin) or that cannot be made."""


def unique_slug(name: str) -> str:
    """A slug made from the name, numbered when another project has it."""
    base = slugify(name)[:50] or "project"
    slug, number = base, 1
    while Project.objects.filter(slug=slug).exists():
        number += 1
        slug = f"{base}-{number}"
    return slug


@transaction.atomic
def create_project(*, name: str, creator) -> Project:
    project = Project.objects.create(name=name.strip(), slug=unique_slug(name))
    Membership.objects.create(project=project, user=creator, role=Role.ADMIN)
    return project


def add_member(project: Project, user, role: Role, *, by=None) -> Membership:
    try:
        with transaction.atomic():
            membership = Membership.objects.create(project=project, user=user, role=role)
            audit.record(by, project.pk, Action.MEMBER_ADDED, user, role=role)
            return membership
    except IntegrityError:
        raise MembershipRefused(f"{user.get_username()} is already a member of {project.name}.") from None


def _last_admin(membership: Membership) -> bool:
    if membership.role != Role.ADMIN:
        return False
    others = Membership.objects.filter(project_id=membership.project_id, role=Role.ADMIN)
    return not others.exclude(pk=membership.pk).exists()


@transaction.atomic
def change_role(membership: Membership, role: Role, *, by=None) -> None:
    membership = Membership.objects.select_for_update().get(pk=membership.pk)
    if role != Role.ADMIN and _last_admin(membership):
        raise MembershipRefused("A project keeps at least one admin: make another member admin first.")
    membership.role = role
    membership.save(update_fields=["role"])
    audit.record(by, membership.project_id, Action.MEMBER_CHANGED, membership.user, role=role)


def ended_with(membership: Membership, *, by=None) -> dict:
    """What the receivers of `member_removed` ended for this removed membership, as audit detail."""
    ended: dict = {}
    for _receiver, detail in member_removed.send(sender=Membership, membership=membership, by=by):
        ended.update(detail or {})
    return ended


@transaction.atomic
def remove_member(membership: Membership, *, by=None) -> dict:
    """Remove the member; what their access kept open in the project ends with it (`ended_with`, returned)."""
    membership = Membership.objects.select_for_update().get(pk=membership.pk)
    if _last_admin(membership):
        raise MembershipRefused("A project keeps at least one admin: make another member admin first.")
    membership.delete()
    ended = ended_with(membership, by=by)
    audit.record(
        by, membership.project_id, Action.MEMBER_REMOVED, membership.user, role=membership.role, **ended
    )
    return ended
