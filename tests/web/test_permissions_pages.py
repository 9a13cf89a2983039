"""Every page of the site against every kind of visitor: the URLconf is walked, each route's arguments are
filled from things made in project A, and each route is asked by a viewer, reviewer, editor and admin of A,
by a member of project B only, and by a visitor who is not signed in.

A non-member gets a 404 (nothing is learnt of A), a visitor the login page, a member whose role is below what
the view declares (`projects.access.needs`) a 403, and an allowed member neither. A refused POST changes
nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from engine.exports import FORMATS
from engine.matrix import parse_variants
from projects.models import Membership, Project
from projects.roles import Can, allows
from runs import reviews, services
from runs.matrix import create_matrix
from runs.models import Label, Override, ReviewAssignment, Run, ShareLink
from suites.models import Suite, SuiteVersion
from suites.services import create_suite, save_version
from tests.engine.test_calibration import SET
from tests.factories import join, play

pytestmark = pytest.mark.django_db

OUR_APPS = {
    "suites",
    "runs",
    "share",
    "projects",
    "matrices",
    "",
}  # "" holds the tokens pages, mounted without a namespace
# The admin's routes (its response cache page too: staff only, through admin.site.admin_view), the API's, and
# the sign-in pages.
NOT_OURS = ("admin", "admin_response_cache", "api", "login", "logout", "static")
# Share links are public by their token: whoever holds one reads the run, signed in or not.
PUBLIC_BY_TOKEN = "share"
# A user's own API token: anyone else's is a 404 whatever their role, so it is not a role's question.
OWN_ONLY = {"token_revoke"}
# A share link is revoked by its maker whatever their role, and by an admin: the world's link is the editor's.
MAKER_OR_ADMIN = {"runs:revoke": "editor"}

SUITE = """\
name: perm-suite
model: mock
mock:
  rules:
    - {when: "*2+2*", reply: "4"}
evals:
  - {id: add, prompt: What is 2+2?, checks: [{contains: "4"}]}
