"""Only real replies are graded, through a real worker: 200s that are no chat completion are waited out
like a 502 and said on the page, and a reply that did not finish ends its conversation as an error, stored
for what it is and shown on the transcript, never a FAIL."""

from __future__ import annotations

import html
import re
import threading
import time

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Conversation, Status, Turn
from tests.e2e.conftest import wait_for_run
from tests.factories import launch
from tests.fakeopenai import Reply

pytestmark = [pytest.mark.e2e]

PATIENT = {"EVALSITE_MAX_RETRIES": "", "EVALSITE_RETRY_SECONDS": "30"}


def _suite(count: int) -> str:
    evals = "".join(
        f"  - prompt: question {i}\n    checks:\n      - contains: OK\n        prompt: once more\n"
        "        checks: [{contains: OK}]\n"
        for i in range(count)
    )
    return f"name: gateway\nmodel: fake/m\nevals:\n{evals}"


def text(response) -> str:
    """What a person reads: tags out, entities read, whitespace squeezed."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", response.content.decode())))


@pytest.mark.parametrize(
    "answer",
    [
        Reply(raw='{"choices": [ not json'),
        Reply(raw="<html>502</html>", content_type="text/html"),
        Reply(choices=[]),
    ],
    ids=["bad-json", "html", "empty-choices"],
)
def test_seconds_of_unreadable_200s_error_no_conversation(
    user, fake_endpoint, fake_openai, start_worker, answer
):
    """For 3 s every answer is a 200 that is no chat completion: every conversation waits, says why, and
    passes on its first turn, with one turn each (nothing was graded on the garbage)."""
    start_worker(**PATIENT)
    fake_openai.misbehave(answer)
    timer = threading.Timer(3, fake_openai.misbehave)
    timer.start()
    try:
        run = launch(user, _suite(10), concurrency=10)
        noted: set[str] = set()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            noted |= set(
                Conversation.objects.filter(run=run, waiting_until__isnull=False).values_list(
                    "waiting_reason", flat=True
                )
            )
            time.sleep(0.1)
        run = wait_for_run(run, timeout=60)
    finally:
        timer.cancel()
        fake_openai.misbehave()
    assert run.status == Status.PASSED
    assert list(run.conversations.exclude(status=Status.PASSED).values_list("error", flat=True)) == []
    assert Turn.objects.filter(conversation__run=run).count() == 10
    assert noted and all(
        re.fullmatch(r"endpoint sent an unreadable reply( \(\d+ times\))?", n) for n in noted
    )
    assert sum(bool(entry.get("fault")) for entry in fake_openai.requests) >= 10


def test_a_reply_cut_off_is_an_error_stored_and_shown_not_a_fail(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_openai.script("question 0", [Reply("Not O", finish_reason="length"), "OK"])
    fake_openai.script("question 1", [Reply(null_content=True, refusal="I won't answer that.")])
    start_worker()
    run = wait_for_run(launch(user, _suite(3), concurrency=3), timeout=60)
    assert run.status == Status.ERROR
    cut, refused, ordinary = run.conversations.order_by("index")
    assert (cut.status, cut.verdict) == (
        Status.ERROR,
        "error on turn 1: reply cut off at the token limit (finish_reason: length)",
    )
    assert refused.status == Status.ERROR and "the model refused: “I won't answer that.”" in refused.error
    assert ordinary.status == Status.PASSED
    (turn,) = cut.turns.all()  # stored for what it is; no follow-up was sent after it
    assert turn.passed is None and turn.record["finish_reason"] == "length" and turn.record["checks"] == []
    assert len(fake_openai.chat_requests("question 0")) == 1
    assert refused.turns.get().record["refusal"] == "I won't answer that."

    browser = Client()
    browser.force_login(user)
    page = text(browser.get(reverse("runs:conversation", args=[run.pk, 0])))
    assert "Not a finished reply: reply cut off at the token limit (finish_reason: length)." in page
    assert "Not graded: the conversation ends here as an error" in page and "finish_reason: length" in page
    page = text(browser.get(reverse("runs:conversation", args=[run.pk, 1])))
    assert "refusal I won't answer that." in page and "Not a finished reply: the model refused" in page
