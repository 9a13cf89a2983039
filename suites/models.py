"""Suites and their immutable versions.

A Suite is a name a user edits; every save creates a new SuiteVersion holding the exact YAML. Versions are
never updated or deleted while a run points at them, so a run always records exactly what it ran.

Versions saved in the editor (or sent without a ref) are the suite's line: `ref` is blank and the latest of
them is the suite's latest. A version sent by CI under a ref (a branch, tag or commit) records what that job
ran and is never the latest: the editor, the launch form and "latest" keep reading the line. Every version
takes the suite's next number, whichever line it is on, so a number names one version of a suite.
"""

import hashlib
import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse


class Suite(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="suites")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="suites")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="suite_unique_name_per_project")
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("suites:detail", args=[self.public_id])

    @property
    def latest_version(self) -> "SuiteVersion | None":
        return self.versions.filter(ref="").order_by("-number").first()


class SuiteVersion(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    source = models.TextField(help_text="The suite's YAML, exactly as saved.")
    sha256 = models.CharField(max_length=64, editable=False)
    note = models.CharField(max_length=200, blank=True)
    # The branch, tag or commit a CI job sent this version from; blank on the suite's own line.
    ref = models.CharField(max_length=200, blank=True, default="")
    commit = models.CharField(max_length=64, blank=True, default="")  # the CI job's commit, when known
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "number"], name="suite_version_unique_number"),
        ]
        indexes = [
            # A CI launch looks for the version of this ref with the same content before it saves another.
            models.Index(fields=["suite", "ref", "sha256"], name="suite_version_ref_content"),
        ]

    def __str__(self) -> str:
        return f"{self.suite.name} v{self.number}" + (f" ({self.ref})" if self.ref else "")

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("suite versions are immutable; save a new version instead")
        if not self.sha256:
            self.sha256 = content_hash(self.source, {})
        super().save(*args, **kwargs)

    def file_map(self) -> dict[str, str]:
        return dict(self.files.values_list("name", "content"))


class ParsedVersion(models.Model):
    """A suite version as the engine parsed it, as JSON, stored by the save that validated it, or when a
    version without one is first loaded (suites.parsed, runs.specs): loading it is much faster than parsing
    the YAML. Read back only under the engine schema it was written with (`schema`, a digest of it);
    otherwise the YAML is parsed again. A table of its own, so that nothing reading versions loads it by
    accident."""

    version = models.OneToOneField(
        SuiteVersion, on_delete=models.CASCADE, primary_key=True, related_name="parsed"
    )
    schema = models.CharField(max_length=64)
    suite = models.TextField()

    def __str__(self) -> str:
        return f"parsed {self.version_id}"


def content_hash(source: str, files: dict[str, str]) -> str:
    """One hash for the YAML and its attached files: two versions with the same hash ran the same suite."""
    digest = hashlib.sha256(source.encode("utf-8"))
    for name in sorted(files):
        digest.update(b"\0" + name.encode("utf-8") + b"\0" + files[name].encode("utf-8"))
    return digest.hexdigest()


class SuiteFile(models.Model):
    """A file attached to a suite version: a dataset, a guideline, a snippet a history embeds. Text only.

    Files belong to one version; saving the YAML again carries the files over to the new version.
    """

    version = models.ForeignKey(SuiteVersion, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=200)
    content = models.TextField()
    size = models.PositiveIntegerField()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["version", "name"], name="suite_file_unique_name")]

    def __str__(self) -> str:
        return self.name
