"""AgentV's `mode: conversation` scored as AgentV scores it, played on the fake OpenAI endpoint (a real HTTP
server): each turn's assertions give that turn a score, the test's own assertions grade the whole
conversation once and give one more score, and the case's score combines them all by `aggregation`
(orchestrator: `allScoreValues = [...allTurnScoreValues, ...conversationScores]`), passing at 0.8. Both of
AgentV's shapes: today's (promptfoo's, `assert` and `vars.input`) and the earlier one (`assertions`)."""

from __future__ import annotations

import pytest
import yaml

from engine.imports import convert
from tests.engine.promptfoo_play import judged, play, project, verdict

EARLIER = """\
description: A coding assistant over several turns
tests:
  - id: mixed-assertions
    mode: conversation
    input:
      - role: system
        content: You are a helpful coding assistant.
    assertions:
      - Agent writes correct, well-formed Python code
    turns:
      - input: Write a Python function that adds two numbers.
        assertions:
          - Contains a Python function definition
          - type: contains
            value: def
      - input: Now add type hints to the function.
        assertions:
          - Includes type hints (int, float, or similar)
          - type: contains
            value: "->"
  - id: weakest-link
    mode: conversation
    aggregation: min
    input:
      - role: system
        content: You are a concise geography expert.
    assertions:
      - Agent stays on the topic of geography
    turns:
      - input: What is the capital of France?
        assertions:
          - Names Paris as the capital of France
      - input: What country is it in?
        assertions:
          - Confirms Paris is in France
"""

FIRST = "Write a Python function that adds two numbers."
TYPED = "def add(a: int, b: int) -> int:\n    return a + b"


def today():
    return convert(project("agentv-conversation-live"))


def earlier():
    return convert({"evals/suite.yaml": EARLIER})


SHAPES = pytest.mark.parametrize("imported", [today, earlier], ids=["today", "earlier"])


def script(fake, first_reply: str, conversation: float, geography: float = 1.0) -> None:
    """Every turn judge passes; the conversation-level judges answer `conversation` and `geography`; the model
    replies `first_reply`, then typed code; Paris twice."""
    fake.rule("Agent writes correct, well-formed Python code", verdict(conversation, "judged the whole"))
    fake.rule("Agent stays on the topic of geography", verdict(geography, "judged the whole"))
    for criterion in ("Contains a Python function definition", "Includes type hints", "Names Paris",
                      "Confirms Paris is in France"):  # fmt: skip
        fake.rule(criterion, verdict(1.0))
    fake.script(FIRST, [first_reply, TYPED])
    fake.script("What is the capital of France?", ["Paris.", "Paris is in France."])


def case(report, wanted: str):
    return next(result for result in report.evals if result.id == wanted)


@SHAPES
def test_both_turns_right_and_the_conversation_judge_at_zero_fails(fake_openai, imported):
    result = imported()
    assert result.lost == []
    script(fake_openai, "def add(a, b):\n    return a + b", conversation=0.0)

    mixed = case(play(fake_openai, result), "mixed-assertions")

    # AgentV: (1 + 1 + 0) / 3 = 0.67 < 0.8 — the conversation's score is its own, not the last turn's
    assert [turn.passed for turn in mixed.turns] == [True, True]
    assert mixed.status == "failed" and mixed.score == pytest.approx(2 / 3)
    (whole,) = judged(fake_openai, "Agent writes correct, well-formed Python code")
    assert "def add(a, b):" in whole and "-> int" in whole  # the judge saw the whole conversation


@SHAPES
def test_a_turn_failing_its_contains_passes_when_the_judges_pass(fake_openai, imported):
    script(fake_openai, "Here is one:\n    add = lambda a, b: a + b", conversation=1.0)

    mixed = case(play(fake_openai, imported()), "mixed-assertions")

    # AgentV: turn 1 scores 0.5 (its judge 1, its contains 0), turn 2 and the conversation 1: 2.5 / 3 = 0.83
    assert mixed.turns[0].passed is False
    assert mixed.status == "passed" and mixed.score == pytest.approx(2.5 / 3)


