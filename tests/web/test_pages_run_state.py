"""What a run page says about the run's state, through Django's test client: a cancelled run keeps polling
while its conversations finish their turn, why a run failed, the share panel under the header, share links
that no longer open, the runs list filtered by suite, the model named once, and singular counts.

Runs are built from rows here (no worker).
"""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from engine.report import format_report
from engine.results import RunReport, RunTotals, SuiteRef
from runs.models import Conversation, Run, ShareLink, Status
from suites import services as suite_services
from tests.factories import ADD_EVAL, CAPITAL_EVAL, MULTIPLY_EVAL, demo_suite, mock_run, project_of

pytestmark = pytest.mark.django_db

SUITE = demo_suite("name: arithmetic\nmodel: mock\n", (ADD_EVAL, MULTIPLY_EVAL, CAPITAL_EVAL))
GATED = SUITE.replace("model: mock\n", "model: mock\ngates:\n  - {metric: avg, op: '>=', value: 0.8}\n")


def make_run(user, statuses, *, source=SUITE, status=Status.RUNNING, scores=None, **fields) -> Run:
    version = suite_services.create_suite(owner=user, source=source).latest_version
    run = mock_run(version, user, status=status, **fields)
    for index, state in enumerate(statuses):
        score = (scores or {}).get(index, {"passed": 1.0, "failed": 0.0}.get(state))
        Conversation.objects.create(
            run=run, index=index, eval_id=["add", "multiply", "capital"][index % 3] + f"-{index}",
            status=state, score=score, verdict=state, turn_count=1 if state != "queued" else 0,
        )  # fmt: skip
    return run


def url(name: str, run: Run, *args) -> str:
    return reverse(f"runs:{name}", args=[run.pk, *args])


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def header(page: str) -> str:
    return text(page.split('<header id="run-header"', 1)[1].split(">", 1)[1].split("</h1>", 1)[0])


def run_meta(page: str) -> str:
    return text(page.split('<p class="run-meta muted">', 1)[1].split("</p>", 1)[0])


def poll(client, run: Run, fingerprint: str | None = None):
    query = {"fp": fingerprint} if fingerprint else {}
    return client.get(url("progress", run), query, HTTP_HX_REQUEST="true")


# --- Cancel: the page follows the conversations still finishing -----------------------------------------------


def test_cancelled_run_keeps_polling_until_its_conversations_finish(logged_in, user):
    run = make_run(user, ["passed", "running", "running", "queued"])
    assert logged_in.post(url("cancel", run)).status_code == 302
    run.refresh_from_db()
    assert run.status == Status.CANCELLED  # the run is cancelled at once; two conversations are mid-turn

    page = logged_in.get(url("detail", run)).content.decode()
    assert "cancelling 2 finishing" in header(page)
    assert 'hx-trigger="every 1s"' in page  # still polled
    response = poll(logged_in, run)
    assert response.status_code == 200  # not 286: htmx keeps polling
    body = response.content.decode()
    assert "cancelling 2 finishing" in header(body) and 'hx-trigger="every 1s"' in body
    fingerprint = body.split('data-fingerprint="')[1].split('"')[0]
    assert poll(logged_in, run, fingerprint).status_code == 204  # nothing changed: poll again

    # One finishes its turn: the page follows.
    Conversation.objects.filter(run=run, index=1).update(status=Status.PASSED, score=1.0)
    body = poll(logged_in, run, fingerprint).content.decode()
    assert "cancelling 1 finishing" in header(body)

    # The last one stops: the final state, and polling ends.
    Conversation.objects.filter(run=run, index=2).update(status=Status.CANCELLED)
    response = poll(logged_in, run, fingerprint)
    assert response.status_code == 286
    final = response.content.decode()
    assert header(final).startswith("arithmetic v1 cancelled")
    assert "cancelling" not in final and "hx-get" not in final.split('id="run-header"')[0]
    assert "2 passed" in text(final.split('id="progress"')[1].split("</section>")[0])


def test_runs_list_says_cancelling_and_keeps_polling_while_conversations_finish(logged_in, user):
    run = make_run(user, ["running", "queued"], status=Status.CANCELLED)
    page = logged_in.get(reverse("runs:list")).content.decode()
    assert ">cancelling<" in page and 'hx-trigger="every 2s"' in page
    Conversation.objects.filter(run=run).update(status=Status.CANCELLED)
    page = logged_in.get(reverse("runs:list")).content.decode()
    assert ">cancelling<" not in page and 'hx-trigger="every 2s"' not in page


