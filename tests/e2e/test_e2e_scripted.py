"""End-to-end for scripted turns, per-turn grades, histories with attached files, datasets and gates: a suite
saved with its files, launched, played by a real Celery worker against the fake OpenAI server.

We assert the exact message arrays each request carried, what is stored (Turn.record["grade"], the
Conversation's turns_passed/turns_total/style/history) and how gates decide the run's status.
"""

from __future__ import annotations

import pytest

from runs import services
from runs.models import Status, Turn
from runs.selectors import report
from suites.services import create_suite, save_version
from tests.e2e.conftest import wait_for_run
from tests.fakeopenai import Reply

pytestmark = [pytest.mark.e2e]

GUIDELINES = "- Name the bug and its line before suggesting a fix.\n"
SNIPPET = "def show(items):\n    for i in range(len(items) + 1):\n        print(items[i])\n"
SYSTEM = "You are a careful assistant."
GUIDELINES_SYSTEM = f"{SYSTEM}\n\n=== coding-guidelines.instructions.md ===\n- Name the bug and its line before suggesting a fix."

MIXED = """
name: scripted-e2e
model: fake/test-model
judge: fake/judge-model
system: You are a careful assistant.
grader: contains
evals:
  - id: capitals
    input: [What is the capital of France?, And of Germany?, And of Italy?]
    ground_truth: [Paris, Berlin, Rome]
  - id: review
    messages:
      - role: system
        content: [{type: file, value: coding-guidelines.instructions.md}]
      - role: user
        content: I have a bug in my code.
      - role: assistant
        content: Can you share the code?
      - role: user
        content: [{type: text, value: "Here it is:"}, {type: file, value: snippet.py}]
    checks:
      - llm_judge: {criteria: Names the IndexError and its line}
  - id: memory
    turns:
      - input: My name is Alice.
      - input: What is my name?
        checks: [{match: "*Alice*"}]
    aggregation: mean
"""

REVIEW_HISTORY = [
    {"role": "user", "content": "I have a bug in my code."},
    {"role": "assistant", "content": "Can you share the code?"},
    {"role": "user", "content": "Here it is:\n=== snippet.py ===\n" + SNIPPET.rstrip()},
]


def test_scripted_history_and_turns_through_a_worker(user, fake_endpoint, fake_openai, start_worker):
    fake_openai.script("What is the capital of France?", ["Paris.", "Berlin, of course.", "Madrid."])
    fake_openai.script("I have a bug in my code.", ["IndexError on line 2: range goes one past the end."])
    fake_openai.script("My name is Alice.", ["Nice to meet you, Alice.", "Your name is Alice."])
    fake_openai.rule("Names the IndexError", '{"score": 0.9, "reason": "Names the bug and line 2."}')
    start_worker()
    suite = create_suite(
        owner=user,
        source=MIXED,
        files={"coding-guidelines.instructions.md": GUIDELINES, "snippet.py": SNIPPET},
    )
    run = wait_for_run(services.create_run(version=suite.latest_version, user=user))
    assert run.status == Status.FAILED  # capitals gets 2 of 3 and there are no gates

    # Scripted inputs: live, in order, one conversation.
    capitals = fake_openai.chat_requests(first_user="What is the capital of France?")
    assert len(capitals) == 3
    assert capitals[2]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Germany?"},
        {"role": "assistant", "content": "Berlin, of course."},
        {"role": "user", "content": "And of Italy?"},
    ]
    assert capitals[2]["model"] == "test-model"

    # History: guidelines in the system message after the suite's prompt, snippet embedded in its turn.
    (review,) = fake_openai.chat_requests(first_user="I have a bug in my code.")
    assert review["messages"] == [{"role": "system", "content": GUIDELINES_SYSTEM}, *REVIEW_HISTORY]
    judge = next(body for body in fake_openai.chat_requests() if body["model"] == "judge-model")
    assert (
        f"[System]:\n{GUIDELINES_SYSTEM}\n\n[User]:\nI have a bug in my code.\n\n"
        "[Assistant]:\nCan you share the code?\n\n[User]:\nHere it is:\n=== snippet.py ===\n"
        f"{SNIPPET.rstrip()}\n\n[Assistant]:\nIndexError on line 2: range goes one past the end."
    ) in judge["messages"][1]["content"]

    memory = fake_openai.chat_requests(first_user="My name is Alice.")
    assert memory[1]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "My name is Alice."},
        {"role": "assistant", "content": "Nice to meet you, Alice."},
        {"role": "user", "content": "What is my name?"},
    ]

    # What is stored.
    conversations = {c.eval_id: c for c in run.conversations.all()}
    stored = {
        eval_id: (c.status, c.style, c.turns_passed, c.turns_total, c.turn_count)
        for eval_id, c in conversations.items()
    }
    assert stored == {
        "capitals": ("failed", "scripted", 2, 3, 3),
        "review": ("passed", "history", 1, 1, 1),
        "memory": ("passed", "turns", 1, 1, 2),
    }
    assert conversations["capitals"].score == pytest.approx(2 / 3)
    assert conversations["capitals"].verdict == "2 of 3 turns passed, score 0.67 < 1.00"
    assert conversations["review"].history == REVIEW_HISTORY
    assert conversations["capitals"].history == []
    assert conversations["review"].prompt == "Here it is:"
    assert conversations["review"].judge_tokens > 0

    grades = [
        turn.record["grade"]
        for turn in Turn.objects.filter(conversation=conversations["capitals"]).order_by("position")
    ]
    assert [
        (g["turn"], g["score"], g["passed"], g["submission"], g["ground_truth"], g["grader"]) for g in grades
    ] == [
        (1, 1.0, True, "Paris.", "Paris", "contains"),
        (2, 1.0, True, "Berlin, of course.", "Berlin", "contains"),
        (3, 0.0, False, "Madrid.", "Rome", "contains"),
    ]
    assert grades[2]["rationale"] == "does not contain 'Rome'"
    memory_turns = Turn.objects.filter(conversation=conversations["memory"]).order_by("position")
    assert [(t.passed, t.record["grade"], len(t.record["checks"])) for t in memory_turns] == [
        (None, None, 0),
        (True, None, 1),
    ]

    # The JSON report carries the same.
    result = report(run).model_dump(mode="json")
    by_id = {e["id"]: e for e in result["evals"]}
    assert [g["submission"] for g in by_id["capitals"]["per_turn_grades"]] == [
        "Paris.",
        "Berlin, of course.",
        "Madrid.",
    ]
    assert (by_id["capitals"]["turns_passed"], by_id["capitals"]["turns_total"]) == (2, 3)
    assert by_id["review"]["history"] == REVIEW_HISTORY
    assert by_id["review"]["conversation"] == "history"
    assert result["gates"] == [] and result["status"] == "failed"


