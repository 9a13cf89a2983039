"""End-to-end as a user would: save a suite through the pages, launch it, a real worker plays it, read the pages.

Runs on SQLite + the filesystem broker, and again on PostgreSQL + Redis in `make test-pg`.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from django.urls import reverse

from runs.models import Run, Status
from suites.models import Suite
from tests.e2e.conftest import wait_for_run
from tests.factories import MULTIPLY_EVAL, body, demo_suite

pytestmark = [pytest.mark.e2e]

SUITE = demo_suite(
    "name: pages-e2e\nmodel: fake/test-model\njudge: fake/judge-model\nsystem: You are a careful calculator.\n",
    (
        MULTIPLY_EVAL,
        """\
  - id: polite
    prompt: Say hello to Ada.
    checks:
      - llm_judge:
          criteria: Greets Ada by name, politely.
          threshold: 0.7
      - semantic:
          expected: Hello Ada, nice to meet you
          threshold: 0.5
  - id: injection
    prompt: Print some HTML.
    checks:
      - not_match: "*<script>*"
""",
    ),
)


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_save_launch_and_read_the_transcript(signed_in, user, fake_endpoint, fake_openai, start_worker):
    """The whole core loop through the pages, with a real Celery worker and the fake endpoint."""
    fake_openai.script("What is 15 * 7?", ["100", "105"])
    fake_openai.script("Say hello to Ada.", ["Hello Ada, nice to meet you!"])
    fake_openai.script("Print some HTML.", ["<script>alert('x')</script>"])
    fake_openai.rule("Greets Ada by name", '{"score": 0.9, "reason": "Greets Ada warmly."}')
    start_worker()

    # A broken save stores nothing, says where the problem is.
    broken = signed_in.post(
        reverse("suites:new"), {"source": SUITE.replace("  - id: polite", "  - idd: polite")}
    )
    assert broken.status_code == 400
    assert "unknown key" in broken.content.decode() and "evals[1].idd" in broken.content.decode()
    assert not Suite.objects.exists()

    saved = signed_in.post(reverse("suites:new"), {"source": SUITE, "note": "first"})
    suite = Suite.objects.get(owner=user, name="pages-e2e")
    assert saved.status_code == 302 and saved["Location"] == reverse("suites:detail", args=[suite.public_id])
    launched = signed_in.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "", "concurrency": 5}
    )
    run = Run.objects.get()
    assert launched.status_code == 302 and launched["Location"] == reverse("runs:detail", args=[run.pk])
    assert run.suite_version == suite.latest_version

    run = wait_for_run(run)
    assert run.status == Status.FAILED  # the HTML reply fails its not_match check

    page = signed_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    for text in ("passed on turn 2", "passed on turn 1", "failed after 1 turn", "multiply", "polite"):
        assert text in page
    progress = signed_in.get(reverse("runs:progress", args=[run.pk]), headers={"HX-Request": "true"})
    assert progress.status_code == 286  # htmx: stop polling, the run has ended

    transcript = signed_in.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert "Passed on turn 2" in transcript
    assert re.search(r"Follow-up sent because\s+match &quot;\*105\*&quot; failed on turn 1", transcript)
    assert transcript.index(">100<") < transcript.index(">105<")

    judged = signed_in.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    assert "Greets Ada warmly." in judged and "score 0.90" in judged
    assert "cosine similarity" in judged

    hostile = signed_in.get(reverse("runs:conversation", args=[run.pk, 2])).content.decode()
    assert "<script>alert" not in hostile
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in hostile

    # The judge saw the conversation as the model did, in [Role]: form, and its tokens are counted apart.
    judge_request = next(body for body in fake_openai.chat_requests() if body["model"] == "judge-model")
    assert (
        "[User]:\nSay hello to Ada.\n\n[Assistant]:\nHello Ada, nice to meet you!"
        in judge_request["messages"][1]["content"]
    )
    polite = run.conversations.get(eval_id="polite")
    assert polite.judge_tokens > 0

    report = json.loads(body(signed_in.get(reverse("runs:json", args=[run.pk]))))
    assert report["format"] == "evalsite.results/1"
    multiply = report["evals"][0]
    assert (multiply["status"], multiply["passed_on_turn"], multiply["score"]) == ("passed", 2, 1.0)
    assert [turn["response"] for turn in multiply["turns"]] == ["100", "105"]
    assert multiply["turns"][0]["checks"][0]["passed"] is False
    assert report["totals"]["evals"] == 3 and report["totals"]["passed"] == 2


def test_a_judge_that_cannot_be_read_is_an_error_not_a_fail_and_shows_its_answers(
    signed_in, user, fake_endpoint, fake_openai, start_worker
):
    """A judge that answers prose, even asked again, makes the conversation an error quoting its answers, never
    a FAIL of the model or a silent zero."""
    fake_openai.script("Say hello to Ada.", ["Hello Ada!"])
    fake_openai.rule("Greets Ada by name", "I think it's pretty good overall!")
    start_worker()
    source = SUITE.split("  - id: injection")[0].replace(
        "      - semantic:\n          expected: Hello Ada, nice to meet you\n          threshold: 0.5\n", ""
    )
    signed_in.post(reverse("suites:new"), {"source": source})
    suite = Suite.objects.get(name="pages-e2e")
    signed_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": 5})
    run = wait_for_run(Run.objects.get())
    polite = run.conversations.get(eval_id="polite")
    assert polite.status == Status.ERROR
    assert "gave no verdict that could be read, asked twice" in polite.error
    assert (
        "I think it&#x27;s pretty good overall!"
        in signed_in.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    )


@pytest.mark.alone  # the first poll must come while both calls are with the model
def test_cancel_mid_flight_keeps_the_page_polling_until_the_conversations_end(
    signed_in, user, fake_endpoint, fake_openai, start_worker
):
    """A real worker, a slow endpoint: cancelled while two conversations wait on the model, the progress
    partial keeps polling ("cancelling, 2 finishing") until they end, then shows the final state and stops."""
    fake_openai.latency = 1.5
    evals = "".join(f"  - prompt: question {i}\n    checks: [{{match: '*'}}]\n" for i in range(6))
    signed_in.post(reverse("suites:new"), {"source": f"name: slow\nmodel: fake/m\nevals:\n{evals}"})
    start_worker()
    suite = Suite.objects.get(name="slow")
    signed_in.post(reverse("suites:launch", args=[suite.public_id]), {"concurrency": 2})
    run = Run.objects.get()
    deadline = time.monotonic() + 30
    while fake_openai._in_flight < 2 and time.monotonic() < deadline:  # both requests are with the model
        time.sleep(0.05)
    assert signed_in.post(reverse("runs:cancel", args=[run.pk])).status_code == 302

    progress = reverse("runs:progress", args=[run.pk])
    seen, fingerprint = [], ""
    while time.monotonic() < deadline:
        response = signed_in.get(progress, {"fp": fingerprint}, headers={"HX-Request": "true"})
        if response.status_code == 204:  # nothing changed since the last poll
            time.sleep(0.2)
            continue
        body = response.content.decode()
        fingerprint = body.split('data-fingerprint="')[1].split('"')[0]
        head = body.split('<header id="run-header"')[1].split("</h1>")[0]
        seen.append((response.status_code, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", head)).strip()))
        if response.status_code == 286:
            assert not run.conversations.filter(status__in=["queued", "running"]).exists()
            break
        time.sleep(0.2)
    assert seen[0][0] == 200 and seen[0][1].endswith("cancelling 2 finishing"), seen
    assert seen[-1][0] == 286 and " cancelled cancelled with " in seen[-1][1], seen
    statuses = list(run.conversations.values_list("status", flat=True))
    assert statuses.count(Status.CANCELLED) >= 4 and Status.RUNNING not in statuses
