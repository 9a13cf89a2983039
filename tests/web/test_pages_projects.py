"""The projects pages: a user's projects with their role, creating one (its creator its admin), its members
(admins add, change and remove; a project keeps an admin), the navigation's switcher and the current project
that list pages and new suites follow, and the empty state of a user in no project."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from projects.models import Membership, Project
from runs.models import Run
from suites.models import Suite
from suites.services import create_suite
from tests.factories import join, other_project

pytestmark = pytest.mark.django_db

SUITE = "name: {name}\nmodel: mock\nevals:\n  - {{prompt: Hi, checks: [{{match: '*'}}]}}\n"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_user_in_no_project_is_told_how_to_get_one(django_user_model):
    client = signed_in(django_user_model.objects.create_user("newbie", password="x"))
    for name in ("suites:list", "runs:list"):
        page = client.get(reverse(name)).content.decode()
        assert "You are not in a project yet" in page and "ask an admin" in page
    assert client.get(reverse("suites:new")).status_code == 404  # nowhere to create a suite


def test_creating_a_project_makes_its_creator_admin_and_switches_to_it(logged_in, user):
    response = logged_in.post(reverse("projects:create"), {"name": "Tutor evals"})
    project = Project.objects.get(name="Tutor evals")
    assert response["Location"] == reverse("projects:members", args=[project.slug])
    assert Membership.objects.get(project=project, user=user).role == "admin"
    assert project.slug == "tutor-evals"
    logged_in.post(reverse("suites:new"), {"source": SUITE.format(name="first")})
    assert Suite.objects.get(name="first").project == project  # a new suite goes into the current project
    listing = logged_in.get(reverse("projects:list")).content.decode()
    assert "Tutor evals" in listing and "Default" in listing and "Admin" in listing


def test_admins_add_change_and_remove_members_but_never_the_last_admin(logged_in, user, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="x")
    url = reverse("projects:members", args=["default"])
    logged_in.post(url, {"action": "add", "username": "bob", "role": "reviewer"})
    bobs = Membership.objects.get(user=bob)
    assert bobs.role == "reviewer"
    again = logged_in.post(url, {"action": "add", "username": "bob", "role": "viewer"})
    assert again.status_code == 400 and "already a member" in again.content.decode()
    unknown = logged_in.post(url, {"action": "add", "username": "nobody", "role": "viewer"})
    assert unknown.status_code == 400 and "No user is called" in unknown.content.decode()
    logged_in.post(url, {"action": "role", "member": bobs.pk, "role": "editor"})
    bobs.refresh_from_db()
    assert bobs.role == "editor"
    alices = Membership.objects.get(user=user, project__slug="default")
    refused = logged_in.post(url, {"action": "remove", "member": alices.pk}, follow=True)
    assert "keeps at least one admin" in refused.content.decode()
    logged_in.post(url, {"action": "role", "member": alices.pk, "role": "viewer"})
    alices.refresh_from_db()
    assert alices.role == "admin"
    logged_in.post(url, {"action": "remove", "member": bobs.pk})
    assert not Membership.objects.filter(user=bob).exists()


def test_members_see_the_list_read_only_and_cannot_change_it(user, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="x")
    join(bob, role="editor")
    client = signed_in(bob)
    page = client.get(reverse("projects:members", args=["default"])).content.decode()
    assert "alice" in page and "Add a member" not in page and "Only the project's admins" in page
    refused = client.post(reverse("projects:members", args=["default"]), {"action": "add", "username": "bob"})
    assert refused.status_code == 403 and "admin role" in refused.content.decode()


def test_the_switcher_changes_the_project_the_lists_show(logged_in, user):
    other = other_project()
    join(user, other, "viewer")
    create_suite(owner=user, source=SUITE.format(name="in-default"))
    create_suite(owner=user, source=SUITE.format(name="in-other"), project=other)
    first = logged_in.get(reverse("suites:list")).content.decode()
    assert "in-default" in first and "in-other" not in first
    assert 'action="/projects/switch/"' in first and "csrfmiddlewaretoken" in first
    switched = logged_in.post(reverse("projects:switch"), {"project": "other", "next": reverse("runs:list")})
    assert switched["Location"] == reverse("runs:list")
    page = logged_in.get(reverse("suites:list")).content.decode()
    assert "in-other" in page and "in-default" not in page
    # A viewer there: no New suite link, a disabled button that says which role it needs.
    assert reverse("suites:new") not in page and "Needs the editor role in this project" in page
    # ?project= on a list page switches too.
    assert "in-default" in logged_in.get(reverse("suites:list"), {"project": "default"}).content.decode()


def test_a_project_of_someone_else_cannot_be_switched_to(logged_in, other_user):
    assert logged_in.post(reverse("projects:switch"), {"project": "other"}).status_code == 404
    assert logged_in.get(reverse("projects:members", args=["other"])).status_code == 404


def test_suite_names_are_unique_per_project_not_per_person(logged_in, user, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="x")
    join(bob, role="editor")
    create_suite(owner=bob, source=SUITE.format(name="shared-name"))
    refused = logged_in.post(reverse("suites:new"), {"source": SUITE.format(name="shared-name")})
    assert refused.status_code == 400 and "this project already has a suite named" in refused.content.decode()
    create_suite(owner=user, source=SUITE.format(name="shared-name"), project=other_project())
    assert Suite.objects.filter(name="shared-name").count() == 2


def test_a_run_launched_by_one_member_is_listed_for_another(logged_in, user, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="x")
    join(bob, role="viewer")
    suite = create_suite(owner=user, source=SUITE.format(name="alices"))
    run = Run.objects.create(
        suite_version=suite.latest_version,
        project=suite.project,
        created_by=user,
        model="mock",
        endpoint_name="mock",
    )
    assert f"/runs/{run.pk}/" in signed_in(bob).get(reverse("runs:list")).content.decode()


def test_a_malformed_member_change_is_a_404_or_a_message_never_an_error(logged_in, user):
    url = reverse("projects:members", args=["default"])
    assert logged_in.post(url, {"action": "remove", "member": "abc"}).status_code == 404
    alices = Membership.objects.get(user=user, project__slug="default")
    changed = logged_in.post(url, {"action": "role", "member": alices.pk, "role": "king"}, follow=True)
    assert "Role of alice unchanged" in changed.content.decode()
    alices.refresh_from_db()
    assert alices.role == "admin"


@pytest.mark.django_db
def test_the_empty_runs_list_tells_a_viewer_who_launches_not_to_press_a_button_they_cannot(
    logged_in, django_user_model
):
    assert "press <strong>Launch</strong>" in logged_in.get(reverse("runs:list")).content.decode()
    viewer = django_user_model.objects.create_user("vera", password="pw")
    join(viewer, role="viewer")
    client = Client()
    client.force_login(viewer)
    page = client.get(reverse("runs:list")).content.decode()
    assert "press <strong>Launch</strong>" not in page
    assert "once a member with the editor role launches one" in page
