"""Import: AgentV eval files converted to evalsite suites: cases, histories, checks and attached files."""

from __future__ import annotations

import pytest
import yaml

from engine.imports import convert, detect
from engine.loader import load_suite
from engine.source import SuiteError
from tests.engine.import_fixtures import FIXTURES, evaluator_checks, folder, has, one


def test_agentv_cases_become_histories_with_judge_checks_and_attached_files():
    files = folder("agentv")
    assert detect(files) == "agentv"
    result = convert(files)
    assert result.needs_files == []
    assert set(result.files) == {
        "calculate_total.js",
        "javascript.instructions.md",
        "check_python_keywords.py",
        "check-indexerror.ts",
    }
    assert result.files["calculate_total.js"].startswith("function calculateTotal")
    suite = load_suite(result.source, files=result.files)
    assert suite.name == "code-review" and suite.model is None
    assert suite.pass_threshold == 0.8  # AgentV passes a case at 0.8
    assert [ev.id for ev in suite.evals] == [
        "code-review-javascript",
        "code-gen-python-comprehensive",
        "debugging-follow-up",
    ]
    review = suite.evals[0]
    assert review.style == "history" and [m.role for m in review.messages] == ["system", "user"]
    parts = review.messages[1].content
    assert [(p.type, p.value) for p in parts] == [
        ("text", "Please review this JavaScript function:"),
        ("file", "calculate_total.js"),
        ("file", "javascript.instructions.md"),
    ]
    criteria = review.checks[0].llm_judge.criteria
    assert review.checks[0].llm_judge.threshold == 0.8  # not the default judge's 0.5
    assert criteria.startswith("The reply should achieve: Assistant finds the loop bug")
    assert "A reference answer" in criteria and "i < items.length" in criteria

    generated = suite.evals[1]
    assert generated.tags == ["conversation:python-code-generation"]
    # two evaluators: AgentV's mean of their scores passes at 0.8, not each on its own
    assert not generated.checks and sorted(generated.graders) == ["keyword_check", "semantic_correctness"]
    assert generated.pass_rule.weighted_average == {"keyword_check": 1.0, "semantic_correctness": 1.0}
    assert generated.pass_rule.threshold == 0.8
    judge = next(check.llm_judge for check in evaluator_checks(generated) if check.llm_judge)
    assert judge.model == "gpt-5-chat"
    assert judge.criteria.startswith("You are reviewing generated Python code.")
    assert "Task: Create a Python function that:" in judge.criteria  # {{question}}
    assert "Expected: AI generates a correct Python function" in judge.criteria  # {{expected_outcome}}
    assert "return unique[-2]" in judge.criteria  # {{reference_answer}}
    assert "{{" not in judge.criteria
    assert "# note: Tests edge-case handling" in result.source

    debugging = suite.evals[2]
    assert [m.role for m in debugging.messages] == ["system", "user", "assistant", "user"]
    judges = [check for check in evaluator_checks(debugging) if check.llm_judge is not None]
    assert len(judges) == 1 and "explains the bug" in judges[0].llm_judge.criteria
    assert [check.code.command for check in evaluator_checks(debugging) if check.code] == [
        ["bun", "run", "check-indexerror.ts"]
    ]

    assert has(result.mapped, "file ./attachments/calculate_total.js → attached file calculate_total.js")
    assert has(result.mapped, "outcome + expected_messages", "llm_judge check", "code-review-javascript")
    assert has(result.mapped, "llm_judge prompt code-correctness-judge.md → the check's criteria")
    assert has(result.unmapped, "target: azure_base", "AgentV target")
    # code evaluators → code checks in the agentv dialect, their scripts attached by name
    code = next(check.code for check in evaluator_checks(generated) if check.code)
    assert code.command == ["python3", "check_python_keywords.py"]
    assert (code.dialect, code.threshold) == ("agentv", 0.8)
    assert has(result.mapped, "evaluator keyword_check → a `code` check", "python3 check_python_keywords.py")
    assert has(result.mapped, "evaluator mentions_error → a `code` check", "bun run check-indexerror.ts")


def test_agentv_files_not_uploaded_are_listed_to_attach():
    result = convert(one("agentv/code-review.eval.yaml"))
    assert result.files == {}
    assert result.needs_files == [
        "calculate_total.js",
        "javascript.instructions.md",
        "check_python_keywords.py",
        "code-correctness-judge.md",
        "check-indexerror.ts",
    ]
    assert has(result.unmapped, "file ./attachments/calculate_total.js", "not uploaded — attach it")
    with pytest.raises(SuiteError, match="file `calculate_total.js` is not attached"):
        load_suite(result.source, files=result.files)


# --- AgentV, today's format -------------------------------------------------------------------------------