# --- Why a run failed ---------------------------------------------------------------------------------------


def test_failed_run_names_the_gate_that_failed(logged_in, user):
    # Scores 1, 0.5, 0.36: average 0.62 against avg >= 0.8.
    run = make_run(
        user, ["passed", "failed", "failed"], source=GATED, status=Status.FAILED, scores={1: 0.5, 2: 0.36}
    )
    assert "failed gate avg ≥ 0.8 failed: 0.62" in header(logged_in.get(url("detail", run)).content.decode())


def test_failed_run_without_gates_counts_the_failed_evals(logged_in, user):
    run = make_run(user, ["passed", "failed", "passed"], status=Status.FAILED)
    assert "failed 1 of 3 evals failed" in header(logged_in.get(url("detail", run)).content.decode())


def test_errored_run_counts_the_errored_conversations(logged_in, user):
    run = make_run(user, ["error", "error", "failed"], status=Status.ERROR)
    assert "error 2 conversations errored; 1 of 3 evals failed" in header(
        logged_in.get(url("detail", run)).content.decode()
    )


def test_a_passed_run_has_no_reason_to_give(logged_in, user):
    run = make_run(user, ["passed", "passed", "passed"], status=Status.PASSED)
    assert header(logged_in.get(url("detail", run)).content.decode()) == "arithmetic v1 passed"


def test_a_gated_run_that_passes_with_a_failed_eval_says_so(logged_in, user):
    run = make_run(user, ["passed", "passed", "failed"], source=GATED, status=Status.PASSED, scores={2: 0.9})
    assert "passed every gate holds; 1 of 3 evals failed" in header(
        logged_in.get(url("detail", run)).content.decode()
    )


# --- Share panel ----------------------------------------------------------------------------------------------


def test_share_button_is_in_the_header_and_the_panel_right_under_it(logged_in, user):
    run = make_run(user, ["passed"] * 3, status=Status.PASSED)
    page = logged_in.get(url("detail", run)).content.decode()
    head = page.split('id="run-header"', 1)[1].split("</header>", 1)[0]
    assert re.search(r'<a class="btn" href="#share" data-disclose="share"[^>]*>\s*Share', head)
    # The panel follows the header, before the progress and the tables (a long page has it at the top).
    assert (
        page.index("</header>", page.index('id="run-header"'))
        < page.index('id="share"')
        < page.index('id="progress"')
    )


