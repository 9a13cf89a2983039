"""Writes for suites. A save validates first; a broken suite creates nothing and leaves the last version.

A version is the YAML plus its attached files (datasets, guidelines, snippets). Saving new YAML carries
the previous version's files over; attaching or removing a file saves a new version with the same YAML.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import IntegrityError, transaction
from django.db.models import Count

from engine.attached import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES, check_files, decode_file
from engine.loader import load_suite
from engine.schema import Suite as SuiteSpec
from engine.source import SuiteError, decode_source
from engine.text import plural
from projects import audit
from projects.deleting import DeleteRefused
from projects.models import Action, Project

from . import parsed
from .models import Suite, SuiteFile, SuiteVersion, content_hash


def validate_source(
    source: str | bytes, filename: str = "suite.yaml", files: Mapping[str, str] | None = None
) -> SuiteSpec:
    """Parse and validate with the attached files, which must obey engine.attached's rules (names, sizes,
    how many); raises engine.loader.SuiteError with located problems."""
    if files:
        check_files(files)
    return load_suite(source, filename, files=files)


def save_version(
    *, suite: Suite, source: str, user, note: str = "", files: Mapping[str, str] | None = None
) -> SuiteVersion:
    """Validate and store the suite's next version (SuiteError: nothing stored). `files` None keeps the
    latest version's files; a mapping replaces them. Its parse is stored beside it (suites.parsed)."""
    return _save_version(suite=suite, source=source, user=user, note=note, files=files)


@transaction.atomic
def save_ref_version(
    *, suite: Suite, source: str, user, ref: str, commit: str = "", files: Mapping[str, str] | None = None
) -> SuiteVersion:
    """Store the suite as a CI job sent it, under `ref`, off the suite's line: it never becomes the latest.
    The same text and files under the same ref reuse that version; `commit` is recorded on a new one.
    Its number is the suite's next, shared with the line, so that a number names one version."""
    files = dict(files or {})
    check_files(files)
    spec = validate_source(source, files=files)
    digest = content_hash(source, files)
    Suite.objects.select_for_update().filter(pk=suite.pk).first()  # one next number at a time
    same = suite.versions.filter(ref=ref, sha256=digest).order_by("-number").first()
    if same is not None:
        return same
    last = suite.versions.order_by("-number").values_list("number", flat=True).first()
    version = SuiteVersion.objects.create(
        suite=suite,
        number=(last or 0) + 1,
        source=source,
        sha256=digest,
        created_by=user,
        note=f"from CI, {ref}"[:200],
        ref=ref,
        commit=commit,
    )
    SuiteFile.objects.bulk_create(
        SuiteFile(version=version, name=name, content=text, size=len(text.encode("utf-8")))
        for name, text in sorted(files.items())
    )
    parsed.store_parse(version.pk, spec)
    return version


@transaction.atomic
def _save_version(
    *,
    suite: Suite,
    source: str,
    user,
    note: str,
    files: Mapping[str, str] | None,
    spec: SuiteSpec | None = None,
) -> SuiteVersion:
    """save_version; `spec` is the source's parse with these files when the caller has just validated it."""
    Suite.objects.select_for_update().filter(pk=suite.pk).first()  # one next number at a time
    latest = suite.versions.filter(ref="").order_by("-number").first()
    if files is None:
        files = latest.file_map() if latest else {}
    check_files(files)
    if spec is None:
        spec = validate_source(source, files=files)
    digest = content_hash(source, dict(files))
    if latest is not None and latest.sha256 == digest:
        return latest  # saving unchanged text and files is not a new version
    last = suite.versions.order_by("-number").values_list("number", flat=True).first()
    version = SuiteVersion.objects.create(
        suite=suite,
        number=(last or 0) + 1,
        source=source,
        sha256=digest,
        created_by=user,
        note=note,
    )
    SuiteFile.objects.bulk_create(
        SuiteFile(version=version, name=name, content=text, size=len(text.encode("utf-8")))
        for name, text in sorted(files.items())
    )
    if spec.description is not None and spec.description != suite.description:
        suite.description = spec.description
    suite.save(update_fields=["description", "updated_at"])
    parsed.store_parse(version.pk, spec)
    return version


