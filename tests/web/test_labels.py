"""Labels: people score conversations (on the transcript page or in the review queue), the labels become
calibration samples, and two reviewers' labels give the human baseline. Conversations are played in this
process (runs.worker.pump.execute) against the fake OpenAI server."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from engine.calibration import CalibrationSuite
from engine.loader import load_suite
from runs.models import Label
from runs.services import create_run
from runs.worker.pump import execute
from suites.services import create_suite

SUITE = """\
name: tutoring
model: fake/tutor
system: You are a patient tutor.
evals:
  - prompt: What is 2+2?
    checks: [{contains: "4"}]
  - prompt: Explain fractions
    checks: [{contains: part}]
  - prompt: Thanks!
    checks: [{contains: welcome}]
"""

SET = """\
name: tutor-labels
judge: {model: fake/judge, criteria: Polite and correct, scale: -3..3}
samples:
  - messages: [{role: user, content: hi}, {role: assistant, content: hello}]
    expected: 2
"""


@pytest.fixture
def played(user, fake_endpoint, fake_openai):
    fake_openai.rule("2+2", "The answer is 4.")
    fake_openai.rule("fractions", "A part of a whole.")
    fake_openai.rule("Thanks", "Whatever.")
    run = create_run(version=create_suite(owner=user, source=SUITE).latest_version, user=user)
    for conversation in run.conversations.all():
        execute(conversation.pk)
    return run


@pytest.mark.django_db(transaction=True)
def test_a_label_is_saved_from_the_transcript_and_checked_against_its_scale(client, user, played):
    client.force_login(user)
    url = reverse("runs:label", args=[played.pk, 0])
    page = client.get(reverse("runs:conversation", args=[played.pk, 0])).content.decode()
    assert 'id="label"' in page and 'name="score" value="-3"' in page
    saved = client.post(
        url, {"score": "3", "scale": "-3..3", "reason": "right and kind"}, HTTP_HX_REQUEST="true"
    )
    assert saved.status_code == 200 and "Saved." in saved.content.decode()
    label = Label.objects.get()
    assert (label.score, label.scale, label.reason, label.created_by) == (
        3.0,
        "-3..3",
        "right and kind",
        user,
    )
    refused = client.post(url, {"score": "7", "scale": "-3..3"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 400 and "a score on -3..3 is between -3 and 3" in refused.content.decode()
    client.post(url, {"score": "2", "scale": "-3..3"}, HTTP_HX_REQUEST="true")
    assert Label.objects.get().score == 2.0  # saving again replaces the reviewer's label


@pytest.mark.django_db(transaction=True)
def test_the_review_queue_walks_the_unlabelled_conversations(client, user, played):
    client.force_login(user)
    review = reverse("runs:review", args=[played.pk])
    first = played.conversations.get(index=0)
    Label.objects.create(conversation=first, created_by=user, scale="-3..3", score=3)
    page = client.get(review).content.decode()
    second = played.conversations.get(index=1)
    assert "Explain fractions" in page and "2 of 3" in page  # the first one still to label
    third = played.conversations.get(index=2)
    assert f'name="next" value="{review}?c={third.pk}&amp;scale=-3..3"' in page
    moved = client.post(
        reverse("runs:label", args=[played.pk, 1]),
        {"score": "2", "scale": "-3..3", "next": f"{review}?c={third.pk}"},
    )
    assert moved.status_code == 302 and moved["Location"] == f"{review}?c={third.pk}"
    assert Label.objects.filter(conversation=second).exists()


@pytest.mark.django_db(transaction=True)
def test_labels_become_samples_of_a_calibration_set(client, user, played):
    calibration = create_suite(owner=user, source=SET)
    for index, score in ((0, 3), (2, -1)):
        conversation = played.conversations.get(index=index)
        Label.objects.create(
            conversation=conversation, created_by=user, scale="-3..3", score=score, reason=f"r{index}"
        )
    client.force_login(user)
    added = client.post(
        reverse("runs:labels_to_set", args=[played.pk]), {"set": str(calibration.public_id)}, follow=True
    )
    assert "Added 2 labelled conversations to tutor-labels (eval-1, eval-3)." in added.content.decode()
    version = calibration.versions.order_by("-number").first()
    assert version.number == 2 and "samples_file: labels.jsonl" in version.source
    suite = load_suite(version.source, files=version.file_map())
    assert isinstance(suite, CalibrationSuite)
    samples = suite.calibration.samples
    assert [s.expected_score for s in samples] == [2.0, 3.0, -1.0]  # the written one, then the labels
    assert samples[1].messages == [
        {"role": "system", "content": "You are a patient tutor."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "The answer is 4."},
    ]
    assert samples[1].expected_reason == "r0"
    again = client.post(
        reverse("runs:labels_to_set", args=[played.pk]), {"set": str(calibration.public_id)}, follow=True
    )
    assert "2 already in the set (eval-1, eval-3): none added to tutor-labels." in again.content.decode()
    assert calibration.versions.count() == 2  # nothing new, no new version
    lines = version.file_map()["labels.jsonl"].splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["id"].endswith("-eval-1-0")


AGENT = """\
name: weather-agent
model: fake/agent
evals:
  - prompt: Weather in Paris?
    checks: [{contains: "21"}]
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    returns: "21 °C, clear"
"""


@pytest.mark.django_db(transaction=True)
def test_an_agents_labelled_conversation_keeps_its_tool_calls_as_a_sample(
    client, user, fake_endpoint, fake_openai
):
    # The fake calls the offered tool once (its argument: the prompt's last capitalised word), then answers.
    run = create_run(version=create_suite(owner=user, source=AGENT).latest_version, user=user)
    (conversation,) = run.conversations.all()
    execute(conversation.pk)
    Label.objects.create(conversation=conversation, created_by=user, scale="-3..3", score=3)
    calibration = create_suite(owner=user, source=SET)
    client.force_login(user)
    client.post(reverse("runs:labels_to_set", args=[run.pk]), {"set": str(calibration.public_id)})
    version = calibration.versions.order_by("-number").first()
    suite = load_suite(version.source, files=version.file_map())
    assert suite.calibration.warnings == []  # the sample keeps to the set's rules
    messages = suite.calibration.samples[1].messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    (call,) = messages[1]["tool_calls"]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {
        "city": "Paris"
    }
    assert messages[2] == {"role": "tool", "tool_call_id": call["id"], "content": "21 °C, clear"}
    assert suite.calibration.samples[1].reply == messages[3]["content"] != ""
    # The review queue shows the same conversation: the call, and no "None" for the message that only made it.
    review = client.get(reverse("runs:review", args=[run.pk]), {"c": conversation.pk}).content.decode()
    assert "calls get_weather" in review and ">None<" not in review


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_labels_give_their_agreement(client, user, other_user, played):
    conversations = list(played.conversations.order_by("index"))
    for conversation, (a, b) in zip(conversations, [(3, 3), (2, 1), (-1, -1)], strict=True):
        Label.objects.create(conversation=conversation, created_by=user, scale="-3..3", score=a)
        Label.objects.create(conversation=conversation, created_by=other_user, scale="-3..3", score=b)
    client.force_login(user)
    page = client.get(reverse("runs:review", args=[played.pk])).content.decode()
    assert "Agreement between reviewers" in page
    assert "67%" in page  # 2 of 3 on the same level


SET_01 = SET.replace("scale: -3..3", "scale: 0-1").replace("expected: 2", "expected: 1")


@pytest.mark.django_db(transaction=True)
def test_labels_on_another_scale_are_counted_and_named_not_added(client, user, played):
    calibration = create_suite(owner=user, source=SET_01)
    for conversation in played.conversations.all():
        Label.objects.create(conversation=conversation, created_by=user, scale="-3..3", score=1)
    client.force_login(user)
    answer = client.post(
        reverse("runs:labels_to_set", args=[played.pk]), {"set": str(calibration.public_id)}, follow=True
    ).content.decode()
    assert (
        "3 labelled on -3..3 (eval-1, eval-2, eval-3); this set is on 0-1: none added to tutor-labels."
        in answer
    )
    assert calibration.versions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_labels_file_a_set_names_shows_as_its_samples_not_unused(client, user, played):
    calibration = create_suite(owner=user, source=SET)
    Label.objects.create(
        conversation=played.conversations.get(index=0), created_by=user, scale="-3..3", score=3
    )
    client.force_login(user)
    client.post(reverse("runs:labels_to_set", args=[played.pk]), {"set": str(calibration.public_id)})
    page = client.get(reverse("suites:detail", args=[calibration.public_id])).content.decode()
    files = page.split('id="files"')[1].split("</section>")[0]
    row = files.split("labels.jsonl</a>")[1].split("</li>")[0]
    assert ">samples<" in row and ">unused<" not in row


@pytest.mark.django_db(transaction=True)
def test_the_queue_keeps_its_scale_from_one_conversation_to_the_next(client, user, played):
    client.force_login(user)
    review = reverse("runs:review", args=[played.pk])
    first = client.get(review, {"scale": "0-1"}).content.decode()
    second = played.conversations.get(index=1)
    assert f'name="next" value="{review}?c={second.pk}&amp;scale=0-1"' in first
    assert 'name="score" value="-3"' not in first and 'name="score" value="1"' in first
    saved = client.post(
        reverse("runs:label", args=[played.pk, 0]),
        {"score": "1", "scale": "0-1", "next": f"{review}?c={second.pk}&scale=0-1"},
    )
    page = client.get(saved["Location"]).content.decode()
    assert "Explain fractions" in page and 'value="0-1"' in page and 'name="score" value="-3"' not in page
    # Back at the queue without a scale in the link, it starts on the scale of the reviewer's labels.
    assert 'name="score" value="-3"' not in client.get(review).content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_calibration_sets_queue_is_on_the_sets_scale_whatever_is_asked(
    client, user, fake_endpoint, fake_openai
):
    fake_openai.rule("hello", '{"score": 1, "reason": "fine"}', where="any")
    run = create_run(version=create_suite(owner=user, source=SET_01).latest_version, user=user)
    for conversation in run.conversations.all():
        execute(conversation.pk)
    client.force_login(user)
    page = client.get(reverse("runs:review", args=[run.pk]), {"scale": "-3..3"}).content.decode()
    assert "the calibration set's scale" in page and 'name="scale" value="0-1"' in page
    assert 'name="score" value="-3"' not in page and "Queue scale" not in page
