"""The transcript of replies that did not finish: what the endpoint said (finish_reason, a
refusal), why the reply is no finished one, and how the eval's `incomplete_reply` rule counted it."""

from __future__ import annotations

import html
import re

import pytest

from engine.results import CheckResult, TurnRecord
from runs.models import Conversation, Status
from suites import services as suite_services
from tests.factories import store_turns
from tests.web.test_pages_runs import SUITE, make_run, run_url

pytestmark = pytest.mark.django_db

CUT = "reply cut off at the token limit (finish_reason: length)"
REFUSED = "the model refused: “<b>No</b>.”"


def text(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", response.content.decode())))


def turns_of(rule: str) -> list[TurnRecord]:
    if rule == "grade":
        check = CheckResult(type="contains", label="contains No", passed=True, reason="found")
        return [TurnRecord(turn=1, prompt="q", response="<b>No</b>.", refusal="<b>No</b>.", incomplete=REFUSED,
                           checks=[check], passed=True)]  # fmt: skip
    return [TurnRecord(turn=1, prompt="q", response="The answer is", finish_reason="length", incomplete=CUT,
                       passed=False if rule == "fail" else None)]  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("error", "Not graded: the conversation ends here as an error, nothing sent after it (incomplete_reply: error)"),
        ("fail", "Counted as a failed turn, no check run, nothing sent after it (incomplete_reply: fail)"),
        ("grade", "Graded as given (incomplete_reply: grade)"),
    ],
)  # fmt: skip
def test_the_transcript_says_what_the_reply_was_and_how_it_counted(logged_in, user, rule, said):
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = make_run(version, user, conversations=1)
    conversation = Conversation.objects.create(
        run=run, index=1, eval_id="cut", prompt="q", status=Status.ERROR
    )
    store_turns(conversation, turns_of(rule))
    page = logged_in.get(run_url("conversation", run, 1))
    shown = text(page)
    why = REFUSED if rule == "grade" else CUT
    assert f"Not a finished reply: {why}. {said}" in shown
    if rule == "grade":
        assert "<b>" not in page.content.decode()  # model text stays escaped
    else:
        assert "finish_reason: length" in shown
