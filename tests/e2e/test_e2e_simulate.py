"""End-to-end for simulated users and repeated trials: suites saved, launched, played by a real Celery worker
against the fake OpenAI server, which plays the agent (scripts), the simulated user (a rule on its system
prompt) and the judge (rules on the last message) at once.

We assert exactly what the simulated user was sent, the termination reason and turn count that are stored,
per-iteration conversations and the statistics `runs.selectors.report(run).iterated` gives, and that a
resumed simulated conversation asks neither the simulated user nor the judge again for stored turns.
"""

from __future__ import annotations

import json
import math

import openai
import pytest
import yaml
from django.test import Client
from django.urls import reverse

from runs import services
from runs.models import Conversation, Status, Turn
from runs.selectors import report
from suites.models import Suite
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run
from tests.factories import body as response_body

pytestmark = [pytest.mark.e2e]

ASK = "Write your next message to the agent."
SYSTEM = "You are a restaurant booking agent. Reply with JSON once a booking is confirmed."
PERSONA = "You are a friendly customer. Answer what the agent asks."
CONFIRMED = '{"status": "confirmed", "name": "Alice", "party": 2, "when": "tomorrow 19:00"}'

BOOKING = f"""
name: booking-e2e
model: fake/test-model
judge: fake/judge-model
system: {SYSTEM}
evals:
  - id: booking
    prompt: I want to book a table for two.
    simulate:
      persona: {PERSONA}
      follow_ups: [{{input: "Tomorrow at 7pm"}}]
      max_turns: 8
      stop_when:
        field_equals: {{path: status, value: confirmed}}
    checks:
      - llm_judge: {{criteria: "Confirmed date, time and party size", scope: conversation}}
"""


def role_of(body: dict) -> str:
    """Who a logged request was for: the agent, the simulated user, the stop-condition judge or a check's judge."""
    messages = body["messages"]
    if messages[-1]["content"] == ASK:
        return "user"
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    if system.startswith("You watch a conversation between a user and an AI agent"):
        return "condition"
    if system.startswith("You are a strict evaluation judge"):
        return "judge"
    return "agent"


def by_role(fake, since: int = 0) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"agent": [], "user": [], "condition": [], "judge": []}
    for body in fake.chat_requests()[since:]:
        out[role_of(body)].append(body)
    return out


def launch(user, source: str, **kwargs):
    """Run the suite's latest version, saving the suite the first time."""
    suite = Suite.objects.filter(owner=user, name=yaml.safe_load(source)["name"]).first()
    if suite is None:
        suite = create_suite(owner=user, source=source)
    return services.create_run(version=suite.latest_version, user=user, **kwargs)


# --- the fake endpoint's rules for playing several parts ------------------------------------------------------


def test_fake_rules_cycle_and_match_the_system_message_or_any_message(fake_openai):
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="sk-test-fake", max_retries=0)

    def ask(messages, model="m"):
        return client.chat.completions.create(model=model, messages=messages).choices[0].message.content

    fake_openai.rule("persona: grumpy", ["No.", "Still no.", "Fine."], where="system")
    fake_openai.rule("hidden", "found anywhere", where="any")
    fake_openai.rule("Rate", "judge says 1", model="judge-model")
    fake_openai.rule("Rate", "default last-message rule")
    grumpy = [{"role": "system", "content": "persona: grumpy"}, {"role": "user", "content": ASK}]
    assert [ask(grumpy) for _ in range(4)] == ["No.", "Still no.", "Fine.", "No."]
    # where="system" ignores the same text in a user message.
    assert ask([{"role": "user", "content": "persona: grumpy"}]) == "OK"
    assert (
        ask([{"role": "user", "content": "hidden here"}, {"role": "user", "content": "last"}])
        == "found anywhere"
    )
    assert ask([{"role": "user", "content": "Rate this"}], model="judge-model") == "judge says 1"
    assert ask([{"role": "user", "content": "Rate this"}], model="other") == "default last-message rule"
    # Scripts still come first, and a reset forgets rules with their position in the cycle.
    fake_openai.script(ASK, ["scripted"])
    assert ask(grumpy) == "scripted"
    fake_openai.reset()
    assert ask(grumpy) == "OK"
    with pytest.raises(ValueError):
        fake_openai.rule("x", "y", where="first")
    with pytest.raises(ValueError):
        fake_openai.rule("x", [])


# --- a booking flow -------------------------------------------------------------------------------------------


