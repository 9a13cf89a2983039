"""The transcript of a simulated conversation shows, on each turn, its stop condition as evaluated (one line per
condition, members nested, the judge's reason one click away) and, beside each message the simulated user
wrote, what it was sent and what it answered, one click away. Model output stays escaped.

Runs are built from rows (no worker): Run, Conversation and Turn with `record` = a TurnRecord.
"""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from engine.results import ConditionResult, SimulatedUserCall, TurnRecord, Usage
from runs.models import Conversation, Run
from suites import services as suite_services
from tests.factories import mock_run, store_turns

SUITE = """\
name: booking
model: mock
judge: mock
evals:
  - id: booking
    prompt: I need a table for two tonight.
    simulate:
      persona: A hurried diner.
      stop_when:
        natural_language: {prompt: Has the booking been confirmed?}
"""
QUESTION = 'natural_language "Has the booking been confirmed?"'
ENDED = f"condition met: {QUESTION} (confidence 0.91, threshold 0.7)"

pytestmark = pytest.mark.django_db


def asked(confidence: float, reason: str, raw: str) -> ConditionResult:
    return ConditionResult(
        kind="natural_language",
        label=QUESTION,
        met=confidence >= 0.7,
        reason=reason,
        confidence=confidence,
        threshold=0.7,
        raw=raw,
        usage=Usage(prompt_tokens=212, completion_tokens=19),
        cost=0.000231,
    )


def user_call(reply: str) -> SimulatedUserCall:
    return SimulatedUserCall(
        model="judge-<m>",
        messages=[
            {"role": "system", "content": "A hurried diner.\n\nThe conversation so far:\n<b>You</b>: hi"},
            {"role": "user", "content": "Write your next message to the agent."},
        ],
        reply=reply,
    )


def records(conditions: list[ConditionResult | None]) -> list[TurnRecord]:
    made = []
    for n, condition in enumerate(conditions, start=1):
        last = n == len(conditions)
        made.append(
            TurnRecord(
                turn=n,
                node="evals[0].simulate" if n > 1 else "evals[0]",
                prompt=f"At 8pm, turn {n}" if n > 1 else "I need a table for two tonight.",
                response=f"Reply {n}",
                user_usage=Usage(prompt_tokens=30, completion_tokens=4) if n > 1 else Usage(),
                simulated_user=user_call(f'You: "<em>At 8pm</em>, turn {n}"') if n > 1 else None,
                judge_usage=condition.usage if condition and condition.usage else Usage(),
                stop_when=condition,
                termination=ENDED if last else None,
            )
        )
    return made


def make_conversation(user, turns: list[TurnRecord]) -> Run:
    version = suite_services.create_suite(owner=user, source=SUITE).latest_version
    run = mock_run(version, user, status="passed")
    conversation = Conversation.objects.create(
        run=run, index=0, eval_id="booking", status="passed", score=1.0, prompt=turns[0].prompt,
        kind="multi-turn", style="simulated", termination=ENDED,
        verdict=f"passed after {len(turns)} turns: {ENDED}", finished_at=timezone.now(),
    )  # fmt: skip
    store_turns(conversation, turns)
    return run


def transcript(client, run: Run) -> str:
    response = client.get(reverse("runs:conversation", args=[run.pk, 0]))
    assert response.status_code == 200
    return response.content.decode()


def turn(page: str, number: int) -> str:
    return page.split(f'<li class="turn" id="turn-{number}">', 1)[1].split('<li class="turn"', 1)[0]