def change_files(
    *, suite: Suite, user, add: Mapping[str, str] | None = None, remove: list[str] = ()
) -> SuiteVersion:
    """A new version with the same YAML and the file set changed. Raises SuiteError if the suite would break."""
    latest = suite.latest_version
    files = latest.file_map() if latest else {}
    for name in remove:
        files.pop(name, None)
    files.update(add or {})
    changes = [f"attached {name}" for name in (add or {})] + [f"removed {name}" for name in remove]
    return save_version(suite=suite, source=latest.source if latest else "", user=user, note="; ".join(changes)[:200],
                        files=files)  # fmt: skip


@transaction.atomic
def create_suite(
    *, owner, source: str, note: str = "", files: Mapping[str, str] | None = None, project=None
) -> Suite:
    """Create a suite named after the YAML's `name`, in `project` (the default project when None). Raises
    SuiteError, or ValueError for a taken name."""
    spec = validate_source(source, files=files or {})
    project = project or Project.default()
    try:
        with transaction.atomic():
            suite = Suite.objects.create(
                project=project, owner=owner, name=spec.name, description=spec.description or ""
            )
    except IntegrityError:
        raise ValueError(f"this project already has a suite named {spec.name!r}") from None
    # Validated once: a 3,000-eval suite takes PyYAML most of a second.
    _save_version(
        suite=suite, source=source, user=owner, note=note or "created", files=files or {}, spec=spec
    )
    return suite


class SuitesRefused(ValueError):
    """Several suites that cannot all be created; `problems` holds one line per problem, naming its suite."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def create_suites(
    *, owner, suites: list[tuple[str, str, Mapping[str, str], str]], project=None
) -> list[Suite]:
    """Create several suites at once, in `project` (the default project when None), or none: each
    `(label, source, files, note)` is validated and its name checked against the others and the project's
    suites first; then all are created in one transaction. Raises SuitesRefused listing every problem, each
    after its label (where it came from)."""
    project = project or Project.default()
    problems: list[str] = []
    specs: list[SuiteSpec | None] = []
    for label, source, files, _note in suites:
        try:
            specs.append(validate_source(source, files=files))
        except SuiteError as exc:
            specs.append(None)
            problems += [f"{label}: {problem}" for problem in exc.problems]
    named: dict[str, str] = {}
    for (label, *_), spec in zip(suites, specs, strict=True):
        if spec is None:
            continue
        if spec.name in named:
            problems.append(
                f"{label}: named {spec.name!r}, as {named[spec.name]} is; suite names must differ"
            )
        named.setdefault(spec.name, label)
    for name in Suite.objects.filter(project=project, name__in=list(named)).values_list("name", flat=True):
        problems.append(f"{named[name]}: this project already has a suite named {name!r}")
    if problems:
        raise SuitesRefused(problems)
    created = []
    try:
        with transaction.atomic():
            for (label, source, files, note), spec in zip(suites, specs, strict=True):
                try:
                    suite = Suite.objects.create(
                        project=project, owner=owner, name=spec.name, description=spec.description or ""
                    )
                except IntegrityError:  # made by another request since the check above
                    raise SuitesRefused(
                        [f"{label}: this project already has a suite named {spec.name!r}"]
                    ) from None
                _save_version(
                    suite=suite, source=source, user=owner, note=note or "created", files=files, spec=spec
                )
                created.append(suite)
    except SuiteError as exc:
        raise SuitesRefused([str(problem) for problem in exc.problems]) from None
    return created


__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "SuiteError",
    "SuitesRefused",
    "change_files",
    "create_suite",
    "create_suites",
    "decode_file",
    "decode_source",
    "save_ref_version",
    "save_version",
    "validate_source",
]


def why_kept(suite: Suite) -> str:
    """Why the suite cannot be deleted, or "" when it can: a run keeps the version it ran."""
    runs = suite.versions.aggregate(runs=Count("runs"))["runs"]
    if runs:
        return f"{plural(runs, 'run')} of it {'is' if runs == 1 else 'are'} kept; delete them first"
    return ""


@transaction.atomic
def delete_suite(suite: Suite, *, by) -> None:
    """Delete a suite no run points at, with its versions and attached files; the audit log keeps its name."""
    if reason := why_kept(suite):
        raise DeleteRefused(reason)
    audit.record(by, suite.project_id, Action.DELETED, suite)
    suite.delete()
