"""Share links and their makers' access: a link ends when its maker leaves the project or is deactivated,
however that happened, and the audit log says why; a project's admins list its active links and revoke any;
its maker revokes it whatever their role now; a link may be made to expire; its last use is noted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from projects import services as project_services
from projects.models import Action, AuditEvent, Membership, Project
from projects.roles import Role
from runs import selectors, services
from runs.models import ShareLink
from suites.services import create_suite
from tests.factories import join, other_project, play

pytestmark = pytest.mark.django_db

SUITE = "name: {name}\nmodel: mock\nevals:\n  - {{prompt: Hi, checks: [{{match: '*'}}]}}\n"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def words(response) -> str:
    """The page's text with every run of whitespace one space, as a reader sees it."""
    return " ".join(response.content.decode().split())


def opens(link: ShareLink) -> bool:
    return Client().get(reverse("share:run", args=[link.token])).status_code == 200


@pytest.fixture
def team(user, django_user_model):
    """Alice admins the default project and another; Ed edits in both, and has made a link to a run in each."""
    ed = django_user_model.objects.create_user("ed", password="x")
    here, there = Project.default(), other_project()
    join(ed, here, "editor")
    join(ed, there, "editor")
    join(user, there, "admin")
    runs = {}
    for project in (here, there):
        suite = create_suite(owner=user, source=SUITE.format(name=f"in-{project.slug}"), project=project)
        runs[project.slug] = play(services.create_run(version=suite.latest_version, user=user))
    links = {slug: services.create_share_link(run, ed) for slug, run in runs.items()}
    return {"ed": ed, "here": here, "there": there, "runs": runs, "links": links}


def test_removing_a_member_revokes_the_links_they_made_in_that_project_and_says_so(logged_in, user, team):
    here, links = team["here"], team["links"]
    alices = services.create_share_link(team["runs"]["default"], user)
    assert opens(links["default"]) and opens(links["other"])
    membership = Membership.objects.get(user=team["ed"], project=here)
    response = logged_in.post(
        reverse("projects:members", args=[here.slug]),
        {"action": "remove", "member": membership.pk},
        follow=True,
    )
    assert "Removed ed from Default (share links revoked: 1)." in response.content.decode()
    assert not opens(links["default"])
    assert opens(links["other"]) and opens(alices)  # another project's, and another member's, stay
    revoked = AuditEvent.objects.get(action=Action.REVOKED)
    assert (revoked.actor, revoked.project, revoked.detail) == (
        user, here, {"link": links["default"].pk, "why": "its maker left the project"}
    )  # fmt: skip
    removed = AuditEvent.objects.get(action=Action.MEMBER_REMOVED)
    assert removed.detail == {"role": "editor", "share_links_revoked": 1}
    # Coming back does not bring the link back.
    join(team["ed"], here, "editor")
    assert not opens(links["default"])


def test_the_members_page_says_before_a_removal_that_the_members_links_go_too(logged_in, team):
    page = logged_in.get(reverse("projects:members", args=["default"])).content.decode()
    assert (
        'data-confirm="Remove ed from Default? The share links they made to its runs are revoked too."'
        in page
    )


def test_a_member_removed_in_the_admin_loses_their_links_too(admin_client, team):
    here = team["here"]
    memberships = list(Membership.objects.filter(project=here).order_by("pk"))
    form = {"name": here.name, "slug": here.slug, "memberships-TOTAL_FORMS": str(len(memberships))}
    form["memberships-INITIAL_FORMS"] = str(len(memberships))
    for n, membership in enumerate(memberships):
        form.update({
            f"memberships-{n}-id": str(membership.pk), f"memberships-{n}-project": str(here.pk),
            f"memberships-{n}-user": str(membership.user_id), f"memberships-{n}-role": membership.role,
        })  # fmt: skip
        if membership.user == team["ed"]:
            form[f"memberships-{n}-DELETE"] = "on"
    assert (
        admin_client.post(reverse("admin:projects_project_change", args=[here.pk]), form).status_code == 302
    )
    assert not opens(team["links"]["default"]) and opens(team["links"]["other"])
    assert AuditEvent.objects.get(action=Action.MEMBER_REMOVED).detail["share_links_revoked"] == 1