DATASET = "\n".join(
    [
        '{"id": "europe", "input": ["Capital of France?", "Capital of Germany?", "Capital of Italy?"], '
        '"ground_truth": ["Paris", "Berlin", "Rome"]}',
        '{"input": ["Capital of Spain?", "And of Japan?"], "ground_truth": ["Madrid", "Tokyo"]}',
        '{"id": "single", "input": "Capital of Peru?", "ground_truth": "Lima"}',
    ]
)
GATED = """
name: dataset-e2e
model: fake/test-model
grader: contains
dataset: capitals.jsonl
gates:
  - {metric: avg, op: ">=", value: 0.8}
  - {metric: accuracy, op: ">=", value: 0.6}
"""


def test_dataset_rows_run_as_conversations_and_gates_decide_the_run(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_openai.script("Capital of France?", ["Paris", "Berlin", "Madrid"])
    fake_openai.script("Capital of Spain?", ["Madrid", "Tokyo"])
    fake_openai.script("Capital of Peru?", ["Lima"])
    start_worker()
    suite = create_suite(owner=user, source=GATED, files={"capitals.jsonl": DATASET})
    first = suite.latest_version

    # One eval fails (2/3) but avg 0.89 >= 0.8 and accuracy 2/3 >= 0.6: the gates pass the run.
    run = wait_for_run(services.create_run(version=first, user=user))
    rows = list(
        run.conversations.order_by("index").values_list(
            "eval_id", "status", "style", "turns_passed", "turns_total"
        )
    )
    assert rows == [
        ("europe", "failed", "scripted", 2, 3),
        ("row-2", "passed", "scripted", 2, 2),
        ("single", "passed", "scripted", 1, 1),
    ]
    assert len(fake_openai.chat_requests(first_user="Capital of France?")) == 3
    assert fake_openai.chat_requests(first_user="Capital of Spain?")[1]["messages"] == [
        {"role": "user", "content": "Capital of Spain?"},
        {"role": "assistant", "content": "Madrid"},
        {"role": "user", "content": "And of Japan?"},
    ]
    assert run.status == Status.PASSED
    gates = [(g.label, g.actual, g.passed) for g in report(run).gates]
    assert gates == [
        ("avg >= 0.8", pytest.approx((2 / 3 + 1 + 1) / 3), True),
        ("accuracy >= 0.6", pytest.approx(2 / 3), True),
    ]
    assert report(run).status == "passed"

    # Stricter gates on a new version: every eval plays the same, the run fails on its numbers.
    strict = save_version(suite=suite, source=GATED.replace("value: 0.8", "value: 0.9"), user=user)
    assert strict.file_map() == {"capitals.jsonl": DATASET}  # files carry over
    run = wait_for_run(services.create_run(version=strict, user=user))
    assert run.status == Status.FAILED
    assert [(g.label, g.passed) for g in report(run).gates] == [
        ("avg >= 0.9", False),
        ("accuracy >= 0.6", True),
    ]

    # An error still wins over passing gates: its result is unknown.
    fake_openai.script("Capital of France?", [Reply(status=400, text="bad request")])
    run = wait_for_run(services.create_run(version=first, user=user))
    assert run.conversations.get(eval_id="europe").status == Status.ERROR
    assert [(g.actual, g.passed) for g in report(run).gates] == [(1.0, True), (1.0, True)]
    assert run.status == Status.ERROR
