"""Running from CI: personal API tokens (made in the UI or the terminal, shown once, stored hashed,
revocable at once) and the API a CI job drives with `Authorization: Bearer`: launch, list, status, results
with their JUnit and Markdown forms, cancel, compare. Runs use the built-in mock model, played in this process
as a worker plays them (runs.worker.pump.execute)."""

from __future__ import annotations

import hashlib
import io
import json
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr, redirect_stdout

import pytest
from django.test import Client
from django.urls import reverse

from evalsite import cli
from runs.models import ApiToken, Run
from runs.services import pin_baseline
from runs.tokens import create_token
from tests.factories import MOCK_CI_SUITE, bearer, body, play, project_of

pytestmark = pytest.mark.django_db

SUITE = MOCK_CI_SUITE.format(name="ci-suite")


def send(client: Client, token: str, body: dict):
    return client.post("/api/runs", body, content_type="application/json", **bearer(token))


@pytest.fixture
def api(user):
    """A client with no session and no CSRF token, as a CI job is, and a token of alice's."""
    _, token = create_token(user, "ci")
    return Client(enforce_csrf_checks=True), token


# --- tokens ---------------------------------------------------------------------------------------------------


def test_a_token_made_in_the_ui_is_shown_once_and_stored_hashed(client, user):
    client.force_login(user)
    page = client.post(reverse("tokens"), {"name": "ci"})
    assert page.status_code == 200 and page["Cache-Control"].startswith("max-age=0")
    token = page.context["created"]["token"]
    assert token.startswith("evs_") and token in page.content.decode()
    row = ApiToken.objects.get(user=user)
    assert row.digest == hashlib.sha256(token.encode()).hexdigest() and row.name == "ci"
    assert not ApiToken.objects.filter(digest=token).exists()
    listing = client.get(reverse("tokens")).content.decode()
    assert token not in listing and row.hint in listing and "never" in listing  # not used yet


def test_a_token_needs_a_name(client, user):
    client.force_login(user)
    page = client.post(reverse("tokens"), {"name": "  "})
    assert page.status_code == 422 and "give the token a name" in page.content.decode()
    assert not ApiToken.objects.exists()


def test_the_token_forms_need_csrf(user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    assert browser.post(reverse("tokens"), {"name": "ci"}).status_code == 403
    row, _ = create_token(user, "ci")
    assert browser.post(reverse("token_revoke", args=[row.pk])).status_code == 403


def test_revoking_ends_access_at_once(client, user, api):
    anonymous, token = api
    assert anonymous.get("/api/runs", **bearer(token)).status_code == 200
    row = ApiToken.objects.get(user=user)
    assert row.last_used_at is not None  # "last used" is shown beside each token
    client.force_login(user)
    client.post(reverse("token_revoke", args=[row.pk]))
    assert anonymous.get("/api/runs", **bearer(token)).status_code == 401


def test_a_token_of_another_project_cannot_be_revoked(client, user, other_user):
    """Alice is an admin of hers, which lets her revoke its members' tokens: not those of a project of mallory's."""
    row, token = create_token(other_user, "theirs", project_of(other_user))
    client.force_login(user)
    client.post(reverse("token_revoke", args=[row.pk]))
    assert ApiToken.objects.get(pk=row.pk).is_active


def test_no_token_or_a_wrong_one_is_401(api):
    anonymous, token = api
    assert anonymous.get("/api/runs").status_code == 401
    assert anonymous.get("/api/runs", **bearer(token[:-2] + "xx")).status_code == 401
    assert anonymous.get("/api/runs", **bearer("not-a-token")).status_code == 401
    assert anonymous.get("/api/runs", HTTP_AUTHORIZATION=f"Token {token}").status_code == 401
    # A wrong token on a POST is a 401 too, not the session's CSRF failure.
    assert send(anonymous, "evs_wrong", {"yaml": SUITE}).status_code == 401


def test_an_inactive_users_token_stops_working(user, api):
    anonymous, token = api
    user.is_active = False
    user.save()
    assert anonymous.get("/api/runs", **bearer(token)).status_code == 401


def test_the_terminal_makes_lists_and_revokes_tokens(user):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert cli.main(["token", "create", "--user", "alice", "--name", "ci"]) == 0
    token = out.getvalue().strip()
    assert token.startswith("evs_") and "shown once" in err.getvalue()
    assert Client().get("/api/runs", **bearer(token)).status_code == 200
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["token", "list", "--user", "alice"]) == 0
    assert "ci\t" in out.getvalue() and token not in out.getvalue() and "active" in out.getvalue()
    with redirect_stderr(io.StringIO()):
        assert cli.main(["token", "revoke", "--user", "alice", "--name", "ci"]) == 0
    assert Client().get("/api/runs", **bearer(token)).status_code == 401
    err = io.StringIO()
    with redirect_stderr(err):
        assert cli.main(["token", "create", "--user", "nobody", "--name", "ci"]) == 2
    assert "no user named 'nobody'" in err.getvalue()