def test_deactivating_a_user_revokes_their_links_in_every_project(team):
    ed = team["ed"]
    ed.is_active = False
    ed.save()
    assert not any(opens(link) for link in team["links"].values())
    events = AuditEvent.objects.filter(action=Action.REVOKED)
    assert sorted(event.project.slug for event in events) == ["default", "other"]
    assert {(event.actor, event.detail["why"]) for event in events} == {(None, "its maker was deactivated")}
    ed.is_active = True
    ed.save()
    assert not any(opens(link) for link in team["links"].values())  # revoked, not paused


def test_a_link_opens_nothing_once_its_maker_lost_access_by_any_other_path(team, django_user_model):
    ed, links = team["ed"], team["links"]
    Membership.objects.filter(user=ed, project=team["here"]).delete()  # no service, no signal
    assert not opens(links["default"]) and opens(links["other"])
    django_user_model.objects.filter(pk=ed.pk).update(is_active=False)
    assert not opens(links["other"])
    assert not ShareLink.objects.filter(revoked_at__isnull=False).exists()  # refused, though never revoked


# --- The project's list of links, expiry, last use ------------------------------------------------------------


def test_an_admin_lists_the_projects_active_links_and_revokes_any(logged_in, user, team):
    run = team["runs"]["default"]
    alices = services.create_share_link(run, user)
    gone = services.create_share_link(run, user)
    services.revoke_share_link(gone, by=user)
    url = reverse("project_share_links", args=["default"])
    page = logged_in.get(url)
    text = page.content.decode()
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    for link in (alices, team["links"]["default"]):
        assert f"http://testserver/s/{link.token}/" in text
    assert team["links"]["other"].token not in text and gone.token not in text  # another project's, revoked
    assert run.audit_label in text and ">ed<" in text and ">alice<" in text
    members = logged_in.get(reverse("projects:members", args=["default"])).content.decode()
    assert f'href="{url}"' in members

    revoke = reverse("project_share_link_revoke", args=["default", team["links"]["default"].pk])
    response = logged_in.post(revoke, follow=True)
    assert "Share link revoked" in response.content.decode()
    assert not opens(team["links"]["default"]) and opens(alices)
    event = AuditEvent.objects.get(action=Action.REVOKED, detail__link=team["links"]["default"].pk)
    assert event.actor == user
    # Another project's link is not this page's to revoke, even for an admin of both.
    other = reverse("project_share_link_revoke", args=["default", team["links"]["other"].pk])
    assert logged_in.post(other).status_code == 404 and opens(team["links"]["other"])


def test_the_list_is_the_admins_alone(team):
    page = signed_in(team["ed"]).get(reverse("project_share_links", args=["default"]))
    assert page.status_code == 403 and "admin role" in page.content.decode()
    members = signed_in(team["ed"]).get(reverse("projects:members", args=["default"])).content.decode()
    assert reverse("project_share_links", args=["default"]) not in members


