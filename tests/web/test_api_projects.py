"""The API, tokens and endpoints belong to a project: a token acts only in its project, with its user's role
there; a session acts in the project it names or the current one; an endpoint of one project is refused to
another's launches and left out of their launch form; the tokens page is the current project's."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.admin.sites import site
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from endpoints.models import Endpoint
from evalsite.cli import remote
from evalsite.cli.main import main
from projects.models import Membership, Project
from runs.models import ApiToken, Run
from runs.services import LaunchError, create_run
from runs.tokens import create_token
from suites.models import Suite
from suites.services import create_suite
from tests.factories import MOCK_CI_SUITE, bearer

pytestmark = pytest.mark.django_db


def suite_source(name: str = "shared-name", model: str = "mock") -> str:
    return MOCK_CI_SUITE.format(name=name).replace("model: mock", f"model: {model}", 1)


@pytest.fixture
def teams(django_user_model):
    """Projects A and B; alice edits both (her first project is A), bob is a viewer of A, dave an editor of B;
    each project has a suite named `shared-name` with a run (A's made by alice, B's by dave)."""
    a = Project.objects.create(slug="a", name="Team A")
    b = Project.objects.create(slug="b", name="Team B")
    alice = django_user_model.objects.create_user("alice", password="pw-alice-123")
    bob = django_user_model.objects.create_user("bob", password="pw-bob-1234")
    Membership.objects.create(project=a, user=alice, role="editor")
    Membership.objects.create(project=b, user=alice, role="editor")
    Membership.objects.create(project=a, user=bob, role="viewer")
    dave = django_user_model.objects.create_user("dave", password="pw-dave-1234")
    Membership.objects.create(project=b, user=dave, role="editor")
    runs = {}
    for project, owner in ((a, alice), (b, dave)):
        suite = create_suite(owner=owner, source=suite_source(), project=project)
        runs[project.slug] = create_run(version=suite.latest_version, user=owner)
    return {"a": a, "b": b, "alice": alice, "bob": bob, "dave": dave, "runs": runs}


def ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {run["id"] for run in response.json()["runs"]}


def test_a_token_lists_and_reads_its_own_projects_runs_only(teams):
    _, token_b = create_token(teams["alice"], "ci", teams["b"])
    run_a, run_b = str(teams["runs"]["a"].pk), str(teams["runs"]["b"].pk)
    client = Client()
    assert ids(client.get("/api/runs", **bearer(token_b))) == {run_b}
    assert client.get(f"/api/runs/{run_b}", **bearer(token_b)).json()["project"] == "b"
    # Alice may see A's run with a session, but this token acts in B only.
    assert client.get(f"/api/runs/{run_a}", **bearer(token_b)).status_code == 404
    named = client.get("/api/runs", {"project": "a"}, **bearer(token_b))
    assert named.status_code == 404 and "acts only in the project 'b'" in named.json()["detail"]


def test_a_session_lists_the_project_it_names_else_the_current_one(teams):
    client = Client()
    client.force_login(teams["alice"])
    run_a, run_b = str(teams["runs"]["a"].pk), str(teams["runs"]["b"].pk)
    assert ids(client.get("/api/runs")) == {run_a}  # her first project
    assert ids(client.get("/api/runs", {"project": "b"})) == {run_b}
    assert client.get(f"/api/runs/{run_b}").status_code == 200
    client.force_login(teams["bob"])
    assert client.get("/api/runs", {"project": "b"}).status_code == 404
    assert client.get(f"/api/runs/{run_b}").status_code == 404


def test_launch_by_name_finds_the_suite_of_the_tokens_project(teams):
    _, token_b = create_token(teams["alice"], "ci", teams["b"])
    launched = Client().post(
        "/api/runs", {"suite": "shared-name"}, content_type="application/json", **bearer(token_b)
    )
    assert launched.status_code == 201, launched.content
    run = Run.objects.get(pk=launched.json()["id"])
    assert run.project == teams["b"] and run.suite_version.suite.project == teams["b"]


def test_launch_from_yaml_saves_the_suite_in_the_tokens_project(teams):
    _, token_b = create_token(teams["alice"], "ci", teams["b"])
    body = {"yaml": suite_source("brand-new")}
    launched = Client().post("/api/runs", body, content_type="application/json", **bearer(token_b))
    assert launched.status_code == 201, launched.content
    assert Suite.objects.get(name="brand-new").project == teams["b"]


def test_a_viewers_token_reads_but_cannot_launch_or_cancel(teams):
    _, token = create_token(teams["bob"], "ci", teams["a"])
    run = teams["runs"]["a"]
    client = Client()
    assert client.get(f"/api/runs/{run.pk}", **bearer(token)).status_code == 200
    refused = client.post(
        "/api/runs", {"suite": "shared-name"}, content_type="application/json", **bearer(token)
    )
    assert refused.status_code == 403 and "needs the editor role" in refused.json()["detail"]
    assert client.post(f"/api/runs/{run.pk}/cancel", **bearer(token)).status_code == 403
    assert Run.objects.count() == 2 and Run.objects.get(pk=run.pk).status == run.status


def test_a_token_stops_working_when_its_user_leaves_the_project_and_again_on_return(teams):
    _, token = create_token(teams["bob"], "ci", teams["a"])
    client = Client()
    assert client.get("/api/runs", **bearer(token)).status_code == 200
    Membership.objects.filter(user=teams["bob"], project=teams["a"]).delete()
    assert client.get("/api/runs", **bearer(token)).status_code == 401
    Membership.objects.create(project=teams["a"], user=teams["bob"], role="viewer")
    assert client.get("/api/runs", **bearer(token)).status_code == 200


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_tokens_made_before_projects_act_in_the_default_project_and_endpoints_stay_shared():
    old = migrate([("runs", "0024_run_project"), ("endpoints", "0001_initial")])
    user = old.get_model("auth", "User").objects.create(username="ci-owner")
    old.get_model("runs", "ApiToken").objects.create(user=user, name="ci", digest="d" * 64, hint="evs_x")
    old.get_model("endpoints", "Endpoint").objects.create(name="local", base_url="http://127.0.0.1:9/v1")
    try:
        new = migrate([("runs", "0026_apitoken_project"), ("endpoints", "0002_endpoint_project")])
        default = new.get_model("projects", "Project").objects.get(slug="default")
        assert new.get_model("runs", "ApiToken").objects.get(name="ci").project_id == default.pk
        assert new.get_model("endpoints", "Endpoint").objects.get(name="local").project_id is None
    finally:  # back to the latest schema, for the tests after this one
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


# --- endpoints ----------------------------------------------------------------------------------------------


# What a member of A is told of B's endpoint `fake` is what they are told of a name no endpoint has: nothing
# of B (its endpoint's name in a list, its URL, its prices) and no word of another project.
UNKNOWN = "no endpoint is named `fake`"
LEAKS = ("another project", "fake (http", "endpoints: fake", "did you mean `fake`", "endpoint fake")


def text_of(page: str) -> str:
    """What a page fragment reads as: its tags left out, its entities read, its whitespace one space."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