# --- the API a CI job drives ----------------------------------------------------------------------------------


def test_launch_from_yaml_then_poll_and_read_every_export(api):
    anonymous, token = api
    response = anonymous.post(
        "/api/runs", {"yaml": SUITE, "concurrency": 2}, content_type="application/json", **bearer(token)
    )  # no CSRF token: a bearer token is not something another site's page can send
    assert response.status_code == 201, response.content
    launched = response.json()
    assert (launched["suite"], launched["version"], launched["model"], launched["status"]) == (
        "ci-suite", 1, "mock", "queued",
    )  # fmt: skip
    assert launched["url"].endswith(f"/runs/{launched['id']}/") and launched["concurrency"] == 2
    play(launched["id"])

    status = anonymous.get(f"/api/runs/{launched['id']}", **bearer(token)).json()
    assert status["status"] == "passed" and status["progress"]["done"] == 2
    assert status["progress"]["percent"] == 100

    results = json.loads(body(anonymous.get(launched["links"]["results"], **bearer(token))))
    assert results["format"] == "evalsite.results/1" and results["totals"]["passed"] == 2

    junit = anonymous.get(launched["links"]["junit"], **bearer(token))
    assert junit["Content-Type"] == "application/xml"
    suite = ET.fromstring(junit.content).find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert "[User]:\nWhat is 2+2?\n\n[Assistant]:\n4" in suite.find("testcase/system-out").text

    markdown = anonymous.get(launched["links"]["markdown"], **bearer(token)).content.decode()
    assert markdown.startswith("### ✅ evalsite: ci-suite passed") and launched["url"] in markdown


def test_the_same_yaml_again_reuses_the_version_and_an_edit_makes_the_next(api):
    anonymous, token = api

    def post(body):
        return send(anonymous, token, body)

    assert post({"yaml": SUITE}).json()["version"] == 1
    assert post({"yaml": SUITE}).json()["version"] == 1
    assert post({"yaml": SUITE.replace("Paris}]}", "Paris}]}\n  - {prompt: Hi, checks: [{match: '*'}]}")}).json()["version"] == 2  # fmt: skip
    by_name = post({"suite": "ci-suite", "version": 1, "model": "mock/other"}).json()
    assert (by_name["version"], by_name["model"]) == (1, "mock/other")
    assert post({"suite": "ci-suite"}).json()["version"] == 2


def test_launch_refusals_say_why(api):
    anonymous, token = api

    def post(body):
        return send(anonymous, token, body)

    missing = post({"suite": "nope"})
    assert missing.status_code == 404 and "no suite named 'nope'" in missing.json()["detail"]
    broken = post({"yaml": "name: x\nevals:\n  - prompt: Hi\n    checks: [{mach: '*'}]\n"})
    assert broken.status_code == 422
    (problem,) = broken.json()["problems"]
    assert (problem["line"], problem["path"]) == (4, "evals[0].checks[0].mach")
    assert "did you mean `match`" in problem["message"]
    assert post({}).status_code == 422
    asks_nothing = post(
        {
            "yaml": "name: x\nmodel: mock\nevals:\n  - messages: [{role: system, content: S}]\n    checks: [{contains: a}]\n"
        }
    )
    assert asks_nothing.status_code == 422
    (problem,) = asks_nothing.json()["problems"]
    assert (problem["line"], problem["path"]) == (4, "evals[0].messages")
    assert "asks nothing" in problem["message"]
    post({"yaml": SUITE})
    assert post({"suite": "ci-suite", "version": 9}).status_code == 404
    no_model = post({"yaml": SUITE.replace("ci-suite", "modelless").replace("model: mock\n", "")})
    assert no_model.status_code == 422 and "names no model" in no_model.json()["detail"]