def test_agentv_today_tests_input_expected_output_and_assertions_convert_and_validate():
    files = folder("agentv-today")
    assert detect(files) == "agentv"
    result = convert(files)
    assert result.needs_files == []
    assert set(result.files) == {"support.instructions.md", "refund-judge.md", "order.txt", "check-policy.ts"}
    raw = yaml.safe_load(result.source)
    assert raw["name"] == "support-bot" and [ev["id"] for ev in raw["evals"]] == [
        "refund-multi-turn",
        "greeting",
        "order-status-json",
        "default-judge",
    ]
    refund, greeting, order, default = raw["evals"]
    # input as a messages array, file parts attached; conversation_id kept as a tag
    assert [m["role"] for m in refund["messages"]] == ["system", "user", "assistant", "user"]
    assert refund["messages"][0]["content"] == [{"type": "file", "value": "support.instructions.md"}]
    assert refund["tags"] == ["conversation:refunds"]
    # llm-grader with a prompt file → a named llm_judge grader, the file attached with placeholders mapped
    assert refund["graders"]["refund_quality"] == {
        "kind": "llm_judge",
        "model": "gpt-4o-mini",
        "rubric_file": "refund-judge.md",
        "threshold": 0.8,
    }
    # AgentV's weighted mean of the assertions' scores, passing at 0.8
    assert refund["pass_rule"] == {
        "weighted_average": {
            "refund_quality": 1.0,
            "follows_policy": 1.0,
            "mentions-window": 1.0,
            "order-id": 1.0,
            "policy_script": 1.0,
        },
        "threshold": 0.8,
    }
    rubric = result.files["refund-judge.md"]
    assert "Reference answer: {ground_truth}" in rubric
    assert "Assistant's answer: {submission}" in rubric and '{{"score": <0-1>' in rubric
    assert refund["ground_truth"].startswith("You are within the 30-day window")
    # contains / regex / equals → check graders, names kept (made slug-safe); AgentV's contains is
    # case-sensitive, evalsite's is not, so a text with letters becomes a regex
    assert refund["graders"]["mentions-window"] == {
        "kind": "check",
        "check": {"regex": r"30\-day"},
        "threshold": 0.8,
    }
    assert refund["graders"]["order-id"]["check"] == {"regex": r"A-\d{4}"}
    # code-grader → a check grader running the program in the agentv dialect, its script attached
    assert refund["graders"]["policy_script"]["check"]["code"] == {
        "command": ["bun", "run", "check-policy.ts"],
        "dialect": "agentv",
        "threshold": 0.8,
        "config": {
            "criteria": refund["graders"]["policy_script"]["check"]["code"]["config"]["criteria"],
            "config": {},
        },
    }
    assert "checks" not in refund
    # a prompt file with per-case variables: the rubric text with them filled in ({{question}}: the last
    # user turn; {{input_messages}}: the given conversation in [Role]: form, guidelines apart)
    policy = refund["graders"]["follows_policy"]
    assert policy["threshold"] == 0.8 and "rubric_file" not in policy
    assert policy["rubric"].startswith("The customer's last message: It is A-1042, bought 12 days ago.\n")
    assert "[User]:\nI want my money back.\n\n[Assistant]:\nSure, can you" in policy["rubric"]
    assert "instructions" not in policy["rubric"]
    assert policy["rubric"].endswith("Does {submission} meet this: The assistant asks for the order number, then "
                                     "explains the 30-day refund window.\n")  # fmt: skip
    assert "policy-judge.md" not in result.files
    # input as a string; an inline llm-grader prompt with per-case {{criteria}} → rubric text
    assert greeting["messages"] == [{"role": "user", "content": "Hello!"}]
    assert greeting["graders"]["exact_greeting"]["check"] == {
        "equals": "Hello! How can I help you with your order today?"
    }
    assert greeting["graders"]["tone"]["rubric"].startswith(
        "The criteria: A friendly greeting that offers help with orders.\nThe user said: Hello!\n"
    )
    # an object expected_output is the judge's reference answer (JSON text), not strict field checks: a
    # reply saying confidence 0.95 where the reference has 0.92 is the judge's to weigh
    assert len(order["checks"]) == 1 and "field_equals" not in str(order)
    assert '"order_id": "A-1042"' in order["checks"][0]["llm_judge"]["criteria"]
    # no assertions: AgentV's default judge on the criteria, passing at 0.8
    assert default["checks"] == [
        {
            "llm_judge": {
                "criteria": "The reply should achieve: Explains how to track a parcel.",
                "threshold": 0.8,
            }
        }
    ]

    assert has(result.mapped, "tests → evals")
    assert has(result.mapped, "refund_quality", "rubric_file refund-judge.md")
    assert has(result.mapped, "mentions-window (contains) → a check grader `regex`")
    assert has(
        result.mapped, "expected_output (an object) → the judge's reference answer", "order-status-json"
    )
    assert has(result.mapped, "conversation_id → tag", "refund-multi-turn, greeting")
    assert has(
        result.mapped, "policy_script (code-grader) → a `code` check running `bun run check-policy.ts`"
    )
    assert has(result.unmapped, "execution.target: azure_base")
    assert has(result.unmapped, "execution.target (a per-case AgentV target)", "order-status-json")
    assert has(result.mapped, "follows_policy", "policy-judge.md", "per-case variables filled in")
    assert has(result.mapped, "criteria → what the judge grades against", "refund-multi-turn")

    suite = load_suite(result.source, files=result.files)
    refund = suite.evals[0]
    assert list(refund.graders) == [
        "refund_quality",
        "follows_policy",
        "mentions-window",
        "order-id",
        "policy_script",
    ]
    assert refund.graders["refund_quality"].rubric_file == "refund-judge.md"
    assert refund.graders["refund_quality"].model == "gpt-4o-mini"
    assert refund.graders["mentions-window"].check.regex == r"30\-day"
    assert set(suite.files_used()) == {
        "refund-judge.md",
        "support.instructions.md",
        "order.txt",
        "check-policy.ts",
    }