def test_booking_flow_reaches_confirmed_on_turn_3(user, fake_endpoint, fake_openai, start_worker):
    fake_openai.script(
        "I want to book a table for two.",
        ["Sure! For which day and time?", "Great, under what name?", CONFIRMED],
    )
    fake_openai.rule("Agent: Great, under what name?", 'You: "Alice"', where="system", model="judge-model")
    fake_openai.rule("Confirmed date, time and party size", '{"score": 0.9, "reason": "Date, time and two."}')
    start_worker()
    run = wait_for_run(launch(user, BOOKING))

    assert run.status == Status.PASSED
    conversation = run.conversations.get()
    assert (conversation.status, conversation.style, conversation.kind, conversation.turn_count) == (
        "passed", "simulated", "multi-turn", 3,
    )  # fmt: skip
    assert conversation.termination == 'condition met: field_equals status = "confirmed"'
    assert conversation.verdict == 'passed after 3 turns: condition met: field_equals status = "confirmed"'
    # The same verdict in the engine's fields, so that no page has to take the sentence apart.
    assert (conversation.reason, conversation.termination_kind, conversation.termination_detail) == (
        "passed after 3 turns", "condition_met", 'field_equals status = "confirmed"',
    )  # fmt: skip

    requests = by_role(fake_openai)
    assert [len(requests[role]) for role in ("agent", "user", "condition", "judge")] == [3, 1, 0, 1]
    # The simulated user (the suite's judge model) was asked once, for turn 3, after the scripted follow-up,
    # and saw the conversation from its side: the persona, then the documented instructions and transcript.
    (asked,) = requests["user"]
    assert asked["model"] == "judge-model"
    assert asked["messages"] == [
        {
            "role": "system",
            "content": f"{PERSONA}\n\n"
            "You are the user in a conversation with an AI agent. Write only your next message to the agent: "
            "no role label, no quotation marks, no commentary.\n\n"
            "The conversation so far (You = you, Agent = the agent you are talking to):\n"
            "You: I want to book a table for two.\n"
            "Agent: Sure! For which day and time?\n"
            "You: Tomorrow at 7pm\n"
            "Agent: Great, under what name?",
        },
        {"role": "user", "content": ASK},
    ]
    # The agent got the cleaned line ("You:" and quotes off) as the user's third message.
    assert requests["agent"][2]["model"] == "test-model"
    assert requests["agent"][2]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "I want to book a table for two."},
        {"role": "assistant", "content": "Sure! For which day and time?"},
        {"role": "user", "content": "Tomorrow at 7pm"},
        {"role": "assistant", "content": "Great, under what name?"},
        {"role": "user", "content": "Alice"},
    ]
    # The final check graded the whole conversation, in [Role]: form.
    (judged,) = requests["judge"]
    assert judged["model"] == "judge-model"
    assert judged["messages"][1]["content"] == (
        f"Criteria:\nConfirmed date, time and party size\n\nConversation:\n[System]:\n{SYSTEM}\n\n"
        "[User]:\nI want to book a table for two.\n\n[Assistant]:\nSure! For which day and time?\n\n"
        "[User]:\nTomorrow at 7pm\n\n[Assistant]:\nGreat, under what name?\n\n[User]:\nAlice\n\n"
        f"[Assistant]:\n{CONFIRMED}\n\n"
        "Grade the whole conversation against the criteria. Respond with the JSON object only."
    )

    # Stored: one Turn per exchange; the reason and the final checks on the last only.
    records = [turn.record for turn in conversation.turns.order_by("position")]
    assert [r["prompt"] for r in records] == ["I want to book a table for two.", "Tomorrow at 7pm", "Alice"]
    assert [r["termination"] for r in records] == [None, None, conversation.termination]
    assert [[c["type"] for c in r["checks"]] for r in records] == [[], [], ["llm_judge"]]
    assert records[2]["checks"][0]["passed"] and records[2]["checks"][0]["score"] == 0.9
    # Tokens (the fake counts words) are kept apart: the simulated user's on turn 3 only, the judge's there too.
    user_tokens = [r["user_usage"]["prompt_tokens"] + r["user_usage"]["completion_tokens"] for r in records]
    judge_tokens = [
        r["judge_usage"]["prompt_tokens"] + r["judge_usage"]["completion_tokens"] for r in records
    ]
    assert user_tokens[:2] == [0, 0] and user_tokens[2] > 0
    assert judge_tokens[:2] == [0, 0] and judge_tokens[2] > 0
    asked_words = sum(len(m["content"].split()) for m in asked["messages"])
    assert records[2]["user_usage"] == {
        "prompt_tokens": asked_words,
        "completion_tokens": 2,
        "estimated": False,
    }
    assert (conversation.user_tokens, conversation.judge_tokens) == (user_tokens[2], judge_tokens[2])
    assert conversation.prompt_tokens == sum(r["usage"]["prompt_tokens"] for r in records)
    # Each turn keeps its stop condition as evaluated, and turn 3 how the simulated user wrote its message.
    assert [(r["stop_when"]["label"], r["stop_when"]["met"], r["stop_when"]["reason"]) for r in records] == [
        ('field_equals status = "confirmed"', False, "no status in the reply (not JSON, or not set)"),
        ('field_equals status = "confirmed"', False, "no status in the reply (not JSON, or not set)"),
        ('field_equals status = "confirmed"', True, 'status is "confirmed"'),
    ]
    assert [r["simulated_user"] for r in records[:2]] == [None, None]
    assert records[2]["simulated_user"] == {
        "model": "judge-model",
        "messages": asked["messages"],
        "reply": 'You: "Alice"',
    }

    # The JSON report says the same, with the run's totals split three ways.
    data = report(run).model_dump(mode="json")
    (result,) = data["evals"]
    assert (result["conversation"], result["kind"], result["termination"], result["iteration"]) == (
        "simulated", "multi-turn", conversation.termination, 0,
    )  # fmt: skip
    assert (result["totals"]["user_tokens"], result["totals"]["judge_tokens"]) == (
        user_tokens[2],
        judge_tokens[2],
    )
    assert (data["totals"]["user_tokens"], data["totals"]["judge_tokens"]) == (
        user_tokens[2],
        judge_tokens[2],
    )
    assert data["totals"]["total_tokens"] == conversation.prompt_tokens + conversation.completion_tokens
    assert data["iterated"] == []
    assert [turn["stop_when"] for turn in result["turns"]] == [r["stop_when"] for r in records]
    assert [turn["simulated_user"] for turn in result["turns"]] == [r["simulated_user"] for r in records]