def assert_told_as_unknown(text: str) -> None:
    text = text_of(text)
    assert UNKNOWN in text, text
    assert not any(leak in text for leak in LEAKS), text


@pytest.fixture
def theirs(teams, fake_endpoint):
    """B's own endpoint `fake`, and A's own `ours`."""
    fake_endpoint.project = teams["b"]
    fake_endpoint.save()
    Endpoint.objects.create(name="ours", base_url="http://127.0.0.1:9/v1", project=teams["a"])
    return fake_endpoint


def test_another_projects_endpoint_is_refused_at_launch_as_a_name_this_project_lacks(teams, theirs):
    source = suite_source("on-fake", model="fake/test-model")
    in_a = create_suite(owner=teams["alice"], source=source, project=teams["a"])
    with pytest.raises(LaunchError) as refused:
        create_run(version=in_a.latest_version, user=teams["alice"])
    # The name as written, and the names A may use: its own and the built-in ones, never B's.
    assert str(refused.value) == (
        "model `fake/test-model`: this project has no endpoint named `fake`; it may use `ours`, `mock`, "
        "`default` (`default/fake/test-model` sends `fake/test-model` whole to the default endpoint)"
    )
    judged = create_suite(
        owner=teams["alice"],
        source=suite_source("judged").replace("model: mock", "model: mock\njudge: fake/j", 1),
        project=teams["a"],
    )
    with pytest.raises(LaunchError, match="no endpoint named `fake`"):  # a judge counts as much as the model
        create_run(version=judged.latest_version, user=teams["alice"])
    in_b = create_suite(owner=teams["dave"], source=source, project=teams["b"])
    assert create_run(version=in_b.latest_version, user=teams["dave"]).endpoint_name == "fake"
    theirs.project = None  # shared again: every project may use it
    theirs.save()
    assert create_run(version=in_a.latest_version, user=teams["alice"]).endpoint_name == "fake"


