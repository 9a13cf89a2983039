"""The suite pages through Django's test client: list, editor with live validation, versions, launch."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run
from suites import services
from suites.models import Suite, SuiteVersion

VALID = """\
name: arithmetic
model: mock
system: You are terse.
mock:
  rules:
    - when: "*15 * 7*"
      reply: "105"
evals:
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - match: "*105*"
"""

# Line 8, column 9: a misspelt key inside the first check.
BROKEN = """\
name: arithmetic
model: mock
evals:
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - match: "*105*"
        promt: Try again <b>now</b>
"""

NO_MODEL = """\
name: modelless
evals:
  - prompt: Hello?
    checks:
      - contains: hello
"""

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite(user):
    return services.create_suite(owner=user, source=VALID, note="first")


def detail_url(suite: Suite) -> str:
    return reverse("suites:detail", args=[suite.public_id])


# --- Access -------------------------------------------------------------------------------------------------


def test_every_suite_page_requires_login(client, suite):
    pages = [
        ("get", reverse("suites:list")),
        ("get", reverse("suites:new")),
        ("get", detail_url(suite)),
        ("get", reverse("suites:version", args=[suite.public_id, 1])),
        ("post", reverse("suites:validate")),
        ("post", reverse("suites:launch", args=[suite.public_id])),
        ("post", detail_url(suite)),
    ]
    for method, url in pages:
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login") + "?next="), url
    assert suite.versions.count() == 1 and not Run.objects.exists()


def test_other_users_suites_are_404(client, suite, other_user):
    client.force_login(other_user)
    assert client.get(detail_url(suite)).status_code == 404
    assert client.get(reverse("suites:version", args=[suite.public_id, 1])).status_code == 404
    assert client.post(detail_url(suite), {"source": VALID + "\n# mine now\n"}).status_code == 404
    assert (
        client.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": 1}).status_code == 404
    )
    validate = client.post(reverse("suites:validate"), {"source": VALID, "suite": str(suite.public_id)})
    assert validate.status_code == 404
    assert suite.versions.count() == 1 and not Run.objects.exists()
    assert "arithmetic" not in client.get(reverse("suites:list")).content.decode()


# --- List ---------------------------------------------------------------------------------------------------


def test_empty_list_explains_suites_and_offers_the_demo(logged_in):
    page = logged_in.get(reverse("suites:list")).content.decode()
    assert "No suites yet" in page
    assert f'href="{reverse("suites:new")}?start=demo"' in page
    demo = logged_in.get(reverse("suites:new"), {"start": "demo"}).content.decode()
    assert "name: demo-follow-ups" in demo  # the editor is prefilled with examples/demo-mock.yaml
    assert "Valid — 3 evals" in demo


def test_list_shows_latest_version_and_last_run(logged_in, suite, user):
    services.save_version(suite=suite, source=VALID.replace("terse", "brief"), user=user)
    Run.objects.create(
        suite_version=suite.latest_version,
        created_by=user,
        model="mock",
        endpoint_name="mock",
        status="failed",
    )
    page = logged_in.get(reverse("suites:list")).content.decode()
    assert detail_url(suite) in page
    assert "v2" in page
    assert "badge-failed" in page


# --- Live validation ----------------------------------------------------------------------------------------


def test_validate_returns_located_problems(logged_in):
    response = logged_in.post(reverse("suites:validate"), {"source": BROKEN}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="problems"')  # the partial, not the page
    assert "line 8, col 9" in body
    assert "evals[0].checks[0].promt:" in body
    assert "unknown key `promt` (did you mean `prompt`?)" in body
    assert 'data-line="8" data-column="9"' in body  # what the editor's JS jumps to


def test_validate_says_valid_with_the_eval_count(logged_in):
    body = logged_in.post(reverse("suites:validate"), {"source": VALID}).content.decode()
    assert "Valid — 1 eval" in body
    assert "problem" not in body.replace("problems", "")


def test_validate_warns_about_a_taken_name_for_a_new_suite(logged_in, suite):
    body = logged_in.post(reverse("suites:validate"), {"source": VALID}).content.decode()
    assert "This project already has a suite named" in body
    # Editing the suite itself is no conflict.
    body = logged_in.post(
        reverse("suites:validate"), {"source": VALID, "suite": str(suite.public_id)}
    ).content
    assert b"already have" not in body


# --- Create and save ----------------------------------------------------------------------------------------


def test_create_suite_saves_version_1(logged_in, user):
    response = logged_in.post(reverse("suites:new"), {"source": VALID, "note": "hello"})
    suite = Suite.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == detail_url(suite)
    assert list(suite.versions.values_list("number", "source", "note")) == [(1, VALID, "hello")]


def test_create_broken_suite_is_400_and_saves_nothing(logged_in):
    response = logged_in.post(reverse("suites:new"), {"source": BROKEN})
    assert response.status_code == 400
    body = response.content.decode()
    assert "line 8, col 9" in body
    assert "promt: Try again &lt;b&gt;now&lt;/b&gt;" in body  # the user's text is kept, escaped
    assert not Suite.objects.exists() and not SuiteVersion.objects.exists()


def test_create_with_a_taken_name_is_400(logged_in, suite):
    response = logged_in.post(reverse("suites:new"), {"source": VALID.replace("terse", "brief")})
    assert response.status_code == 400
    assert "this project already has a suite named" in response.content.decode()
    assert Suite.objects.count() == 1 and SuiteVersion.objects.count() == 1


def test_saving_a_broken_suite_keeps_the_previous_version(logged_in, suite):
    response = logged_in.post(detail_url(suite), {"source": BROKEN, "base_version": "1"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "evals[0].checks[0].promt" in body and "line 8, col 9" in body
    assert "Not saved: 1 problem to fix, nothing was stored. v1 is unchanged." in body
    assert "Try again &lt;b&gt;now&lt;/b&gt;" in body
    assert list(suite.versions.values_list("number", "source")) == [(1, VALID)]


def test_saving_a_change_creates_version_2_and_leaves_version_1(logged_in, suite, user):
    changed = VALID.replace("You are terse.", "You are very terse.")
    response = logged_in.post(detail_url(suite), {"source": changed, "note": "terser", "base_version": "1"})
    assert response.status_code == 302
    versions = {v.number: v for v in suite.versions.all()}
    assert set(versions) == {1, 2}
    assert versions[1].source == VALID and versions[1].note == "first"
    assert versions[2].source == changed and versions[2].note == "terser" and versions[2].created_by == user
    page = logged_in.get(detail_url(suite)).content.decode()
    assert "Saved v2." in page
    assert "You are very terse." in page  # the editor shows the latest version
    assert reverse("suites:version", args=[suite.public_id, 1]) in page  # the history links each version


def test_saving_the_same_text_from_a_browser_is_not_a_new_version(logged_in, suite):
    # Browsers submit textareas with CRLF line endings.
    response = logged_in.post(detail_url(suite), {"source": VALID.replace("\n", "\r\n"), "base_version": "1"})
    assert response.status_code == 302
    assert suite.versions.count() == 1
    assert "No changes" in logged_in.get(detail_url(suite)).content.decode()


def test_version_page_is_read_only(logged_in, suite, user):
    services.save_version(suite=suite, source=VALID.replace("terse", "brief"), user=user)
    response = logged_in.get(reverse("suites:version", args=[suite.public_id, 1]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "<li>system: You are terse.</li>" in body
    assert "<textarea" not in body
    assert f"{detail_url(suite)}?from_version=1" in body
    assert logged_in.get(reverse("suites:version", args=[suite.public_id, 9])).status_code == 404


def test_editor_links_the_json_schema(logged_in, suite):
    body = logged_in.get(detail_url(suite)).content.decode()
    assert 'href="/api/suites/schema.json"' in body
    assert 'hx-post="/suites/validate/"' in body and 'hx-trigger="input changed delay:400ms"' in body


# --- Launch -------------------------------------------------------------------------------------------------


def test_launch_without_a_model_shows_the_error(logged_in, user):
    suite = services.create_suite(owner=user, source=NO_MODEL)
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "", "concurrency": "5"}
    )
    assert response.status_code == 400
    assert "the suite names no model" in response.content.decode()
    assert not Run.objects.exists()


def test_launch_creates_a_run_and_redirects_to_it(logged_in, suite, user):
    services.save_version(suite=suite, source=VALID.replace("terse", "brief"), user=user)
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "", "concurrency": "3", "version": "1"}
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("runs:detail", args=[run.pk])
    assert run.suite_version.number == 1 and run.model == "mock" and run.is_mock and run.concurrency == 3
    assert run.conversations.count() == 1


def test_launch_defaults_to_the_latest_version(logged_in, suite, user):
    services.save_version(suite=suite, source=VALID.replace("terse", "brief"), user=user)
    logged_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": "10"})
    assert Run.objects.get().suite_version.number == 2


def test_save_and_run(logged_in, suite):
    changed = VALID.replace("terse", "brief")
    response = logged_in.post(detail_url(suite), {"source": changed, "base_version": "1", "action": "launch"})
    run = Run.objects.get()
    assert response["Location"] == reverse("runs:detail", args=[run.pk])
    assert run.suite_version.number == 2


# --- CSRF ---------------------------------------------------------------------------------------------------


def test_posts_without_a_csrf_token_are_rejected(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(reverse("suites:new"), {"source": VALID}).status_code == 403
    assert client.post(reverse("suites:validate"), {"source": VALID}).status_code == 403
    assert not Suite.objects.exists()


def test_htmx_posts_carry_the_token_from_the_body_headers(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get(reverse("suites:new")).content.decode()
    token = re.search(r"""hx-headers='\{"X-CSRFToken": "([^"]+)"\}'""", page).group(1)
    response = client.post(
        reverse("suites:validate"), {"source": VALID}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "Valid — 1 eval" in response.content.decode()


def test_suites_list_is_one_query_whatever_the_number_of_suites(
    logged_in, user, django_assert_max_num_queries
):
    for n in range(6):
        suite = services.create_suite(owner=user, source=VALID.replace("arithmetic", f"arithmetic-{n}"))
        services.save_version(
            suite=suite, source=VALID.replace("arithmetic", f"arithmetic-{n}") + "# v2\n", user=user
        )
        Run.objects.create(
            suite_version=suite.latest_version, created_by=user, model="mock", endpoint_name="mock"
        )
    with django_assert_max_num_queries(5):  # session, user, their roles and projects, suites annotated
        page = logged_in.get(reverse("suites:list")).content.decode()
    assert page.count("badge-queued") == 6 and page.count(">v2<") == 6


ASKS_NOTHING = """\
name: asks-nothing
model: mock
evals:
  - id: system-only
    messages:
      - role: system
        content: You are a booking assistant.
    checks:
      - contains: booked
"""


def test_validate_refuses_a_suite_that_would_test_nothing(logged_in):
    body = logged_in.post(reverse("suites:validate"), {"source": ASKS_NOTHING}).content.decode()
    assert "line 6, col 7" in body
    assert "evals[0].messages:" in body
    assert "this history asks nothing" in body
    assert "Valid" not in body