@SHAPES
def test_min_takes_the_conversation_score_with_the_turns(fake_openai, imported):
    script(fake_openai, "def add(a, b):\n    return a + b", conversation=1.0, geography=0.5)

    weakest = case(play(fake_openai, imported()), "weakest-link")

    # AgentV: min(1, 1, 0.5) = 0.5 < 0.8, though both turns passed
    assert [turn.passed for turn in weakest.turns] == [True, True]
    assert weakest.status == "failed" and weakest.score == pytest.approx(0.5)


@SHAPES
def test_the_import_says_how_the_conversation_is_scored(imported):
    result = imported()
    raw = yaml.safe_load(result.source)
    mixed = next(ev for ev in raw["evals"] if ev["id"] == "mixed-assertions")
    assert "checks" not in mixed  # nothing folded into the last turn
    assert mixed["pass_rule"]["with_turns"] is True and mixed["pass_rule"]["threshold"] == 0.8
    (name,) = mixed["graders"]
    assert mixed["graders"][name]["extractor"] == "all_assistant"
    assert any("one more score beside the turns'" in line for line in result.mapped)


TRANSCRIPT = pytest.mark.parametrize(
    "folder",
    ["agentv-conversation-transcript", "agentv-conversation-transcript-earlier"],
    ids=["today", "earlier"],
)


def script_support(fake) -> None:
    fake.script(
        "Hi, I'm Sarah. Order #98765 is late.", ["Sorry Sarah, let me look.", "Done: it arrives Thursday."]
    )
    fake.script("Hello, my parcel #12 is late.", ["Let me check.", "Yes, it now arrives on Thursday."])


@TRANSCRIPT
def test_conversation_level_text_checks_read_the_whole_transcript(fake_openai, folder):
    result = convert(project(folder))
    assert result.lost == []
    script_support(fake_openai)

    report = play(fake_openai, result)

    # AgentV (orchestrator.ts runConversationMode) checks them against every message as `role: content`: the
    # order number is the user's, "ShopFast" the system message's, and the transcript starts with the system
    # message, so all three pass, though the last reply holds none of them: (1 + 1 + 1) / 3
    remembers = case(report, "remembers-the-order")
    assert remembers.status == "passed" and remembers.score == pytest.approx(1.0)
    assert {grader.score for grader in remembers.graders} == {1.0}
    # `equals` compares the whole transcript, not the last reply that would equal it: 0, so (1 + 1 + 0) / 3
    last = case(report, "last-reply-only")
    assert last.status == "failed" and last.score == pytest.approx(2 / 3)
    (equals,) = last.graders
    assert equals.score == 0.0


@TRANSCRIPT
def test_the_transcript_is_every_message_as_role_colon_content(fake_openai, folder):
    script_support(fake_openai)

    report = play(fake_openai, convert(project(folder)))

    grade = case(report, "remembers-the-order").graders[0].grades[0]
    assert grade.submission == (
        "system: You are a support agent for ShopFast.\n\n"
        "user: Hi, I'm Sarah. Order #98765 is late.\n\n"
        "assistant: Sorry Sarah, let me look.\n\n"
        "user: Can you expedite it?\n\n"
        "assistant: Done: it arrives Thursday."
    )


def test_a_conversation_level_code_grader_is_listed_as_reading_the_last_reply():
    source = EARLIER.replace(
        "      - Agent writes correct, well-formed Python code\n",
        "      - Agent writes correct, well-formed Python code\n"
        "      - type: code-grader\n        command: [python3, check.py]\n",
    )
    result = convert({"suite.yaml": source, "check.py": "print('{}')\n"})
    (lost,) = result.lost
    assert "AgentV checks the whole transcript" in lost and "last reply" in lost
