"""Deleting runs and suites in the app: a project's admins only, after a page that says what goes; never an
active run, never a suite a run points at (the page says why); each deletion is in the audit log."""

from __future__ import annotations

import pytest
from django.urls import reverse

from projects.models import Action, AuditEvent, Project
from runs.models import Run, Status
from runs.services import create_run
from suites.models import Suite
from suites.services import create_suite
from tests.factories import join, play

pytestmark = pytest.mark.django_db

SUITE = """\
name: doomed
model: mock
evals:
  - {id: hi, prompt: hi, checks: [{match: "*"}]}
"""


@pytest.fixture
def project():
    return Project.default()


@pytest.fixture
def admin_member(user, project):
    join(user, project, role="admin")
    return user


@pytest.fixture
def suite(user, project):
    return create_suite(owner=user, source=SUITE)


@pytest.fixture
def finished(suite, user):
    return play(create_run(version=suite.latest_version, user=user))


def test_an_admin_deletes_a_finished_run_from_its_page(logged_in, admin_member, finished, project):
    page = logged_in.get(reverse("runs:detail", args=[finished.pk])).content.decode()
    assert f'href="{reverse("runs:delete", args=[finished.pk])}"' in page
    label = finished.audit_label
    confirm = logged_in.get(reverse("runs:delete", args=[finished.pk]))
    assert confirm.status_code == 200 and label in confirm.content.decode()
    assert Run.objects.filter(pk=finished.pk).exists()  # asking deletes nothing

    gone = logged_in.post(reverse("runs:delete", args=[finished.pk]), follow=True)
    assert gone.redirect_chain[-1][0] == reverse("runs:list")
    assert f"Deleted {label}" in gone.content.decode()
    assert not Run.objects.filter(pk=finished.pk).exists()
    event = AuditEvent.objects.get(action=Action.DELETED)
    assert (event.actor, event.target_label, event.project) == (admin_member, label, project)


def test_an_active_run_is_not_deleted(logged_in, admin_member, suite, user):
    run = create_run(version=suite.latest_version, user=user)
    assert run.status == Status.QUEUED
    refused = logged_in.post(reverse("runs:delete", args=[run.pk]))
    assert refused.status_code == 409 and "cancel it first" in refused.content.decode()
    assert Run.objects.filter(pk=run.pk).exists()
    assert not AuditEvent.objects.filter(action=Action.DELETED).exists()


def test_an_editor_may_not_delete(logged_in, user, project, finished):
    join(user, project, role="editor")
    page = logged_in.get(reverse("runs:detail", args=[finished.pk])).content.decode()
    assert reverse("runs:delete", args=[finished.pk]) not in page
    assert logged_in.post(reverse("runs:delete", args=[finished.pk])).status_code == 403
    assert (
        logged_in.post(reverse("suites:delete", args=[finished.suite_version.suite.public_id])).status_code
        == 403
    )
    assert Run.objects.filter(pk=finished.pk).exists()


def test_a_non_member_finds_nothing_to_delete(client, other_user, finished):
    client.force_login(other_user)
    assert client.post(reverse("runs:delete", args=[finished.pk])).status_code == 404
    assert (
        client.get(reverse("suites:delete", args=[finished.suite_version.suite.public_id])).status_code == 404
    )
    assert Run.objects.filter(pk=finished.pk).exists()


def test_a_suite_with_runs_stays_and_the_page_says_why(logged_in, admin_member, finished):
    suite = finished.suite_version.suite
    asked = logged_in.get(reverse("suites:delete", args=[suite.public_id])).content.decode()
    assert "1 run of it is kept; delete them first" in asked
    refused = logged_in.post(reverse("suites:delete", args=[suite.public_id]))
    assert refused.status_code == 409
    assert Suite.objects.filter(pk=suite.pk).exists()


def test_an_admin_deletes_a_suite_without_runs(logged_in, admin_member, suite, project):
    editor = logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    assert f'href="{reverse("suites:delete", args=[suite.public_id])}"' in editor
    gone = logged_in.post(reverse("suites:delete", args=[suite.public_id]), follow=True)
    assert gone.redirect_chain[-1][0] == reverse("suites:list")
    assert not Suite.objects.filter(pk=suite.pk).exists()
    event = AuditEvent.objects.get(action=Action.DELETED)
    assert (event.target_kind, event.target_label, event.actor) == ("suites.suite", "doomed", admin_member)
    log = logged_in.get(reverse("projects:audit", args=[project.slug])).content.decode()
    assert "doomed" in log and f'href="{reverse("suites:detail", args=[suite.public_id])}"' not in log