def test_agentv_today_EVAL_yaml_name_and_the_prompt_file_not_uploaded():
    text = (
        (FIXTURES / "agentv-today" / "support-bot.eval.yaml").read_text().replace("name: support-bot\n", "")
    )
    result = convert({"EVAL.yaml": text})
    assert yaml.safe_load(result.source)["name"] == "agentv-eval"
    assert result.needs_files == [
        "support.instructions.md",
        "refund-judge.md",
        "policy-judge.md",
        "check-policy.ts",
        "order.txt",
    ]
    assert has(result.unmapped, "refund_quality", "refund-judge.md was not uploaded")


def test_agentv_question_is_the_last_user_turn_and_input_messages_the_role_transcript():
    """Seed 004: {{question}} is what the model answers (the last user turn, not the first), and the judge
    sees the conversation in `[Role]:` form."""
    v2 = """\
$schema: agentv-eval-v2
evalcases:
  - id: follow-up
    outcome: Explains the IndexError.
    input_messages:
      - {role: system, content: You are a debugging expert.}
      - {role: user, content: I have a bug in my code.}
      - {role: assistant, content: Can you share the code?}
      - {role: user, content: "Here it is: items[len(items)]"}
    evaluators:
      - name: judge
        type: llm_judge
        prompt: |
          Question: {{question}}
          Conversation:
          {{input_messages}}
"""
    result = convert({"bug.yaml": v2})
    criteria = load_suite(result.source).evals[0].checks[0].llm_judge.criteria
    assert criteria.startswith("Question: Here it is: items[len(items)]\n")
    assert "I have a bug in my code.\n\nConversation" not in criteria
    assert (
        "[System]:\nYou are a debugging expert.\n\n[User]:\nI have a bug in my code.\n\n"
        "[Assistant]:\nCan you share the code?\n\n[User]:\nHere it is: items[len(items)]"
    ) in criteria


def test_agentv_messages_with_no_content_are_left_out_not_sent():
    v2 = """\
evalcases:
  - id: tools
    outcome: Answers.
    input_messages:
      - {role: user, content: Weather?}
      - {role: assistant, content: null, tool_calls: [{name: weather}]}
      - {role: user, content: "   "}
      - {role: user, content: And tomorrow?}
"""
    result = convert({"t.yaml": v2})
    suite = load_suite(result.source)
    assert [m.content for m in suite.evals[0].messages] == ["Weather?", "And tomorrow?"]
    assert has(result.unmapped, "messages with no content", "left out", "tools")


# --- attached files of the same name from different folders --------------------------------------------------

AGENTV_TWO_NOTES = """\
tests:
  - id: both
    criteria: compares the notes
    input:
      - role: user
        content:
          - {type: file, value: a/notes.md}
          - {type: file, value: b/notes.md}
          - {type: text, value: Compare them.}
"""


def test_agentv_files_of_one_name_in_two_folders_are_both_attached_and_referred_to():
    from engine.imports import convert_all

    given = {"evals/e.eval.yaml": AGENTV_TWO_NOTES, "evals/a/notes.md": "first", "evals/b/notes.md": "second"}
    result = convert_all(given).results[0]
    assert result.files == {"notes.md": "first", "notes-2.md": "second"}
    suite = load_suite(result.source, files=result.files)
    parts = suite.evals[0].messages[0].content
    assert [part.value for part in parts[:2]] == ["notes.md", "notes-2.md"]