def test_a_session_post_still_needs_csrf(user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    response = browser.post("/api/runs", {"yaml": SUITE}, content_type="application/json")
    assert response.status_code == 403


def test_list_filters_and_pages(user, other_user, api):
    anonymous, token = api

    def post(source):
        return send(anonymous, token, {"yaml": source})

    first = post(SUITE).json()
    play(first["id"])
    second = post(SUITE.replace("ci-suite", "other-suite")).json()
    _, theirs = create_token(other_user, "x")
    Client().post("/api/runs", {"yaml": SUITE}, content_type="application/json", **bearer(theirs))

    def listed(**query):
        return anonymous.get("/api/runs", query, **bearer(token)).json()

    everything = listed()
    assert everything["count"] == 2  # mallory's run is not alice's to see
    assert [run["id"] for run in everything["runs"]] == [second["id"], first["id"]]  # newest first
    assert [run["id"] for run in listed(suite="other")["runs"]] == [second["id"]]
    assert [run["id"] for run in listed(status="passed")["runs"]] == [first["id"]]
    page = listed(limit=1, offset=1)
    assert page["count"] == 2 and [run["id"] for run in page["runs"]] == [first["id"]]
    assert listed(model="gpt")["count"] == 0
    # What `--baseline pinned` asks: a suite by its exact name, its pinned run only.
    assert listed(suite_name="ci-suite", pinned="true")["count"] == 0
    pin_baseline(Run.objects.get(pk=first["id"]))
    assert [run["id"] for run in listed(suite_name="ci-suite", pinned="true")["runs"]] == [first["id"]]
    assert listed(suite_name="ci-suit", pinned="true")["count"] == 0


def test_other_users_runs_are_404_through_every_route(other_user, api):
    anonymous, token = api
    _, theirs = create_token(other_user, "x", project_of(other_user))  # in a project alice is not a member of
    run_id = Client().post("/api/runs", {"yaml": SUITE}, content_type="application/json", **bearer(theirs)).json()["id"]  # fmt: skip
    for path in ("", "/results", "/results.junit.xml", "/results.md", "/progress", f"/compare/{run_id}"):
        assert anonymous.get(f"/api/runs/{run_id}{path}", **bearer(token)).status_code == 404, path
    assert anonymous.post(f"/api/runs/{run_id}/cancel", **bearer(token)).status_code == 404
    assert Run.objects.get(pk=run_id).status == "queued"


def test_cancel(api):
    anonymous, token = api
    run_id = anonymous.post("/api/runs", {"yaml": SUITE}, content_type="application/json", **bearer(token)).json()["id"]  # fmt: skip
    cancelled = anonymous.post(f"/api/runs/{run_id}/cancel", **bearer(token)).json()
    assert cancelled == {"cancelled": True, "status": "cancelled"}
    again = anonymous.post(f"/api/runs/{run_id}/cancel", **bearer(token)).json()
    assert again == {"cancelled": False, "status": "cancelled"}


def test_compare_and_a_markdown_summary_against_a_baseline(api):
    anonymous, token = api

    def post(source):
        return send(anonymous, token, {"yaml": source})

    baseline = post(SUITE).json()
    play(baseline["id"])
    # The model now gets the capital wrong: one regression.
    candidate = post(SUITE.replace('reply: "Paris"', 'reply: "Lyon"')).json()
    play(candidate["id"])
    compared = anonymous.get(f"/api/runs/{baseline['id']}/compare/{candidate['id']}", **bearer(token)).json()
    assert compared["counts"]["regression"] == 1 and compared["counts"]["unchanged"] == 1
    (regressed,) = [row for row in compared["evals"] if row["change"] == "regression"]
    assert regressed["id"] == "capital" and regressed["before"]["status"] == "passed"
    assert regressed["after"]["status"] == "failed" and regressed["score_delta"] == -1.0
    summary = anonymous.get(
        f"/api/runs/{candidate['id']}/results.md", {"baseline": baseline["id"]}, **bearer(token)
    ).content.decode()
    assert "**1** regressed · **0** fixed" in summary
    assert (
        f'| regressed | capital | ❌ turn 1: contains "Paris": substring not found | '
        f"[open](http://testserver/runs/{candidate['id']}/c/1/) |" in summary
    )
    assert baseline["url"] in summary
