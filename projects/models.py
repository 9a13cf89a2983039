"""Projects (a team's workspace) and their members.

A project holds suites, runs, endpoints, calibration sets, labels, tokens and share links; a user may be a
member of several, each with a role (projects.roles).
"""

import uuid

from django.conf import settings
from django.db import models

from .roles import Role

DEFAULT_SLUG = "default"


class Project(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def default(cls) -> "Project":
        """The project things made without naming one go to (the one every user joined by migration)."""
        project, _ = cls.objects.get_or_create(slug=DEFAULT_SLUG, defaults={"name": "Default"})
        return project


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_once_per_project"),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.role} of {self.project}"


class Action(models.TextChoices):
    """What an audit event records; the label reads after the actor's name ("alice launched run …")."""

    LAUNCHED = "launched", "launched"
    CANCELLED = "cancelled", "cancelled"
    RETRIED = "retried", "retried the errored conversations of"
    REGRADED = "regraded", "re-graded"
    OVERRODE = "overrode", "overrode a check of"
    OVERRIDE_WITHDRAWN = "override_withdrawn", "withdrew an override of"
    LABELLED = "labelled", "labelled"
    LABELS_ADDED = "labels_added", "added labelled conversations to"
    PINNED = "pinned", "pinned as baseline"
    UNPINNED = "unpinned", "unpinned"
    SHARED = "shared", "made a share link for"
    REVOKED = "revoked", "revoked a share link for"
    DELETED = "deleted", "deleted"
    MEMBER_ADDED = "member_added", "added a member:"
    MEMBER_CHANGED = "member_changed", "changed the role of"
    MEMBER_REMOVED = "member_removed", "removed a member:"
    TOKEN_CREATED = "token_created", "made an API token:"
    TOKEN_REVOKED = "token_revoked", "revoked an API token:"


class AuditEvent(models.Model):
    """Who did what to which, and when. The target is kept as text (its kind, id and label) so that the event
    outlives what it names; the actor's username likewise outlives the user."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=20, choices=Action.choices)
    target_kind = models.CharField(max_length=40)  # the model's label, e.g. "runs.run"
    target_id = models.CharField(max_length=64)
    target_label = models.CharField(max_length=200)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            # The project's audit page: its events, newest first (filtered by action or actor).
            models.Index(fields=["project", "-created_at"], name="audit_project_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_name or 'someone'} {self.get_action_display()} {self.target_label}"