def test_a_graders_judge_on_another_projects_endpoint_is_refused_too(teams, fake_endpoint):
    fake_endpoint.project = teams["b"]
    fake_endpoint.save()
    source = suite_source("graded").replace(
        "evals:",
        'graders:\n  quality: {kind: llm_judge, rubric: "Rate {submission}", model: fake/j}\nevals:',
        1,
    )
    graded = create_suite(owner=teams["alice"], source=source, project=teams["a"])
    with pytest.raises(LaunchError, match="this project has no endpoint named `fake`"):
        create_run(version=graded.latest_version, user=teams["alice"])


def test_the_api_launch_refuses_another_projects_endpoint_without_naming_that_project(teams, theirs):
    _, token_a = create_token(teams["alice"], "ci", teams["a"])
    body = {"yaml": suite_source("on-fake", model="fake/test-model")}
    refused = Client().post("/api/runs", body, content_type="application/json", **bearer(token_a))
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert "this project has no endpoint named `fake`" in detail and "another project" not in detail
    assert not Suite.objects.filter(name="on-fake").exists()  # nothing saved


class InProcessServer(remote.Server):
    """`evalsite run --server`'s calls, answered by this site's API in the test's process."""

    def _send(self, method, path, body, headers):
        extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
        response = Client().generic(
            method, path, json.dumps(body) if body is not None else "", content_type="application/json",
            **bearer(self.token), **extra,
        )  # fmt: skip
        return response.status_code, response.json()


def test_a_typod_endpoint_is_refused_by_the_api_and_the_cli_naming_it_and_the_projects_endpoints(
    teams, theirs, tmp_path, monkeypatch, capsys
):
    """`opnai/gpt-4o` names no endpoint: refused before the run starts, never sent whole to the default
    endpoint. The line names what was written and the endpoints project A may use, and none of B's."""
    _, token_a = create_token(teams["alice"], "ci", teams["a"])
    source = suite_source("typo", model="opnai/gpt-4o")
    said = (
        "model `opnai/gpt-4o`: this project has no endpoint named `opnai`; it may use `ours`, `mock`, `default` "
        "(`default/opnai/gpt-4o` sends `opnai/gpt-4o` whole to the default endpoint)"
    )
    refused = Client().post("/api/runs", {"yaml": source}, content_type="application/json", **bearer(token_a))
    assert (refused.status_code, refused.json()["detail"]) == (422, said)
    # A judge or a simulated user names an endpoint as much as the model does.
    judged = suite_source("judged").replace("model: mock", "model: mock\njudge: opnai/gpt-4o", 1)
    refused = Client().post("/api/runs", {"yaml": judged}, content_type="application/json", **bearer(token_a))
    assert refused.status_code == 422 and refused.json()["detail"].startswith("judge `opnai/gpt-4o`: ")
    simulated = (
        "name: simulated\nmodel: mock\nevals:\n  - prompt: Book a table.\n"
        "    simulate: {persona: A guest., model: opnai/user}\n    checks: [{contains: booked}]\n"
    )
    refused = Client().post(
        "/api/runs", {"yaml": simulated}, content_type="application/json", **bearer(token_a)
    )
    assert (
        refused.status_code == 422
        and "`opnai/user`: this project has no endpoint named" in refused.json()["detail"]
    )
    assert not Run.objects.filter(model__startswith="opnai").exists()

    monkeypatch.setattr(remote, "Server", InProcessServer)
    monkeypatch.setenv("EVALSITE_TOKEN", token_a)
    path = tmp_path / "typo.yaml"
    path.write_text(source)
    capsys.readouterr()
    assert main(["run", str(path), "--server", "http://testserver", "--as-latest"]) == 2
    out = capsys.readouterr()
    assert out.err.splitlines() == [f"evalsite: the server did not start the run (422): {said}"]
    # `default/` sends the id whole to the default endpoint; a bare id goes there too.
    for model in ("default/opnai/gpt-4o", "gpt-4o"):
        launched = Client().post(
            "/api/runs", {"yaml": source, "model": model}, content_type="application/json", **bearer(token_a)
        )
        assert launched.status_code == 201, launched.content
        assert (launched.json()["model"], Run.objects.get(pk=launched.json()["id"]).endpoint_name) == (
            model,
            "default",
        )


def test_the_launch_form_offers_only_the_endpoints_its_project_may_use(teams, theirs):
    suite = Suite.objects.get(project=teams["a"])
    client = Client()
    client.force_login(teams["alice"])
    page = client.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    assert 'value="ours/"' in page
    assert 'value="fake/"' not in page