"""
TARGET = "checks[0]"
# A calibration set: the figures page is its run's, and labels go back into it.
CALIBRATION_SET = SET.replace("judge: {criteria", "judge: {model: mock, criteria")
ROLES = ["viewer", "reviewer", "editor", "admin"]
# Pages that show a form and take its POST on the same URL.
PAGE_AND_FORM = {"suites:new", "suites:detail", "suites:import", "projects:members", "tokens"}


def _routes(resolver=None, namespace: str = "") -> list[tuple[str, URLPattern]]:
    """(namespaced name, pattern) of every named route outside the admin and the API."""
    out = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace in NOT_OURS:
                continue
            inner = ":".join(part for part in (namespace, entry.namespace) if part)
            out += _routes(entry, inner)
        elif entry.name and entry.name not in NOT_OURS:
            out.append((f"{namespace}:{entry.name}" if namespace else entry.name, entry))
    return out


def our_routes() -> list[tuple[str, URLPattern]]:
    return [
        (name, pattern)
        for name, pattern in _routes()
        if name.partition(":")[0] in OUR_APPS or ":" not in name
    ]


@pytest.fixture
def world(django_user_model):
    a = Project.objects.create(slug="a", name="Project A")
    b = Project.objects.create(slug="b", name="Project B")
    people = {}
    for role in ROLES:
        people[role] = django_user_model.objects.create_user(f"{role}-of-a", password="x")
        join(people[role], a, role)
    people["outsider"] = django_user_model.objects.create_user("outsider", password="x")
    join(people["outsider"], b, "admin")
    django_user_model.objects.create_user("newcomer", password="x")
    admin = people["admin"]
    suite = create_suite(owner=admin, source=SUITE, files={"notes.md": "kept"}, project=a)
    save_version(suite=suite, source=SUITE + "# v2\n", user=admin)
    run = play(services.create_run(version=suite.latest_version, user=admin))
    other = play(services.create_run(version=suite.latest_version, user=admin))
    calibration_set = create_suite(owner=admin, source=CALIBRATION_SET, project=a)
    calibrated = play(services.create_run(version=calibration_set.latest_version, user=admin))
    conversation = run.conversations.get(index=0)
    label = reviews.save_label(conversation, admin, score=1, scale="-3..3")
    override = reviews.override_outcome(  # a reviewer withdraws their own overrides
        conversation, people["reviewer"], turn=1, target="checks[0]", passed=False, note="x"
    )
    link = services.create_share_link(run, people["editor"])  # its maker revokes it (MAKER_OR_ADMIN)
    matrix = create_matrix(
        version=suite.latest_version, user=admin, variants=parse_variants(["mock,mock@seed=1"])
    )
    return {
        "a": a,
        "people": people,
        "args": {
            "public_id": suite.public_id,
            "number": 2,
            "other": 1,
            "name": "notes.md",
            "run_id": run.pk,
            "other_id": other.pk,
            "index": 0,
            "eval_id": conversation.eval_id,
            "override_id": override.pk,
            "link_id": link.pk,
            "form": next(iter(FORMATS)),
            "slug": a.slug,
            "matrix_id": matrix.pk,
        },
        "suite": suite,
        "label": label,
        "calibration_set": calibration_set,
        # The routes that need a calibration set's run rather than a suite's.
        "calibration_run": calibrated.pk,
    }


def _post_data(name: str, world) -> dict:
    """A POST each action would carry from its form, so an allowed one does what it is for."""
    return {
        "suites:new": {"source": SUITE.replace("perm-suite", "perm-new")},
        "suites:detail": {"source": SUITE + "# v3\n"},
        "suites:validate": {"source": SUITE},
        "suites:remove_file": {"name": "notes.md"},
        "suites:launch": {"concurrency": "1"},
        "runs:label": {"score": "2", "scale": "-3..3"},
        "runs:override": {"turn": "1", "target": TARGET, "passed": "1", "note": "again"},
        "runs:labels_to_set": {"set": str(world["calibration_set"].public_id)},
        "runs:review_assign": {"user": str(world["people"]["reviewer"].pk), "scale": "0-1"},
        "projects:create": {"name": "Made in the test"},
        "projects:switch": {"project": "a"},
        "projects:members": {"action": "add", "username": "newcomer", "role": "viewer"},
        "tokens": {"name": "ci"},
    }.get(name, {})


def _state() -> tuple:
    """What an action can change, all at once: compared before and after a refused POST."""
    return (
        Suite.objects.count(),
        SuiteVersion.objects.count(),
        Run.objects.count(),
        list(Run.objects.order_by("pk").values_list("status", "pinned_at")),
        list(Label.objects.order_by("pk").values_list("score", "scale")),
        Override.objects.count(),
        list(ReviewAssignment.objects.order_by("pk").values_list("run_id", "reviewer_id", "scale")),
        list(ShareLink.objects.order_by("pk").values_list("revoked_at", flat=True)),
        list(Membership.objects.order_by("pk").values_list("user_id", "project_id", "role")),
        Project.objects.count(),
    )


def _url(name: str, pattern: URLPattern, world) -> str:
    kwargs = {key: world["args"][key] for key in pattern.pattern.converters}
    if name == "runs:calibration":
        kwargs["run_id"] = world["calibration_run"]
    return reverse(name, kwargs=kwargs)


def _client(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _methods(name: str, url: str, admin_client: Client) -> list[str]:
    """POST for an action (its GET answers 405), GET for a page, and both for a page with its own form."""
    if name in PAGE_AND_FORM:
        return ["GET", "POST"]
    return ["POST"] if admin_client.get(url).status_code == 405 else ["GET"]


def _expected(who: str, needed: Can, object_route: bool) -> str:
    if who == "anonymous":
        return "login"
    if who == "outsider":
        return "404" if object_route else "allowed"
    return "allowed" if allows(who, needed) else "403"


def test_every_route_answers_each_role_as_its_view_declares(world):
    people = world["people"]
    checked = 0
    for name, pattern in our_routes():
        if name.startswith(PUBLIC_BY_TOKEN + ":") or name in OWN_ONLY:
            continue
        view = pattern.callback
        url = _url(name, pattern, world)
        object_route = bool(pattern.pattern.converters) or name == "projects:switch"
        for method in _methods(name, url, _client(people["admin"])):
            needed = view.needs if method == "GET" else view.needs_to_post
            for who in ["anonymous", "outsider", *ROLES]:
                if name in MAKER_OR_ADMIN:
                    needed = Can.VIEW if who == MAKER_OR_ADMIN[name] else Can.MANAGE
                client = _client(people.get(who))
                before = _state()
                data = _post_data(name, world)
                response = client.get(url) if method == "GET" else client.post(url, data)
                got = response.status_code
                expected = _expected(who, needed, object_route)
                where = f"{method} {url} ({name}) as {who}: {got}"
                if expected == "login":
                    assert got == 302 and reverse("login") in response["Location"], where
                elif expected == "404":
                    assert got == 404, where
                elif expected == "403":
                    assert got == 403, where
                    assert "role" in response.content.decode(), where  # the 403 page names the role needed
                else:
                    assert got not in (403, 404), where
                if expected != "allowed" and method == "POST":
                    assert _state() == before, f"{where}: a refused POST changed something"
                checked += 1
    assert checked > 250  # the walk reached every route (45 of them), each with every visitor


def test_every_view_of_our_apps_declares_what_it_needs():
    unmarked = [
        name
        for name, pattern in our_routes()
        if not name.startswith(PUBLIC_BY_TOKEN + ":") and not hasattr(pattern.callback, "needs")
    ]
    assert unmarked == []
    assert any(
        name.startswith(PUBLIC_BY_TOKEN + ":") for name, _ in our_routes()
    )  # the exclusion means something


def test_a_viewer_sees_another_members_run_and_every_suite_of_the_project(world):
    viewer = _client(world["people"]["viewer"])
    run = world["args"]["run_id"]
    assert viewer.get(reverse("runs:detail", args=[run])).status_code == 200
    assert str(run) in viewer.get(reverse("runs:list")).content.decode()
    assert "perm-suite" in viewer.get(reverse("suites:list")).content.decode()
    # Someone else in the project: their suites show too, and never another project's.
    editor = world["people"]["editor"]
    create_suite(owner=editor, source=SUITE.replace("perm-suite", "editors-suite"), project=world["a"])
    outsider = world["people"]["outsider"]
    create_suite(
        owner=outsider, source=SUITE.replace("perm-suite", "b-only"), project=Project.objects.get(slug="b")
    )
    page = viewer.get(reverse("suites:list")).content.decode()
    assert "editors-suite" in page and "b-only" not in page


def test_compare_and_the_review_queue_work_across_members(world):
    reviewer = _client(world["people"]["reviewer"])
    args = world["args"]
    compared = reviewer.get(reverse("runs:compare_with", args=[args["run_id"], args["other_id"]]))
    assert compared.status_code == 200
    queue = reviewer.get(reverse("runs:review", args=[args["run_id"]]))
    assert queue.status_code == 200 and "Your label" in queue.content.decode()
    reviewer.post(reverse("runs:label", args=[args["run_id"], 0]), {"score": "-1", "scale": "-3..3"})
    assert Label.objects.filter(created_by=world["people"]["reviewer"]).count() == 1
    assert Label.objects.count() == 2  # the admin's label stays apart from the reviewer's


def test_a_viewer_sees_the_run_page_without_a_control_that_would_be_refused(world):
    page = _client(world["people"]["viewer"]).get(reverse("runs:detail", args=[world["args"]["run_id"]]))
    text = page.content.decode()
    assert (
        "Needs the editor role in this project" in text and "Needs the reviewer role in this project" in text
    )
    assert f'href="{reverse("runs:review", args=[world["args"]["run_id"]])}"' not in text
    admin_page = _client(world["people"]["admin"]).get(reverse("runs:detail", args=[world["args"]["run_id"]]))
    assert "Needs the" not in admin_page.content.decode()


def test_a_reviewer_withdraws_their_own_overrides_and_only_an_admin_withdraws_anothers(world):
    run = Run.objects.get(pk=world["args"]["run_id"])
    conversation = run.conversations.get(index=0)
    Override.objects.all().delete()  # the reviewer's, made with the world
    admins = reviews.override_outcome(
        conversation, world["people"]["admin"], turn=1, target=TARGET, passed=False, note="admin's"
    )
    url = reverse("runs:remove_override", args=[run.pk, 0, admins.pk])
    for role in ("reviewer", "editor"):
        refused = _client(world["people"][role]).post(url, {"turn": "1"})
        assert refused.status_code == 403 and "admin role" in refused.content.decode()
    assert Override.objects.filter(pk=admins.pk).exists()
    assert _client(world["people"]["admin"]).post(url, {"turn": "1"}).status_code == 302
    assert not Override.objects.filter(pk=admins.pk).exists()


def test_an_editor_revokes_their_own_share_links_and_only_an_admin_revokes_anothers(world):
    run = Run.objects.get(pk=world["args"]["run_id"])
    admins = services.create_share_link(run, world["people"]["admin"])
    url = reverse("runs:revoke", args=[run.pk, admins.pk])
    refused = _client(world["people"]["editor"]).post(url)
    assert refused.status_code == 403 and "admin role" in refused.content.decode()
    admins.refresh_from_db()
    assert admins.revoked_at is None
    assert _client(world["people"]["admin"]).post(url).status_code == 302
    admins.refresh_from_db()
    assert admins.revoked_at is not None