def test_a_link_made_to_expire_opens_its_run_until_then(logged_in, team):
    run = team["runs"]["default"]
    share = reverse("runs:share", args=[run.pk])
    panel = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert '<option value="">never</option><option value="7">in 7 days</option>' in panel
    logged_in.post(share, {"expires": "7"}, HTTP_HX_REQUEST="true")
    link = ShareLink.objects.latest("pk")
    assert timedelta(days=7) - (link.expires_at - timezone.now()) < timedelta(minutes=1)
    assert opens(link)
    assert AuditEvent.objects.filter(action=Action.SHARED, detail__link=link.pk).get().detail["expires"]
    ShareLink.objects.filter(pk=link.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert not opens(link)
    assert link.pk not in [each.pk for each in selectors.active_share_links(run)]
    assert logged_in.post(share, {"expires": "365"}).status_code == 400
    logged_in.post(share, {"expires": ""})
    assert ShareLink.objects.latest("pk").expires_at is None  # never, unless chosen


def test_a_links_last_use_is_noted_at_most_once_a_minute(team):
    link = team["links"]["default"]
    assert link.last_used_at is None
    opens(link)
    link.refresh_from_db()
    first = link.last_used_at
    assert first is not None
    opens(link)
    link.refresh_from_db()
    assert link.last_used_at == first
    ShareLink.objects.filter(pk=link.pk).update(last_used_at=first - timedelta(minutes=2))
    opens(link)
    link.refresh_from_db()
    assert link.last_used_at > first - timedelta(minutes=2)


# --- Who sees a link's URL on the run page --------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_see_how_many_links_a_run_has_but_not_their_urls(role, team, django_user_model):
    run, link = team["runs"]["default"], team["links"]["default"]
    member = django_user_model.objects.create_user(f"a-{role}", password="x")
    join(member, team["here"], role)
    page = words(signed_in(member).get(reverse("runs:detail", args=[run.pk])))
    assert link.token not in page
    assert "1 active link: only its maker and the project's admins see and revoke it." in page
    assert 'title="1 active link">1</span>' in page  # the Share button's count


def test_an_editor_sees_their_own_links_urls_and_counts_the_others(team, user):
    run, eds = team["runs"]["default"], team["links"]["default"]
    alices = services.create_share_link(run, user)
    client = signed_in(team["ed"])
    page = words(client.get(reverse("runs:detail", args=[run.pk])))
    assert f"/s/{eds.token}/" in page and alices.token not in page
    assert "1 active link made by other members: only its maker and the project's admins" in page
    assert 'title="2 active links">2</span>' in page
    # The panel the share button sends back (htmx) holds the same: their new link, not the others'.
    panel = words(client.post(reverse("runs:share", args=[run.pk]), HTTP_HX_REQUEST="true"))
    newest = ShareLink.objects.latest("pk")
    assert f"/s/{newest.token}/" in panel and alices.token not in panel
    assert 'title="3 active links"' in panel


def test_an_admin_sees_every_links_url_with_its_maker(logged_in, user, team):
    run, eds = team["runs"]["default"], team["links"]["default"]
    alices = services.create_share_link(run, user)
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert f"/s/{eds.token}/" in page and f"/s/{alices.token}/" in page
    assert "ed, " in page and 'id="share-others"' not in page


# --- Who revokes a link from the run page ---------------------------------------------------------------------


def test_a_maker_made_a_viewer_still_revokes_their_link_but_no_one_elses(user, team):
    """Revoking only takes access away: a member demoted below editor keeps the Revoke button of the links they
    made, and its POST works; another member's link still takes an admin."""
    run, eds = team["runs"]["default"], team["links"]["default"]
    alices = services.create_share_link(run, user)
    project_services.change_role(Membership.objects.get(user=team["ed"], project=team["here"]), Role.VIEWER)
    ed = signed_in(team["ed"])
    page = ed.get(reverse("runs:detail", args=[run.pk])).content.decode()
    revoke = reverse("runs:revoke", args=[run.pk, eds.pk])
    form = page[page.index(f'action="{revoke}"') :]
    assert form[: form.index("</form>")].count("disabled") == 0  # the Revoke button is there to press

    refused = ed.post(reverse("runs:revoke", args=[run.pk, alices.pk]))
    assert refused.status_code == 403 and "admin role" in refused.content.decode()
    assert opens(alices)
    assert ed.post(revoke).status_code == 302
    assert not opens(eds) and opens(alices)
    event = AuditEvent.objects.get(action=Action.REVOKED, detail__link=eds.pk)
    assert event.actor == team["ed"]
