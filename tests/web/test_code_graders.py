"""Code graders on a server: off unless the deployer sets EVALSITE_CODE_GRADERS. Off, a launch of a suite
with a code check is refused naming each, and the editor and the validate API warn at each; on, workers
run them from the version's attached files, and the transcript shows their verdicts, escaped.

Conversations are played in this process as a worker plays them (runs.worker.pump.execute)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from django.urls import reverse

from runs.models import Conversation, Run, Status
from runs.services import LaunchError, create_run
from suites import services as suite_services
from tests.factories import launch, play

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent.parent / "fixtures" / "code_graders"
SUITE = """\
name: coded
model: mock
mock: {default: "Paris <b>is</b> the capital."}
evals:
  - id: capital
    input: What is the capital of France?
    ground_truth: paris
    graders:
      found: {kind: check, check: {code: [python3, grade.py]}}
  - id: short
    prompt: Say it briefly.
    checks:
      - contains: Paris
      - code: graders:short
      - code: echo:reason
"""
FILES = {name: (FIXTURES / name).read_text() for name in ("grade.py", "graders.py")}
FILES["echo.py"] = (
    "def reason(payload):\n    return {'pass': True, 'reason': 'it said ' + payload['output']}\n"
)


def test_off_by_default_a_launch_is_refused_naming_each_code_check(user):
    version = suite_services.create_suite(owner=user, source=SUITE, files=FILES).latest_version
    with pytest.raises(LaunchError) as refused:
        create_run(version=version, user=user)
    message = str(refused.value)
    assert "eval `capital` (evals[0].graders.found.check.code)" in message
    assert "eval `short` (evals[1].checks[1].code)" in message
    assert "EVALSITE_CODE_GRADERS=1" in message and "evalsite run" in message
    assert not Run.objects.exists()


def test_off_the_launch_form_says_why(logged_in, user):
    suite = suite_services.create_suite(owner=user, source=SUITE, files=FILES)
    response = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "", "concurrency": 4}
    )
    assert response.status_code == 400
    assert "code graders are not enabled on this server" in html.unescape(response.content.decode())
    assert not Run.objects.exists()


def test_off_the_validate_api_and_the_editor_warn_at_each_code_check(logged_in, user):
    suite = suite_services.create_suite(owner=user, source=SUITE, files=FILES)
    answer = logged_in.post(
        "/api/suites/validate",
        {"source": SUITE, "suite": str(suite.public_id)},
        content_type="application/json",
    ).json()
    assert answer["valid"] is True
    coded = [w for w in answer["warnings"] if "code graders are not enabled" in w["message"]]
    assert [(w["line"], w["path"]) for w in coded] == [
        (9, "evals[0].graders.found.check.code"),
        (14, "evals[1].checks[1].code"),
        (15, "evals[1].checks[2].code"),
    ]
    page = logged_in.get(reverse("suites:detail", args=[suite.public_id])).content.decode()
    assert "code graders are not enabled on this server" in html.unescape(page)


def test_on_workers_run_them_from_the_versions_files_and_the_transcript_shows_them(logged_in, user, settings):
    settings.EVALSITE_CODE_GRADERS = True
    run = play(launch(user, SUITE, files=FILES))
    capital, short = run.conversations.order_by("index")
    assert (capital.status, short.status) == (Status.PASSED, Status.PASSED), (capital.error, short.error)
    check = short.turns.get().record["checks"][1]
    assert (check["type"], check["label"], check["score"]) == ("code", 'code "graders:short"', 1.0)
    page = logged_in.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    assert 'code "graders:short"' in html.unescape(page)
    assert "it said Paris &lt;b&gt;is&lt;/b&gt; the capital." in page  # the grader's reason, escaped
    assert "<b>is</b>" not in page and "&lt;b&gt;is&lt;/b&gt;" in page


def test_turned_off_after_a_launch_its_conversations_end_in_error_saying_so(user, settings):
    settings.EVALSITE_CODE_GRADERS = True
    run = launch(user, SUITE, files=FILES)
    settings.EVALSITE_CODE_GRADERS = False
    run = play(run)
    errors = list(run.conversations.values_list("status", "error"))
    assert all(status == Status.ERROR and "code graders are not enabled" in error for status, error in errors)
    assert not any(c.status == Status.FAILED for c in Conversation.objects.all())