def test_inputs_exhausted_and_max_turns_are_stored_as_the_reason(
    user, fake_endpoint, fake_openai, start_worker
):
    source = """
name: reasons
model: fake/test-model
evals:
  - id: exhausted
    prompt: Book a table.
    simulate: {follow_ups: [{input: Friday.}], stop_when: {contains: confirmed}}
  - id: capped
    prompt: Cancel my booking.
    simulate: {follow_ups: [{input: Please., turns: .inf}], max_turns: 3, on_max_turns: pass}
    checks: [{contains: booking}]
"""
    fake_openai.script("Book a table.", ["For when?", "Which time?"])
    fake_openai.script("Cancel my booking.", ["Which booking?"])
    start_worker()
    run = wait_for_run(launch(user, source))
    rows = {c.eval_id: (c.status, c.termination, c.turn_count, c.verdict) for c in run.conversations.all()}
    assert rows == {
        "exhausted": ("failed", "inputs exhausted", 2, "failed after 2 turns: inputs exhausted"),
        "capped": ("passed", "max turns (3)", 3, "passed after 3 turns: max turns (3)"),
    }
    kinds = {c.eval_id: (c.termination_kind, c.termination_detail, c.reason) for c in run.conversations.all()}
    assert kinds == {
        "exhausted": ("inputs_exhausted", "", "failed after 2 turns"),
        "capped": ("max_turns", "3", "passed after 3 turns"),
    }
    assert run.status == Status.FAILED
    assert by_role(fake_openai)["user"] == []  # no persona: nobody plays the user


def test_simulated_user_endpoint_down_is_an_error_with_termination_error(
    user, fake_endpoint, fake_openai, start_worker
):
    from tests.fakeopenai import Reply

    source = BOOKING.replace('      follow_ups: [{input: "Tomorrow at 7pm"}]\n', "")
    fake_openai.script("I want to book a table for two.", ["Sure! For which day and time?"])
    fake_openai.rule(ASK, Reply(status=400, text="model not found"))
    start_worker()
    run = wait_for_run(launch(user, source))
    conversation = run.conversations.get()
    assert (run.status, conversation.status, conversation.termination) == ("error", "error", "error")
    assert conversation.termination_kind == "error"
    assert conversation.verdict == "error on turn 2 (simulated user): HTTP 400 from fake: model not found"
    assert conversation.turn_count == 1


