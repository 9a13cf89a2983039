"""The audit log: every change a member makes through the site or the API is one event naming who did what to
which; events outlive what they name; the project's page lists them for its members only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from projects.models import Action, AuditEvent, Membership, Project
from runs.models import ApiToken, Run, Status
from suites.services import create_suite
from tests.factories import join, play

pytestmark = pytest.mark.django_db

# Two evals on the built-in mock model: `add` passes, `capital` fails its check (a reviewer may overturn it).
SUITE = """\
name: audited
model: mock
mock:
  rules:
    - {when: "*2+2*", reply: "4"}
    - {when: "*capital*", reply: "Paris"}
evals:
  - {id: add, prompt: What is 2+2?, checks: [{contains: "4"}]}
  - {id: capital, prompt: What is the capital of France?, checks: [{contains: Lyon}]}
"""


@pytest.fixture
def project(user):
    project = Project.default()
    join(user, project, role="admin")
    return project


@pytest.fixture
def suite(user, project):
    return create_suite(owner=user, source=SUITE)


@pytest.fixture
def run(logged_in, suite):
    logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"version": "1", "concurrency": "2"})
    return Run.objects.get()


@pytest.fixture
def played(run):
    return play(run)


def only_event(action: Action) -> AuditEvent:
    events = list(AuditEvent.objects.filter(action=action))
    assert len(events) == 1, events
    return events[0]


def assert_event(action: Action, user, target, project) -> AuditEvent:
    event = only_event(action)
    assert (event.actor, event.actor_name, event.project) == (user, user.username, project)
    assert (event.target_kind, event.target_id) == (target._meta.label_lower, str(target.pk))
    return event


def test_a_launch_from_the_suite_page_is_recorded(run, user, project):
    event = assert_event(Action.LAUNCHED, user, run, project)
    assert event.target_label == f"run {str(run.pk)[:8]} of audited v1 on mock"
    assert event.detail == {"model": "mock"}


def test_a_launch_through_the_api_is_recorded(logged_in, suite, user, project):
    response = logged_in.post("/api/runs", {"suite": "audited"}, content_type="application/json")
    assert response.status_code in (200, 201), response.content
    assert_event(Action.LAUNCHED, user, Run.objects.get(), project)


def test_a_cancel_is_recorded(logged_in, run, user, project):
    logged_in.post(reverse("runs:cancel", args=[run.pk]))
    assert_event(Action.CANCELLED, user, run, project)
    logged_in.post(reverse("runs:cancel", args=[run.pk]))  # already over: nothing changed, nothing recorded
    assert AuditEvent.objects.filter(action=Action.CANCELLED).count() == 1


def test_a_retry_is_recorded_with_how_many_went_back(logged_in, played, user, project):
    Run.objects.filter(pk=played.pk).update(status=Status.ERROR)
    played.conversations.filter(eval_id="capital").update(status=Status.ERROR)
    logged_in.post(reverse("runs:retry_errored", args=[played.pk]))
    assert assert_event(Action.RETRIED, user, played, project).detail == {"conversations": 1}


def test_a_refused_retry_leaves_no_event(logged_in, played):
    logged_in.post(reverse("runs:retry_errored", args=[played.pk]))  # no errored conversation: rolled back
    assert not AuditEvent.objects.filter(action=Action.RETRIED).exists()


def test_a_regrade_is_recorded_on_the_new_run(logged_in, played, user, project):
    logged_in.post(reverse("runs:regrade", args=[played.pk]), {"version": "1"})
    new = Run.objects.get(regraded_from=played)
    event = assert_event(Action.REGRADED, user, new, project)
    assert event.detail == {"source": played.audit_label}
    assert AuditEvent.objects.filter(action=Action.LAUNCHED).count() == 1  # the source's launch only


def test_pinning_and_unpinning_are_recorded(logged_in, played, user, project):
    logged_in.post(reverse("runs:pin", args=[played.pk]))
    assert_event(Action.PINNED, user, played, project)
    logged_in.post(reverse("runs:pin", args=[played.pk]), {"unpin": "1"})
    assert_event(Action.UNPINNED, user, played, project)


def test_a_share_link_made_and_revoked_is_recorded(logged_in, played, user, project):
    logged_in.post(reverse("runs:share", args=[played.pk]))
    link = played.share_links.get()
    assert assert_event(Action.SHARED, user, played, project).detail == {"link": link.pk}
    logged_in.post(reverse("runs:revoke", args=[played.pk, link.pk]))
    assert assert_event(Action.REVOKED, user, played, project).detail == {"link": link.pk}


def test_an_override_and_its_withdrawal_are_recorded(logged_in, played, user, project):
    capital = played.conversations.get(eval_id="capital")
    logged_in.post(
        reverse("runs:override", args=[played.pk, capital.index]),
        {"turn": "1", "target": "checks[0]", "passed": "1", "note": "Paris is right"},
    )
    event = assert_event(Action.OVERRODE, user, capital, project)
    assert event.detail == {"turn": 1, "check": "checks[0]", "passed": True, "note": "Paris is right"}
    override = capital.overrides.get()
    logged_in.post(
        reverse("runs:remove_override", args=[played.pk, capital.index, override.pk]), {"turn": "1"}
    )
    assert assert_event(Action.OVERRIDE_WITHDRAWN, user, capital, project).detail == {
        "turn": 1,
        "check": "checks[0]",
    }


def test_a_label_is_recorded(logged_in, played, user, project):
    add = played.conversations.get(eval_id="add")
    logged_in.post(reverse("runs:label", args=[played.pk, add.index]), {"score": "2", "scale": "-3..3"})
    assert assert_event(Action.LABELLED, user, add, project).detail == {"score": 2.0, "scale": "-3..3"}


def test_deleting_a_run_in_the_admin_is_recorded_and_the_event_outlives_it(admin_client, played, project):
    admin_client.force_login(admin_client.admin)  # the run was launched by alice through the same client
    label = played.audit_label
    response = admin_client.post(reverse("admin:runs_run_delete", args=[played.pk]), {"post": "yes"})
    assert response.status_code == 302 and not Run.objects.exists()
    event = only_event(Action.DELETED)
    assert (event.actor, event.target_label, event.target_id) == (admin_client.admin, label, str(played.pk))
    assert AuditEvent.objects.filter(target_id=str(played.pk)).count() == 2  # its launch too

    page = admin_client.get(reverse("projects:audit", args=[project.slug])).content.decode()
    assert label in page and f'href="/runs/{played.pk}/"' not in page  # named, no longer linked


def test_deleting_suites_in_the_admin_list_is_recorded(admin_client, suite, project):
    admin_client.post(
        reverse("admin:suites_suite_changelist"),
        {"action": "delete_selected", "_selected_action": [suite.pk], "post": "yes"},
    )
    event = only_event(Action.DELETED)
    assert (event.target_kind, event.target_label, event.detail) == (
        "suites.suite",
        "audited",
        {"where": "admin"},
    )


def test_members_added_changed_and_removed_in_the_admin_are_recorded(admin_client, user, other_user, project):
    url = reverse("admin:projects_project_change", args=[project.pk])
    membership = Membership.objects.get(user=user, project=project)
    form = {
        "name": project.name,
        "slug": project.slug,
        "memberships-TOTAL_FORMS": "2",
        "memberships-INITIAL_FORMS": "1",
        "memberships-0-id": str(membership.pk),
        "memberships-0-project": str(project.pk),
        "memberships-0-user": str(user.pk),
        "memberships-0-role": "viewer",
        "memberships-1-project": str(project.pk),
        "memberships-1-user": str(other_user.pk),
        "memberships-1-role": "reviewer",
    }
    assert admin_client.post(url, form).status_code == 302
    added, changed = only_event(Action.MEMBER_ADDED), only_event(Action.MEMBER_CHANGED)
    assert (added.target_label, added.detail) == ("mallory", {"role": "reviewer"})
    assert (changed.target_label, changed.detail) == ("alice", {"role": "viewer"})

    mallory = Membership.objects.get(user=other_user, project=project)
    form.update({
        "memberships-TOTAL_FORMS": "2", "memberships-INITIAL_FORMS": "2",
        "memberships-1-id": str(mallory.pk), "memberships-1-DELETE": "on",
    })  # fmt: skip
    assert admin_client.post(url, form).status_code == 302
    assert only_event(Action.MEMBER_REMOVED).target_label == "mallory"
    assert all(event.actor == admin_client.admin for event in AuditEvent.objects.all())


def test_the_page_shows_who_did_what_to_which_newest_first_with_links(logged_in, played, user, project):
    logged_in.post(reverse("runs:pin", args=[played.pk]))
    page = logged_in.get(reverse("projects:audit", args=[project.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    assert html.index("<td>pinned as baseline</td>") < html.index("<td>launched</td>")
    assert f'<a href="/runs/{played.pk}/">{played.audit_label}</a>' in html
    assert ">alice<" in html

    only_pins = logged_in.get(
        reverse("projects:audit", args=[project.slug]), {"action": "pinned"}
    ).content.decode()
    assert "pinned as baseline" in only_pins and "<td>launched</td>" not in only_pins
    nobody = logged_in.get(
        reverse("projects:audit", args=[project.slug]), {"member": "mallory"}
    ).content.decode()
    assert "No event matches" in nobody


def test_the_page_escapes_what_it_shows(logged_in, user, project):
    hostile = create_suite(owner=user, source=SUITE.replace("name: audited", "name: '<b>x</b>'"))
    from projects import audit

    audit.record(user, project.pk, Action.DELETED, hostile, note="<script>alert(1)</script>")
    html = logged_in.get(reverse("projects:audit", args=[project.slug])).content.decode()
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<script>alert(1)" not in html


def test_the_page_pages(logged_in, user, project, suite):
    from projects import audit

    for _ in range(51):
        audit.record(user, project.pk, Action.PINNED, suite)
    first = logged_in.get(reverse("projects:audit", args=[project.slug])).content.decode()
    assert "Page 1 of 2" in first and 'rel="next"' in first


def test_a_non_member_finds_no_page(client, other_user, project):
    client.force_login(other_user)
    assert client.get(reverse("projects:audit", args=[project.slug])).status_code == 404
    assert client.get(reverse("projects:audit", args=["no-such-project"])).status_code == 404


def test_every_member_may_read_it(client, other_user, project):
    Membership.objects.create(project=project, user=other_user, role="viewer")
    client.force_login(other_user)
    assert client.get(reverse("projects:audit", args=[project.slug])).status_code == 200


def test_the_admin_shows_the_log_read_only(admin_client, run):
    admin_client.force_login(admin_client.admin)
    event = AuditEvent.objects.get()
    assert admin_client.get(reverse("admin:projects_auditevent_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:projects_auditevent_change", args=[event.pk])).status_code == 200
    admin_client.post(reverse("admin:projects_auditevent_delete", args=[event.pk]), {"post": "yes"})
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_labels_added_to_a_calibration_set_are_recorded(logged_in, played, user, project):
    calibration = create_suite(
        owner=user,
        source="name: audited-labels\njudge: {model: mock, criteria: Correct, scale: -3..3}\n"
        "samples:\n  - messages: [{role: user, content: hi}, {role: assistant, content: hello}]\n    expected: 2\n",
    )
    add = played.conversations.get(eval_id="add")
    logged_in.post(reverse("runs:label", args=[played.pk, add.index]), {"score": "3", "scale": "-3..3"})
    logged_in.post(reverse("runs:labels_to_set", args=[played.pk]), {"set": str(calibration.public_id)})
    event = assert_event(Action.LABELS_ADDED, user, calibration, project)
    assert event.detail == {"added": 1, "run": played.audit_label}


def test_a_target_with_no_page_is_named_and_not_called_gone(logged_in, user, other_user, project):
    from projects import audit

    audit.record(user, project.pk, Action.MEMBER_ADDED, other_user, role="viewer")
    html = logged_in.get(reverse("projects:audit", args=[project.slug])).content.decode()
    assert "mallory" in html and "(gone)" not in html
    other_user.delete()
    assert "(gone)" in logged_in.get(reverse("projects:audit", args=[project.slug])).content.decode()


def test_members_added_changed_and_removed_on_the_members_page_are_recorded(
    logged_in, user, django_user_model, project
):
    bob = django_user_model.objects.create_user("bob", password="x")
    url = reverse("projects:members", args=[project.slug])
    logged_in.post(url, {"action": "add", "username": "bob", "role": "reviewer"})
    bobs = Membership.objects.get(user=bob, project=project)
    logged_in.post(url, {"action": "role", "member": bobs.pk, "role": "editor"})
    logged_in.post(url, {"action": "remove", "member": bobs.pk})
    # A refused change (the last admin made a viewer) leaves no event.
    alices = Membership.objects.get(user=user, project=project)
    logged_in.post(url, {"action": "role", "member": alices.pk, "role": "viewer"})
    events = [
        (event.actor, event.action, event.target_label, event.detail)
        for event in AuditEvent.objects.order_by("pk")
    ]
    assert events == [
        (user, Action.MEMBER_ADDED, "bob", {"role": "reviewer"}),
        (user, Action.MEMBER_CHANGED, "bob", {"role": "editor"}),
        (user, Action.MEMBER_REMOVED, "bob", {"role": "editor"}),
    ]


def test_tokens_made_and_revoked_on_the_tokens_page_are_recorded(logged_in, user, project):
    logged_in.post(reverse("tokens"), {"name": "ci"})
    made = assert_event(Action.TOKEN_CREATED, user, ApiToken.objects.get(name="ci"), project)
    assert made.detail == {"user": "alice"}
    token = ApiToken.objects.get(name="ci")
    logged_in.post(reverse("token_revoke", args=[token.pk]))
    assert_event(Action.TOKEN_REVOKED, user, token, project)
    # Revoking it again changes nothing, and records nothing.
    logged_in.post(reverse("token_revoke", args=[token.pk]))
    assert AuditEvent.objects.filter(action=Action.TOKEN_REVOKED).count() == 1
