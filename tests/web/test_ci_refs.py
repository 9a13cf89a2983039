"""A CI launch records its suite under the ref it came from (a branch, tag or commit) and never overwrites
the suite's line: the editor, the launch form, "latest" in the API and re-grade keep reading the versions
saved in the editor. The run records the ref; the runs list filters by it; the editor lists CI's versions
apart."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run
from runs.tokens import create_token
from suites.models import SuiteVersion
from suites.services import create_suite
from tests.factories import MOCK_CI_SUITE, bearer

pytestmark = pytest.mark.django_db

SUITE = MOCK_CI_SUITE.format(name="walk-support")
EDITED = SUITE.replace("Paris", "Lyon")


@pytest.fixture
def api(user):
    _, token = create_token(user, "ci")
    return Client(enforce_csrf_checks=True), token


def launch(api, source: str, **fields):
    client, token = api
    return client.post(
        "/api/runs", {"yaml": source, **fields}, content_type="application/json", **bearer(token)
    )


def test_a_ci_launch_keeps_its_yaml_off_the_suite_line(api, user, client):
    suite = create_suite(owner=user, source=SUITE)
    answer = launch(api, EDITED, ref="feature/lyon", commit="0123456789abcdef")
    assert answer.status_code == 201, answer.content
    payload = answer.json()
    assert payload["ref"] == "feature/lyon" and payload["version"] == 2
    ci = SuiteVersion.objects.get(suite=suite, number=2)
    assert ci.ref == "feature/lyon" and ci.commit == "0123456789abcdef" and ci.source == EDITED
    assert suite.latest_version.number == 1 and suite.latest_version.source == SUITE
    assert Run.objects.get(pk=payload["id"]).ref == "feature/lyon"

    # The same content from the same ref reuses its version; another ref gets its own.
    assert launch(api, EDITED, ref="feature/lyon").json()["version"] == 2
    assert launch(api, EDITED, ref="other").json()["version"] == 3

    # A launch by name without a version runs the line's latest, and the editor opens it.
    by_name = api[0].post(
        "/api/runs", {"suite": "walk-support"}, content_type="application/json", **bearer(api[1])
    )
    assert by_name.json()["version"] == 1 and by_name.json()["ref"] == ""
    client.force_login(user)
    editor = client.get(reverse("suites:detail", args=[suite.public_id]))
    assert editor.context["latest"].number == 1 and editor.context["source"] == SUITE
    assert [v.number for v in editor.context["versions"]] == [1]
    assert [v.number for v in editor.context["ci_versions"]] == [3, 2]
    page = editor.content.decode()
    assert "From CI" in page and "feature/lyon" in page and "0123456" in page
    assert f"?suite={suite.public_id}&amp;ref=feature/lyon" in page

    # The editor's next save numbers after every version, CI's included, and is the latest.
    client.post(
        reverse("suites:detail", args=[suite.public_id]), {"source": SUITE + "# note\n", "base_version": 1}
    )
    suite.refresh_from_db()
    assert suite.latest_version.number == 4 and suite.latest_version.ref == ""


def test_a_new_suite_from_ci_starts_its_line_and_the_run_keeps_the_ref(api, user):
    answer = launch(api, SUITE, ref="main", commit="abc")
    assert answer.status_code == 201
    version = SuiteVersion.objects.get(suite__name="walk-support")
    assert version.ref == "" and version.suite.latest_version == version
    assert Run.objects.get(pk=answer.json()["id"]).ref == "main"


def test_a_launch_without_a_ref_saves_the_next_version_as_before(api, user):
    suite = create_suite(owner=user, source=SUITE)
    assert launch(api, EDITED).json()["version"] == 2
    assert suite.latest_version.number == 2 and suite.latest_version.ref == ""


def test_the_runs_list_and_the_api_filter_by_ref(api, user, client):
    create_suite(owner=user, source=SUITE)
    on_branch = launch(api, EDITED, ref="feature/lyon").json()["id"]
    on_main = launch(api, SUITE, ref="main").json()["id"]
    plain = launch(api, SUITE).json()["id"]
    client_api, token = api
    listed = client_api.get("/api/runs?ref=feature/lyon", **bearer(token)).json()
    assert [run["id"] for run in listed["runs"]] == [on_branch]
    unreffed = client_api.get("/api/runs?ref=", **bearer(token)).json()
    assert [run["id"] for run in unreffed["runs"]] == [plain]

    client.force_login(user)
    page = client.get(reverse("runs:list"), {"ref": "main"})
    assert [str(run.pk) for run in page.context["runs"]] == [on_main]
    assert page.context["refs"] == ["main", "feature/lyon"]
    html = page.content.decode()
    assert '<select id="runs-ref" name="ref">' in html and '<option value="main" selected>' in html
    detail = client.get(reverse("runs:detail", args=[on_branch])).content.decode()
    assert "CI <code>feature/lyon</code>" in detail


def test_a_ci_version_can_be_run_again_and_a_launch_defaults_to_the_line(api, user, client):
    suite = create_suite(owner=user, source=SUITE)
    ci = Run.objects.get(pk=launch(api, EDITED, ref="feature/lyon", commit="0123456789abcdef").json()["id"])
    client.force_login(user)
    again = client.post(reverse("suites:launch", args=[suite.public_id]), {"version": 2, "concurrency": 5})
    assert again.status_code == 302  # the run page's "Run again" of a CI run
    rerun = Run.objects.exclude(pk=ci.pk).get()
    assert rerun.suite_version.number == 2 and rerun.ref == "feature/lyon"
    default = client.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": 5})
    assert default.status_code == 302 and Run.objects.latest("created_at").suite_version.number == 1

    page = client.get(reverse("suites:version", args=[suite.public_id, 2])).content.decode()
    assert "CI feature/lyon" in page and "commit 0123456789ab" in page and ">latest<" not in page
    assert ">latest<" in client.get(reverse("suites:version", args=[suite.public_id, 1])).content.decode()