def test_share_without_js_posts_and_lands_on_the_open_panel(user):
    run = make_run(user, ["passed"] * 3, status=Status.PASSED)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    page = browser.get(url("detail", run)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.split('id="share"')[1]).group(1)
    response = browser.post(url("share", run), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"].endswith("#share")  # :target opens it
    link = ShareLink.objects.get(run=run)
    page = browser.get(url("detail", run)).content.decode()
    assert f"/s/{link.token}/" in page.split('id="share"')[1].split("</section>")[0]
    assert 'id="share-count" class="pill-count"' in page  # the header's button counts the active link


def test_share_with_htmx_reopens_the_panel_and_updates_the_count(logged_in, user):
    run = make_run(user, ["passed"] * 3, status=Status.PASSED)
    body = logged_in.post(url("share", run), HTTP_HX_REQUEST="true").content.decode()
    assert body.lstrip().startswith('<section id="share" class="card share-card is-open"')
    assert re.search(r'<span id="share-count" class="pill-count" hx-swap-oob="true"[^>]*>1</span>', body)


# --- Share links that no longer open ----------------------------------------------------------------------


def test_revoked_share_links_get_a_styled_404_without_login_links(user):
    run = make_run(user, ["passed"] * 3, status=Status.PASSED)
    link = ShareLink.objects.create(run=run, created_by=user, revoked_at=timezone.now())
    visitor = Client()
    for address in [
        reverse("share:run", args=[link.token]),
        reverse("share:conversation", args=[link.token, 0]),
        reverse("share:json", args=[link.token]),
        reverse("share:run", args=["never-was-a-token"]),
    ]:
        response = visitor.get(address)
        assert response.status_code == 404, address
        page = response.content.decode()
        assert '<link rel="stylesheet"' in page  # our layout, not Django's bare page
        assert "It was revoked, or it has expired, or it never existed" in page
        assert reverse("login") not in page and "arithmetic" not in page


def test_a_page_polling_through_a_revoked_link_reloads(user):
    run = make_run(user, ["running"] * 3)
    link = ShareLink.objects.create(run=run, created_by=user, revoked_at=timezone.now())
    response = Client().get(reverse("share:progress", args=[link.token]), HTTP_HX_REQUEST="true")
    assert response["HX-Refresh"] == "true"


def test_a_missing_page_has_a_styled_404(logged_in):
    response = logged_in.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert '<link rel="stylesheet"' in page and "This page does not exist" in page


def test_a_server_error_has_a_styled_500(rf):
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    assert "Something went wrong on our side" in response.content.decode()


# --- Runs list filtered by suite --------------------------------------------------------------------------


def test_all_runs_of_a_suite_lists_only_that_suite(logged_in, user):
    mine = make_run(user, ["failed"], status=Status.FAILED)
    other = make_run(user, ["passed"], source=SUITE.replace("arithmetic", "geography"), status=Status.PASSED)
    suite = mine.suite_version.suite
    editor = logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    link = re.search(r'<a href="([^"]+)">All runs of this suite →</a>', editor).group(1)
    assert link == f"{reverse('runs:list')}?suite={suite.public_id}"

    page = logged_in.get(link).content.decode()
    assert url("detail", mine) in page and url("detail", other) not in page
    chip = page.split('class="filter-chips"')[1].split("</div>")[0]
    assert "Suite: arithmetic" in text(chip)
    assert f'href="{reverse("runs:list")}"' in chip  # clearing the chip shows every suite's runs
    # Combined with a status filter, both in every link; the status tabs keep the suite.
    assert f'href="{reverse("runs:list")}?suite={suite.public_id}&amp;status=failed"' in page
    passed = logged_in.get(
        reverse("runs:list"), {"suite": suite.public_id, "status": "passed"}
    ).content.decode()
    assert "No passed runs of arithmetic" in text(passed)
    assert f'href="{reverse("runs:list")}?status=passed"' in passed  # the chip's clear link keeps the status


def test_someone_elses_or_a_malformed_suite_filter_shows_everything_and_says_so(logged_in, user, other_user):
    mine = make_run(user, ["passed"], status=Status.PASSED)
    theirs = suite_services.create_suite(owner=other_user, source=SUITE, project=project_of(other_user))
    for value in [str(theirs.public_id), "not-a-uuid"]:
        page = logged_in.get(reverse("runs:list"), {"suite": value}).content.decode()
        assert url("detail", mine) in page and "No suite of this project matches that link" in page


# --- The model, named once ------------------------------------------------------------------------------------


def test_a_mock_run_names_its_model_once(logged_in, user):
    run = make_run(user, ["passed"] * 3, status=Status.PASSED)
    page = logged_in.get(url("detail", run)).content.decode()
    meta = run_meta(page)
    assert meta.startswith("mock · concurrency") and "mock mock" not in meta
    listed = text(logged_in.get(reverse("runs:list")).content.decode())
    assert "mock mock" not in listed and "arithmetic v1 mock" in listed
    named = make_run(user, ["passed"], source=SUITE.replace("arithmetic", "named"), status=Status.PASSED)
    Run.objects.filter(pk=named.pk).update(model="fake/test-model", endpoint_name="fake", is_mock=False)
    meta = run_meta(logged_in.get(url("detail", named)).content.decode())
    assert meta.startswith("fake/test-model · concurrency")  # its prefix already names the endpoint


def test_the_terminal_report_names_the_model_once():
    def report(model, endpoint, mock):
        totals = RunTotals.of([], duration_s=None)
        run = RunReport(suite=SuiteRef(name="s"), model=model, endpoint=endpoint, mock=mock, status="passed",
                        evals=[], totals=totals)  # fmt: skip
        return format_report(run).splitlines()[0]

    assert report("mock", "mock", True) == "Suite: s — model mock [mock endpoint]"
    assert report("fake/m", "fake", False) == "Suite: s — model fake/m"
    assert report("gpt-4o", "default", False) == "Suite: s — model gpt-4o on the default endpoint"