# --- repeated trials ------------------------------------------------------------------------------------------


FLAKY = """
name: flaky-e2e
model: fake/test-model
evals:
  - id: arithmetic
    prompt: What is 15 * 7?
    checks: [{match: "*105*"}]
    iterations: 5
  - id: greeting
    prompt: Say hello.
    checks: [{contains: hello}]
"""


def test_five_iterations_of_an_alternating_model_are_flaky_with_the_right_statistics(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_openai.rule("What is 15 * 7?", ["15 * 7 = 105", "15 * 7 = 100"])  # pass, fail, pass, ...
    fake_openai.script("Say hello.", ["hello!"])
    start_worker()
    # Concurrency 1 plays the conversations one after another, in (eval, iteration) order.
    run = wait_for_run(launch(user, FLAKY, concurrency=1))

    rows = list(
        run.conversations.order_by("index", "iteration").values_list(
            "eval_id", "iteration", "status", "score"
        )
    )
    assert rows == [
        ("arithmetic", 0, "passed", 1.0),
        ("arithmetic", 1, "failed", 0.0),
        ("arithmetic", 2, "passed", 1.0),
        ("arithmetic", 3, "failed", 0.0),
        ("arithmetic", 4, "passed", 1.0),
        ("greeting", 0, "passed", 1.0),
    ]
    # Every repetition was a conversation of its own: five one-message requests.
    asked = fake_openai.chat_requests(first_user="What is 15 * 7?")
    assert [len(body["messages"]) for body in asked] == [1] * 5
    assert run.status == Status.PASSED  # 3/5 >= 0.5 although two iterations failed

    result = report(run)
    assert [(e.id, e.iteration, e.status) for e in result.evals] == [(r[0], r[1], r[2]) for r in rows]
    (item,) = result.iterated
    assert (item.id, item.index, item.kind, item.status) == (
        "arithmetic",
        0,
        "single-turn-iterated",
        "passed",
    )
    stats = item.stats
    assert (stats.iterations, stats.pass_count, stats.pass_rate, stats.errors) == (5, 3, 0.6, 0)
    assert stats.flaky
    assert stats.pass_rate_low == pytest.approx(0.2307, abs=5e-5)  # Wilson 95% for 3 of 5
    assert stats.pass_rate_high == pytest.approx(0.8824, abs=5e-5)
    assert stats.scores == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert stats.mean == pytest.approx(0.6)
    assert stats.std_dev == pytest.approx(math.sqrt(0.24))  # population: sqrt((3 * 0.16 + 2 * 0.36) / 5)
    assert (stats.min, stats.max, stats.representative) == (0.0, 1.0, 0)
    assert (stats.avg_turns, stats.min_turns, stats.max_turns) == (1.0, 1, 1)
    assert stats.pass_rate_threshold == 0.5 and stats.passed
    data = result.model_dump(mode="json")
    assert data["iterated"][0]["stats"]["pass_count"] == 3 and data["status"] == "passed"

    # The rule's cycle goes on where it stopped: the next run gets fail, pass, fail, pass, fail.
    run = wait_for_run(launch(user, FLAKY, concurrency=1))
    (item,) = report(run).iterated
    assert (item.stats.pass_count, item.stats.flaky, item.status) == (2, True, "failed")
    assert run.status == Status.FAILED


# --- resuming -------------------------------------------------------------------------------------------------


RESUMABLE = """
name: resume-e2e
model: fake/test-model
judge: fake/judge-model
evals:
  - id: booking
    prompt: Book me a table.
    simulate:
      persona: You are a busy customer.
      max_turns: 5
      stop_when: {natural_language: {prompt: "Is the booking confirmed?"}}
    checks:
      - llm_judge: {criteria: Polite throughout, scope: conversation}
"""


def test_resuming_a_simulated_conversation_asks_nobody_again_for_stored_turns(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_openai.script(
        "Book me a table.", ["For when?", "Under what name?", "Confirmed for Alice, Friday 7pm."]
    )
    fake_openai.rule("Agent: Under what name?", "Alice.", where="system")
    fake_openai.rule("Agent: For when?", "Friday 7pm.", where="system")
    fake_openai.rule("Confirmed for Alice, Friday 7pm.\n\nQuestion:", '{"score": 0.95, "reason": "Yes."}')
    fake_openai.rule("Question: Is the booking confirmed?", '{"score": 0.1, "reason": "Not yet."}')
    fake_openai.rule("Polite throughout", '{"score": 0.8, "reason": "Polite."}')
    worker = start_worker()
    first = wait_for_run(launch(user, RESUMABLE))
    played = first.conversations.get()
    assert (first.status, played.turn_count, played.termination) == (
        "passed", 3, 'condition met: natural_language "Is the booking confirmed?" (confidence 0.95, threshold 0.7)',
    )  # fmt: skip
    counts = {role: len(bodies) for role, bodies in by_role(fake_openai).items()}
    assert counts == {"agent": 3, "user": 2, "condition": 3, "judge": 1}
    stored = [turn.record for turn in played.turns.order_by("position")]
    # Every turn stored the judge's verdict on the stop condition, with the simulated user's prompt and reply.
    conditions = [r["stop_when"] for r in stored]
    assert [(c["met"], c["confidence"], c["threshold"], c["reason"]) for c in conditions] == [
        (False, 0.1, 0.7, "Not yet."),
        (False, 0.1, 0.7, "Not yet."),
        (True, 0.95, 0.7, "Yes."),
    ]
    assert [c["raw"] for c in conditions] == ['{"score": 0.1, "reason": "Not yet."}'] * 2 + [
        '{"score": 0.95, "reason": "Yes."}'
    ]
    for record, condition in zip(stored, conditions, strict=True):
        assert condition["usage"]["prompt_tokens"] > 0 and condition["usage"]["completion_tokens"] > 0
        if record["turn"] < 3:  # the final turn's judge usage also has the final check's judge
            assert condition["usage"] == record["judge_usage"]
    user_requests = by_role(fake_openai)["user"]
    assert stored[0]["simulated_user"] is None
    assert [(r["simulated_user"]["messages"], r["simulated_user"]["reply"]) for r in stored[1:]] == [
        (user_requests[0]["messages"], "Friday 7pm."),
        (user_requests[1]["messages"], "Alice."),
    ]
    # ...and the run's results.json says the same.
    owner = Client()
    owner.force_login(user)
    document = json.loads(response_body(owner.get(reverse("runs:json", args=[first.pk]))))
    (shown,) = document["evals"]
    assert [turn["stop_when"] for turn in shown["turns"]] == conditions
    assert [turn["simulated_user"] for turn in shown["turns"]] == [r["simulated_user"] for r in stored]

    # Two conversations a crashed worker left behind: one with every turn stored (it died before finishing),
    # one with two. Their tasks wait in the broker while no worker runs.
    worker.stop()
    whole, partial = launch(user, RESUMABLE), launch(user, RESUMABLE)
    for run, records in ((whole, stored), (partial, stored[:2])):
        conversation = run.conversations.get()
        Turn.objects.bulk_create(
            Turn(conversation=conversation, position=r["turn"], record=r, passed=r["passed"]) for r in records
        )
        Conversation.objects.filter(pk=conversation.pk).update(attempt=1, turn_count=len(records))
    mark = len(fake_openai.chat_requests())
    start_worker()
    whole, partial = wait_for_run(whole), wait_for_run(partial)

    # Only the partial conversation's third turn was played: one agent reply, one message from the simulated
    # user (for turn 3; turn 2's came from the store), one condition check and the final judge.
    new = by_role(fake_openai, since=mark)
    assert {role: len(bodies) for role, bodies in new.items()} == {
        "agent": 1,
        "user": 1,
        "condition": 1,
        "judge": 1,
    }
    assert (
        new["user"][0]["messages"] == by_role(fake_openai)["user"][1]["messages"]
    )  # same view as the first time
    assert new["agent"][0]["messages"][-1] == {"role": "user", "content": "Alice."}
    for run in (whole, partial):
        conversation = run.conversations.get()
        assert (run.status, conversation.status, conversation.attempt) == ("passed", "passed", 2)
        assert (conversation.termination, conversation.verdict) == (played.termination, played.verdict)
        records = [turn.record for turn in conversation.turns.order_by("position")]
        assert [r["turn"] for r in records] == [1, 2, 3]
        assert records[:2] == stored[:2]  # their recorded conditions and simulated-user calls as stored
        assert records[2]["stop_when"] == stored[2]["stop_when"]  # turn 3 judged again, the same way
        assert records[2]["simulated_user"] == stored[2]["simulated_user"]
    assert [t.record for t in whole.conversations.get().turns.order_by("position")] == stored
