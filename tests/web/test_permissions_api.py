"""Every route of the API, for every kind of caller: with objects in project A, a viewer, reviewer, editor and
admin of A, an admin of project B only, and no one at all, each by token and by session.

No credentials is a 401; a non-member finds nothing (404, as for what does not exist); a member whose role is
below what the route needs gets a 403; everyone else gets the route's answer. A refused call changes nothing.
The routes come from the API's own OpenAPI schema, so a new route fails here until NEEDS says what it needs.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from django.test import Client

from engine.matrix import parse_variants
from evalsite.api import api
from projects.models import Membership, Project
from projects.roles import Can, allows
from runs.matrix import create_matrix
from runs.models import ApiToken, Conversation, LaunchKey, Run, Status
from runs.services import create_run
from runs.tokens import create_token
from suites.models import Suite, SuiteVersion
from suites.services import create_suite
from tests.factories import MOCK_CI_SUITE, bearer, play

pytestmark = pytest.mark.django_db

SUITE = MOCK_CI_SUITE.format(name="perm-suite")
PUBLIC = None  # a route anyone may read, signed in or not

# What each route needs, by "METHOD path" pattern (fnmatch): every route of the API matches exactly one.
NEEDS: dict[str, Can | None] = {
    "GET /api/suites/schema.json": PUBLIC,
    "POST /api/suites/validate": Can.VIEW,
    "POST /api/runs": Can.EDIT,
    "GET /api/runs": Can.VIEW,
    "GET /api/runs/{run_id}": Can.VIEW,
    "GET /api/runs/{run_id}/progress": Can.VIEW,
    "GET /api/runs/{run_id}/results": Can.VIEW,
    "GET /api/runs/{run_id}/results.*": Can.VIEW,  # every export format (engine.exports.FORMATS)
    "POST /api/runs/{run_id}/cancel": Can.EDIT,
    "POST /api/runs/{run_id}/retry-errored": Can.EDIT,
    "POST /api/runs/{run_id}/regrade": Can.EDIT,
    "GET /api/runs/{run_id}/compare/{other_id}": Can.VIEW,
    "POST /api/matrices": Can.EDIT,
    "GET /api/matrices/{matrix_id}": Can.VIEW,
}

# What an allowed caller gets; a route not named answers 200. Retrying a run whose errors an earlier caller
# already retried is a 409 (nothing left to retry), which is the route's answer, not a refusal.
ANSWERS = {
    "POST /api/runs": {201},
    "POST /api/matrices": {201},
    "POST /api/runs/{run_id}/regrade": {201},
    "POST /api/runs/{run_id}/retry-errored": {200, 409},
}

ROLES = ["viewer", "reviewer", "editor", "admin"]
OUTSIDER = "member of B only"
ANONYMOUS = "no one"


def routes() -> list[str]:
    schema = api.get_openapi_schema()
    return [f"{method.upper()} {path}" for path, methods in schema["paths"].items() for method in methods]


def needed(route: str) -> Can | None:
    (pattern,) = [pattern for pattern in NEEDS if fnmatchcase(route, pattern)]
    return NEEDS[pattern]


def test_every_api_route_says_what_it_needs():
    """A route the table does not name (or names twice) would go untested: it fails here instead."""
    unmatched = [route for route in routes() if sum(fnmatchcase(route, p) for p in NEEDS) != 1]
    assert not unmatched, f"add these API routes to NEEDS in {__name__}: {unmatched}"
    stale = [pattern for pattern in NEEDS if not any(fnmatchcase(route, pattern) for route in routes())]
    assert not stale, f"NEEDS names routes the API no longer has: {stale}"


@pytest.fixture
def world(django_user_model):
    """Project A with a suite, a finished run with an errored conversation and a second run; project B with a
    suite of the same name; a member of A for each role and an admin of B, each with a token in their project."""
    a = Project.objects.create(slug="a", name="A")
    b = Project.objects.create(slug="b", name="B")
    people = {}
    for role in ROLES:
        people[role] = django_user_model.objects.create_user(username=role, password="pw-12345678")
        Membership.objects.create(project=a, user=people[role], role=role)
    people[OUTSIDER] = django_user_model.objects.create_user(username="outsider", password="pw-12345678")
    Membership.objects.create(project=b, user=people[OUTSIDER], role="admin")
    tokens = {who: create_token(user, "ci", b if who == OUTSIDER else a)[1] for who, user in people.items()}
    suite = create_suite(owner=people["editor"], source=SUITE, project=a)
    create_suite(owner=people[OUTSIDER], source=SUITE, project=b)
    run = play(create_run(version=suite.latest_version, user=people["editor"]))
    # One errored conversation, so that retrying has something to do.
    Conversation.objects.filter(run=run, index=0).update(status=Status.ERROR)
    Run.objects.filter(pk=run.pk).update(status=Status.ERROR)
    other = play(create_run(version=suite.latest_version, user=people["admin"]))
    matrix = create_matrix(
        version=suite.latest_version, user=people["editor"], variants=parse_variants(["mock,mock@seed=1"])
    )
    return {"people": people, "tokens": tokens, "suite": suite, "run": run, "other": other, "matrix": matrix}


def request(world, route: str, caller: str, via: str):
    method, path = route.split(" ", 1)
    url = path.format(run_id=world["run"].pk, other_id=world["other"].pk, matrix_id=world["matrix"].pk)
    url = url.replace("*", "md")
    client, headers = Client(), {}
    if caller != ANONYMOUS:
        if via == "token":
            headers = bearer(world["tokens"][caller])
        else:
            client.force_login(world["people"][caller])
    bodies = {
        "POST /api/runs": {"project": "a", "suite": "perm-suite"},
        "POST /api/matrices": {"project": "a", "suite": "perm-suite", "variants": ["mock", "mock@seed=2"]},
        "POST /api/suites/validate": {"source": SUITE, "suite": str(world["suite"].public_id)},
    }
    if method == "GET":
        query = {"project": "a"} if route == "GET /api/runs" else {}
        return client.get(url, query, **headers)
    return client.post(url, bodies.get(route, {}), content_type="application/json", **headers)


def state() -> tuple:
    """What an action could change: runs and their conversations, suites and versions, tokens, launch keys."""
    return (
        sorted(Run.objects.values_list("pk", "status", "finished_at")),
        sorted(Conversation.objects.values_list("pk", "status", "attempt")),
        Suite.objects.count(),
        SuiteVersion.objects.count(),
        sorted(ApiToken.objects.values_list("pk", "revoked_at")),
        LaunchKey.objects.count(),
    )


def expected(route: str, caller: str) -> set[int]:
    can = needed(route)
    if can is PUBLIC:
        return {200}
    if caller == ANONYMOUS:
        return {401}
    if caller == OUTSIDER:
        return {404}
    if not allows(caller, can):
        return {403}
    return ANSWERS.get(route, {200})


# Callers refused first, while the objects are as made; then the allowed ones, whose actions may change them.
CALLERS = [ANONYMOUS, OUTSIDER, *ROLES]


@pytest.mark.parametrize("via", ["token", "session"])
@pytest.mark.parametrize("route", routes())
def test_each_caller_gets_what_their_role_allows(world, route, via):
    wrong = []
    for caller in CALLERS:
        before = state()
        response = request(world, route, caller, via)
        want = expected(route, caller)
        if response.status_code not in want:
            wrong.append(f"{caller}: {response.status_code}, not {sorted(want)}: {response.content[:200]!r}")
            continue
        if response.status_code in (401, 403, 404):
            if state() != before:
                wrong.append(f"{caller}: refused with {response.status_code}, yet something changed")
            if not response["Content-Type"].startswith("application/json") or "detail" not in response.json():
                wrong.append(f"{caller}: refused with {response.status_code}, but not as JSON with a detail")
        if response.status_code == 403:
            role = {Can.VIEW: "viewer", Can.LABEL: "reviewer", Can.EDIT: "editor", Can.MANAGE: "admin"}
            assert f"needs the {role[needed(route)]} role" in response.json()["detail"], response.json()
    assert not wrong, f"{route} by {via}:\n" + "\n".join(wrong)