def text(fragment: str) -> str:
    """What a reader sees: tags removed, entities decoded, whitespace collapsed."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def condition_lines(fragment: str) -> list[str]:
    return [text(line.split("</div>")[0]) for line in fragment.split('<div class="condition-line">')[1:]]


def test_each_turn_shows_the_natural_language_verdict_with_confidence_and_threshold(logged_in, user):
    run = make_conversation(
        user,
        records(
            [
                asked(0.1, "Nothing booked.", '{"score": 0.1}'),
                asked(
                    0.35, "The agent still needs a <b>name</b>.", '{"score": 0.35, "reason": "<b>name</b>"}'
                ),
                asked(0.91, "Confirmed.", '{"score": 0.91}'),
            ]
        ),
    )
    page = transcript(logged_in, run)
    assert [condition_lines(turn(page, n)) for n in (1, 2, 3)] == [
        [f"stop_when · {QUESTION} → no (0.10 < 0.70)"],
        [f"stop_when · {QUESTION} → no (0.35 < 0.70)"],
        [f"stop_when · {QUESTION} → yes (0.91 ≥ 0.70) — stopped"],
    ]
    second = turn(page, 2)
    # The judge's reason, raw answer and tokens are one click away, escaped.
    reason = second.split('<ul class="conditions"', 1)[1].split("<details", 1)[1].split("</details>", 1)[0]
    assert "Judge's reason" in reason
    assert "The agent still needs a &lt;b&gt;name&lt;/b&gt;." in reason
    assert "{&quot;score&quot;: 0.35, &quot;reason&quot;: &quot;&lt;b&gt;name&lt;/b&gt;&quot;}" in reason
    assert "212 in · 19 out · $0.000231" in text(reason)
    assert "<b>name" not in page


def test_members_of_a_combinator_are_nested_and_short_circuited_ones_read_not_evaluated(logged_in, user):
    field = ConditionResult(kind="field_equals", label='field_equals status = "confirmed"', met=True,
                            reason='status is "confirmed"')  # fmt: skip
    skipped = ConditionResult(
        kind="natural_language", label=QUESTION, met=None, reason="not evaluated: an earlier member held"
    )
    first = ConditionResult(kind="any", label="any", met=False, children=[
        ConditionResult(kind="field_equals", label='field_equals status = "confirmed"', met=False,
                        reason="no status in the reply (not JSON, or not set)"),
        asked(0.2, "Not yet.", '{"score": 0.2}'),
    ])  # fmt: skip
    last = ConditionResult(kind="any", label="any", met=True, children=[field, skipped])
    page = transcript(logged_in, make_conversation(user, records([first, last])))
    assert condition_lines(turn(page, 1)) == [
        "stop_when · any → no",
        'field_equals status = "confirmed" → no: no status in the reply (not JSON, or not set)',
        f"{QUESTION} → no (0.20 < 0.70)",
    ]
    assert condition_lines(turn(page, 2)) == [
        "stop_when · any → yes — stopped",
        'field_equals status = "confirmed" → yes: status is "confirmed"',
        f"{QUESTION} → not evaluated",
    ]
    nested = turn(page, 2).split('class="conditions conditions-nested"', 1)[1]
    assert 'class="condition condition-skipped" title="not evaluated: an earlier member held"' in nested
    assert "Judge's reason" not in nested  # no judge was asked on this turn


def test_the_simulated_users_prompt_and_reply_are_one_click_away_beside_its_message(logged_in, user):
    page = transcript(
        logged_in, make_conversation(user, records([asked(0.1, "No.", "0.1"), asked(0.91, "Yes.", "0.91")]))
    )
    first, second = turn(page, 1), turn(page, 2)
    assert "sim-call" not in first  # the eval's own prompt: nobody wrote it
    message = second.split('<div class="msg msg-user msg-simulated">', 1)[1].split(
        '<div class="msg msg-assistant">'
    )[0]
    call = message.split('<details class="raw sim-call">', 1)[1].split("</details>", 1)[0]
    assert "Simulated user's prompt and reply" in call
    assert "Sent to judge-<m> · 30 in · 4 out" in text(call)
    assert "judge-&lt;m&gt;" in call
    assert "A hurried diner.\n\nThe conversation so far:\n&lt;b&gt;You&lt;/b&gt;: hi</pre>" in call
    assert "Write your next message to the agent.</pre>" in call
    assert "You: &quot;&lt;em&gt;At 8pm&lt;/em&gt;, turn 2&quot;</pre>" in call  # its answer as returned
    assert "<em>" not in page and "<b>You" not in page


def test_turns_stored_before_these_were_recorded_show_without_them(logged_in, user):
    old = [
        turn.model_dump(mode="json", exclude={"stop_when", "simulated_user"})
        for turn in records([None, None])
    ]
    run = make_conversation(user, [TurnRecord.model_validate(record) for record in old])
    page = transcript(logged_in, run)
    assert 'class="conditions"' not in page and "sim-call" not in page
    assert '<span class="tag tag-simulated">simulated user</span>' in turn(
        page, 2
    )  # still marked by its tokens


def test_the_polled_turns_carry_them_too(logged_in, user):
    run = make_conversation(user, records([asked(0.1, "No.", "0.1"), asked(0.91, "Yes.", "0.91")]))
    Conversation.objects.filter(run=run).update(status="running", finished_at=None)
    response = logged_in.get(
        reverse("runs:conversation_poll", args=[run.pk, 0]),
        {"after": 1, "status": "queued"},
        HTTP_HX_REQUEST="true",
    )
    fragment = response.content.decode()
    assert condition_lines(turn(fragment, 2)) == [f"stop_when · {QUESTION} → yes (0.91 ≥ 0.70) — stopped"]
    assert "Simulated user's prompt and reply" in fragment
