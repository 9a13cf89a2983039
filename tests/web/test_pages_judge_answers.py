"""The transcript shows a judge's answer as it came and how it was read, beside the check's badge; a judge
asked again shows both answers; a judge that could not be read at all makes the conversation an error, not
a FAIL, with its answers in the error. Played in this process as a worker plays it, against the fake
endpoint (the judge's answers are a rule's list, in order)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from engine.judge import JUDGE_SYSTEM
from runs.models import Status
from tests.factories import launch, play

# A judge call runs in a grading thread, which reads the pause board: it needs the rows committed.
pytestmark = pytest.mark.django_db(transaction=True)

SUITE = """\
name: judged
model: fake/agent-m
judge: fake/judge-m
evals:
  - id: {id}
    prompt: A table for two, Friday 7pm.
    checks:
      - llm_judge: {{criteria: States the day and the time, threshold: 0.7}}
"""


def transcript(client, user, fake_openai, *answers: str):
    fake_openai.script("A table for two, Friday 7pm.", ["Booked: <b>two</b>, Friday 19:00."])
    fake_openai.rule(JUDGE_SYSTEM[:60], list(answers), where="system", model="judge-m")
    run = play(launch(user, SUITE.format(id="booking")))
    client.force_login(user)
    page = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    return run.conversations.get(), page


def test_a_score_read_from_prose_after_thinking_is_shown_with_what_it_was_read_from(
    client, user, fake_endpoint, fake_openai
):
    answer = '<think>Is <i>19:00</i> 7pm? Yes. {"score": 0}</think>\nScore: 8/10. The reply is good.'
    conversation, page = transcript(client, user, fake_openai, answer)
    assert conversation.status == Status.PASSED
    assert "read from <code>Score: 8/10</code>" in page
    assert "score 0.80 (threshold 0.7): The reply is good." in page
    assert (
        "&lt;think&gt;Is &lt;i&gt;19:00&lt;/i&gt; 7pm?" in page and "<i>19:00</i>" not in page
    )  # raw, escaped
    assert "asked again" not in page


def test_a_judge_asked_again_shows_both_answers(client, user, fake_endpoint, fake_openai):
    conversation, page = transcript(
        client, user, fake_openai, "Looks <em>right</em> to me.", '{"score": 0.9, "reason": "Both given."}'
    )
    assert conversation.status == Status.PASSED
    assert "asked again: its first answer could not be read" in page
    first, second = page.index("Looks &lt;em&gt;right&lt;/em&gt; to me."), page.index("Both given.&quot;}")
    assert first < page.index("Asked again, it answered:") < second
    assert len([b for b in fake_openai.chat_requests() if b["model"] == "judge-m"]) == 2


def test_a_judge_that_cannot_be_read_twice_is_a_conversation_error_not_a_fail(
    client, user, fake_endpoint, fake_openai
):
    conversation, page = transcript(client, user, fake_openai, "Looks right.", "Really, it looks right.")
    assert conversation.status == Status.ERROR and conversation.run.status == Status.ERROR
    assert "The conversation stopped with an error." in page
    assert "judge judge-m gave no verdict that could be read, asked twice" in page
    assert "&#x27;Looks right.&#x27;" in page and "&#x27;Really, it looks right.&#x27;" in page
    # No verdict on it, but the reply stays on the transcript with what it and the judge's calls cost.
    assert "✗ FAIL" not in page
    (turn,) = conversation.turns.all()
    assert turn.passed is None and turn.record["judge_usage"]["prompt_tokens"] > 0


def test_a_0_1_looking_score_on_a_0_100_judge_is_flagged_on_the_transcript_and_in_results_json(
    client, user, fake_endpoint, fake_openai
):
    fake_openai.script("A table for two, Friday 7pm.", ["Booked: two, Friday 19:00."])
    fake_openai.rule(
        JUDGE_SYSTEM[:60], ['{"score": 0.8, "reason": "Both given."}'], where="system", model="judge-m"
    )
    source = SUITE.format(id="booking").replace("threshold: 0.7}", "scale: 0-100}")
    run = play(launch(user, source))
    client.force_login(user)
    page = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    # Scored as the judge gave it (0.8 of 100 fails), and said beside the check.
    assert run.conversations.get().status == Status.FAILED
    assert "0.8 on a 0–100 scale: looks like a 0–1 score" in page
    document = b"".join(client.get(reverse("runs:json", args=[run.pk])).streaming_content)
    (check,) = json.loads(document)["evals"][0]["turns"][0]["checks"]
    assert check["scale_note"] == "0.8 on a 0–100 scale: looks like a 0–1 score"