def test_validate_says_of_another_projects_endpoint_what_it_says_of_a_typo(teams, theirs):
    _, token_a = create_token(teams["alice"], "ci", teams["a"])
    body = {"source": suite_source("on-fake", model="fake/test-model")}
    answer = Client().post("/api/suites/validate", body, content_type="application/json", **bearer(token_a))
    text = " ".join([*answer.json()["routes"], *(w["message"] for w in answer.json()["warnings"])])
    assert_told_as_unknown(text)
    assert "endpoints: ours" in text  # the names it may use, and only those
    typo = {"source": suite_source("on-fake", model="fkae/test-model")}
    answer = Client().post("/api/suites/validate", typo, content_type="application/json", **bearer(token_a))
    text = " ".join(w["message"] for w in answer.json()["warnings"])
    assert "no endpoint is named `fkae`" in text and "fake" not in text.replace("fkae", "")


def test_the_editor_and_the_launch_panel_say_of_it_what_they_say_of_a_typo(teams, theirs):
    client = Client()
    client.force_login(teams["alice"])  # her current project is A
    source = suite_source("on-fake", model="fake/test-model")
    body = client.post(
        reverse("suites:validate"), {"source": source}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert_told_as_unknown(body)
    suite = Suite.objects.get(project=teams["a"])
    routes = reverse("suites:launch_routes", args=[suite.public_id])
    panel = client.get(routes, {"model": "fake/test-model", "compare": "mock"}).content.decode()
    assert_told_as_unknown(panel)
    client.get(reverse("tokens"), {"project": "b"})  # switches to B, whose endpoint it is
    body = client.post(
        reverse("suites:validate"), {"source": source}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert UNKNOWN not in text_of(body) and "fake (http" in text_of(body)


def test_the_admin_shows_and_filters_endpoints_by_project(teams, admin_client):
    Endpoint.objects.create(name="theirs", base_url="http://127.0.0.1:9/v1", project=teams["b"])
    Endpoint.objects.create(name="everyones", base_url="http://127.0.0.1:9/v1")
    listing = admin_client.get(reverse("admin:endpoints_endpoint_changelist")).content.decode()
    assert "Team B" in listing and "shared by every project" in listing
    filtered = admin_client.get(
        reverse("admin:endpoints_endpoint_changelist"), {"project__id__exact": teams["b"].pk}
    )
    assert "theirs" in filtered.content.decode() and "everyones" not in filtered.content.decode()
    assert "project" in site._registry[Endpoint].list_filter[0]


# --- the tokens page ----------------------------------------------------------------------------------------


def test_an_editor_makes_a_token_in_the_current_project_and_sees_which(teams):
    client = Client()
    client.force_login(teams["alice"])
    client.get(reverse("tokens"), {"project": "b"})  # switches to B
    page = client.post(reverse("tokens"), {"name": "ci"})
    assert page.status_code == 200
    assert ApiToken.objects.get(name="ci").project == teams["b"]
    assert "created for Team B" in page.content.decode()


def test_a_viewer_cannot_make_a_token_and_is_told_why(teams):
    client = Client()
    client.force_login(teams["bob"])
    page = client.get(reverse("tokens")).content.decode()
    assert "needs the editor role" in page and 'name="name"' not in page
    assert client.post(reverse("tokens"), {"name": "ci"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_an_admin_sees_every_members_tokens_and_revokes_them(teams, django_user_model):
    carol = django_user_model.objects.create_user("carol", password="pw-carol-123")
    Membership.objects.create(project=teams["a"], user=carol, role="admin")
    bobs, _ = create_token(teams["bob"], "bob-ci", teams["a"])
    elsewhere, _ = create_token(teams["alice"], "alice-b", teams["b"])
    client = Client()
    client.force_login(carol)
    page = client.get(reverse("tokens")).content.decode()
    assert "bob-ci" in page and "alice-b" not in page  # every member's, in this project only
    client.post(reverse("token_revoke", args=[bobs.pk]))
    client.post(reverse("token_revoke", args=[elsewhere.pk]))
    bobs.refresh_from_db(), elsewhere.refresh_from_db()
    assert not bobs.is_active and elsewhere.is_active


def test_a_member_sees_and_revokes_only_their_own_tokens(teams):
    alices, _ = create_token(teams["alice"], "alice-ci", teams["a"])
    bobs, _ = create_token(teams["bob"], "bob-ci", teams["a"])
    client = Client()
    client.force_login(teams["bob"])
    page = client.get(reverse("tokens")).content.decode()
    assert "bob-ci" in page and "alice-ci" not in page
    client.post(reverse("token_revoke", args=[alices.pk]))
    client.post(reverse("token_revoke", args=[bobs.pk]))
    alices.refresh_from_db(), bobs.refresh_from_db()
    assert alices.is_active and not bobs.is_active
