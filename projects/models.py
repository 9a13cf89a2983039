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
