"""Scripted turns: the graders (exact, contains, regex, rubric judge) and the reply extractors that feed them.

Everything goes through engine.conversation.run_eval with an in-test scripted ChatClient, or a whole suite
through engine.runner.run_suite on the fake OpenAI endpoint (a real HTTP server). No Django, no patching.
"""

from __future__ import annotations

import pytest

from engine.conversation import Defaults
from engine.grading import extract, grade
from engine.loader import load_suite
from engine.schema import Extractor
from tests.engine.doubles import TURN_USAGE, ScriptedClient, make_eval
from tests.engine.import_fixtures import _run_on_fake
from tests.engine.scripted_play import (
    _judge_eval,
    play,
    problems_of,
)

# --- graders --------------------------------------------------------------------------------------------


def _grade(grader: str, submission: str, truth: str, **kwargs):
    return grade(
        grader, turn=1, submission=submission, ground_truth=truth, threshold=1.0, judge=None, **kwargs
    )


def test_exact_match_strips_whitespace_and_is_case_sensitive():
    assert _grade("exact_match", "  Paris\n", "Paris ").score == 1.0
    miss = _grade("exact_match", "paris", "Paris")
    assert (miss.score, miss.passed) == (0.0, False)
    assert miss.rationale == "'paris' is not 'Paris'"
    assert _grade("exact_match", "Paris.", "Paris").score == 0.0


def test_contains_is_case_insensitive():
    assert _grade("contains", "I'd say PARIS, of course", "paris").score == 1.0
    assert _grade("contains", "Lyon", "Paris").score == 0.0


def test_regex_match_uses_the_ground_truth_as_the_pattern():
    assert _grade("regex_match", "The answer is 105.", r"\b105\b").score == 1.0
    assert _grade("regex_match", "The answer is 1050.", r"\b105\b").score == 0.0
    hit = _grade("regex_match", "Order #A-1234 confirmed", r"#[A-Z]-\d{4}")
    assert hit.rationale == r"matches /#[A-Z]-\d{4}/"


def test_regex_match_with_an_invalid_pattern_is_a_validation_error():
    """A ground truth that is not a regex would fail every turn at run time, after paying for the calls."""
    problems = problems_of(
        "name: s\ngrader: regex_match\nevals:\n  - input: a\n    ground_truth: '(unclosed'\n"
    )
    assert "regular expression" in problems[0].message
    problems = problems_of(
        "name: s\nevals:\n  - input: [a, b]\n    ground_truth: [ok, '[z-a]']\n    grader: regex_match\n"
    )
    assert "regular expression" in problems[0].message


def test_llm_judge_grader_fills_the_rubric_and_reads_score_and_rationale():
    judge = ScriptedClient(['{"score": 0.8, "reason": "Right city, terse."}'])
    result, _ = play(_judge_eval().model_copy(update={"pass_threshold": 0.7}), ["Paris"], judge=judge)
    assert len(judge.messages) == 1
    prompt = judge.messages[0][-1]["content"]
    assert "Q: Capital of France?\nExpected: Paris\nGot: Paris\nScore 0-1." in prompt
    # The judge also sees the conversation as the model saw it, system prompt included.
    assert (
        "[System]:\nYou are a geography tutor.\n\n[User]:\nCapital of France?\n\n[Assistant]:\nParis"
        in prompt
    )
    only = result.per_turn_grades[0]
    assert (only.score, only.rationale, only.grader) == (0.8, "Right city, terse.", "llm_judge")
    assert only.raw == '{"score": 0.8, "reason": "Right city, terse."}'
    assert result.status == "passed" and result.score == 0.8
    assert result.turns[0].judge_usage == TURN_USAGE  # what the judge reported for its one call


def test_llm_judge_grader_below_the_threshold_fails():
    judge = ScriptedClient(['{"score": 0.4, "reason": "Vague."}'])
    result, _ = play(_judge_eval(), ["Somewhere in France"], judge=judge)
    assert (result.status, result.score) == ("failed", 0.4)


def test_an_unreadable_rubric_judge_is_asked_again_then_errs_the_conversation_never_fails_it():
    judge = ScriptedClient(["I think it's quite good!", "Quite good, really."])
    result, _ = play(_judge_eval(), ["Paris"], judge=judge)
    assert (result.status, result.per_turn_grades) == ("error", [])
    assert "I think it's quite good!" in result.error and "Quite good, really." in result.error
    assert judge.messages[1][-1]["content"].endswith('no other text: {"score": <0 to 1>, "reason": "..."}')


def test_a_rubric_judge_read_from_prose_after_asking_again_records_both_answers():
    judge = ScriptedClient(["I think it's quite good!", "PASS - it names the capital."])
    result, _ = play(_judge_eval(), ["Paris"], judge=judge)
    only = result.per_turn_grades[0]
    assert (only.score, only.passed, only.rationale) == (1.0, True, "it names the capital.")
    assert (only.raw, only.first_answer) == ("PASS - it names the capital.", "I think it's quite good!")
    assert (only.parsed_from, only.read_from) == ("words", "PASS")


@pytest.mark.parametrize(
    ("rubric", "needle"),
    [
        ("Is {answer} right?", "unknown placeholder {answer}"),
        ("Compare {submission} with {expected}", "unknown placeholder {expected}"),
        ("Positional {} field", "unknown placeholder"),
        ("Unbalanced { brace", "literal braces"),
        ("Padded {submission:>40}", "write {submission} plain"),
        ("Crashing {submission:d}", "write {submission} plain"),
        ("Converted {input!r}", "{input}"),
    ],
)
def test_bad_rubric_is_a_located_validation_error_not_a_run_time_crash(rubric, needle):
    source = (
        f"name: s\nevals:\n  - input: a\n    ground_truth: b\n    grader: llm_judge\n    rubric: '{rubric}'\n"
    )
    problems = problems_of(source)
    assert problems[0].path == "evals[0].rubric"
    assert (problems[0].line, problems[0].column) == (6, 13)
    assert needle in problems[0].message


def test_suite_rubric_is_checked_too():
    problems = problems_of("name: s\nrubric: 'Rate {answer}'\nevals:\n  - input: a\n    ground_truth: b\n")
    assert (problems[0].path, problems[0].line) == ("rubric", 2)


def test_llm_judge_without_a_rubric_is_a_validation_error():
    problems = problems_of("name: s\nevals:\n  - input: a\n    ground_truth: b\n    grader: llm_judge\n")
    assert problems[0].path == "evals[0]"
    assert "grades with llm_judge but has no `rubric`" in problems[0].message


def test_suite_default_grader_applies_and_the_eval_can_override_it():
    ev = make_eval("input: a\nground_truth: paris")
    assert play(ev, ["PARIS!"], defaults=Defaults(grader="contains"))[0].status == "passed"
    strict = ev.model_copy(update={"grader": "exact_match"})
    assert play(strict, ["PARIS!"], defaults=Defaults(grader="contains"))[0].status == "failed"
    assert play(ev, ["PARIS!"])[0].status == "failed"  # exact_match when nothing says otherwise


# --- extractors -----------------------------------------------------------------------------------------

REPLIES = ["First: 12", "Second: 34", "Answer: 56 FINAL: fifty-six"]


def ex(spec) -> Extractor:
    return Extractor.model_validate(spec)


def test_reply_extractors():
    assert extract(ex("last_assistant"), REPLIES) == REPLIES[-1]
    assert extract(ex("last_turn"), REPLIES) == REPLIES[-1]
    assert extract(ex("first_assistant"), REPLIES) == "First: 12"
    assert extract(ex("all_assistant"), REPLIES) == "\n".join(REPLIES)
    assert extract(ex({"all_assistant": {"separator": " / "}}), REPLIES[:2]) == "First: 12 / Second: 34"
    assert extract(None, REPLIES) == REPLIES[-1]  # default: last_assistant
    assert extract(ex("first_assistant"), []) == ""


def test_pattern_extractor_group_number_name_and_whole_match():
    assert extract(ex({"pattern": r"Answer: (\d+)", "group": 1}), REPLIES) == "56"
    assert extract(ex({"pattern": r"Answer: (?P<value>\d+)", "group": "value"}), REPLIES) == "56"
    assert extract(ex({"pattern": r"Answer: \d+"}), REPLIES) == "Answer: 56"
    assert extract(ex({"pattern": r"Total: (\d+)", "group": 1}), REPLIES) == ""
    assert extract(ex({"pattern": r"(Total: \d+)?Answer", "group": 1}), REPLIES) == ""  # unmatched group


def test_after_marker_takes_the_text_after_the_last_marker():
    assert extract(ex({"after_marker": "FINAL:"}), REPLIES) == "fifty-six"
    assert extract(ex({"after_marker": "X:"}), ["a X: b X:  c  "]) == "c"
    assert extract(ex({"after_marker": "DONE"}), REPLIES) == ""


def test_json_extractor_follows_a_dot_path_with_list_indexes():
    reply = 'Sure!\n```json\n{"result": {"items": [{"name": "a"}, {"name": "b", "n": 2}]}}\n```'
    assert extract(ex({"json": "result.items.1.name"}), [reply]) == "b"
    assert extract(ex({"json": "result.items.-1.n"}), [reply]) == "2"  # non-strings come back as JSON
    assert extract(ex({"json": "result.items.0"}), [reply]) == '{"name": "a"}'
    assert extract(ex({"json": "result.items.5.name"}), [reply]) == ""
    assert extract(ex({"json": "result.missing"}), [reply]) == ""
    assert extract(ex({"json": "answer"}), ['{"answer": "Paris"}']) == "Paris"
    assert extract(ex({"json": "answer"}), ["not json at all"]) == ""
    assert extract(ex({"json": "0.answer"}), ['[{"answer": "x"}]']) == "x"


def test_json_extractor_in_a_run_missing_path_is_an_empty_submission():
    ev = make_eval("input: [a, b]\nground_truth: [Paris, Rome]\nextractor: {json: city}")
    result, _ = play(ev, ['```json\n{"city": "Paris"}\n```', '{"town": "Rome"}'])
    assert [g.submission for g in result.per_turn_grades] == ["Paris", ""]
    assert [g.passed for g in result.per_turn_grades] == [True, False]


@pytest.mark.parametrize(
    ("extractor", "needle"),
    [
        ("{pattern: '(unclosed'}", "invalid regular expression"),
        ("{pattern: 'a(b)', group: 2}", "group 2 does not exist"),
        ("{pattern: 'a(b)', group: -1}", "group"),
        ("{pattern: 'a(?P<x>b)', group: y}", "no group named 'y'"),
        ("{kind: json}", "needs a dot path"),
        ("{kind: after_marker}", "needs a marker"),
        ("no_such_extractor", "Input should be"),
    ],
)
def test_bad_extractors_are_validation_errors(extractor, needle):
    problems = problems_of(
        f"name: s\nevals:\n  - input: a\n    ground_truth: b\n    extractor: {extractor}\n"
    )
    assert problems[0].path.startswith("evals[0].extractor")
    assert needle in problems[0].message


def test_pattern_extractor_feeds_the_grader():
    ev = make_eval(
        "input: What is 7*8?\nground_truth: '56'\nextractor: {pattern: 'Answer: (\\d+)', group: 1}"
    )
    result, _ = play(ev, ["Let me think. 7*8... Answer: 56."])
    assert (result.status, result.per_turn_grades[0].submission) == ("passed", "56")


# --- the transcript extractor, and check graders that take an extractor -------------------------------------


def test_transcript_extractor_is_every_message_as_role_colon_content_without_tool_rounds():
    """AgentV's transcript of a conversation (what its conversation-level assertions read): the messages'
    texts, each `role: content`, a content that is not text as its JSON; the tool calls and results left out."""
    conversation = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "weather"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "21C"},
        {"role": "assistant", "content": "It is 21C."},
    ]
    assert extract(ex("transcript"), ["It is 21C."], conversation=conversation) == (
        "system: You are a travel agent.\n\n"
        'user: [{"type":"text","text":"Weather in Paris?"}]\n\n'
        "assistant: It is 21C."
    )


TRANSCRIPT_SUITE = """\
name: transcript-checks
extractor: first_assistant
evals:
  - id: support
    messages:
      - {role: system, content: You are ShopFast's support agent.}
    turns:
      - input: I'm Sarah, order 98765 is late.
      - input: Expedite it, please.
    graders:
      whole: {kind: check, check: {contains: "98765"}, extractor: transcript}
      last: {kind: check, check: {contains: "98765"}}
      eta: {kind: check, check: {equals: Thursday}, extractor: {after_marker: "ETA:"}}
    pass_rule: any
"""


def test_a_check_grader_reads_what_its_own_extractor_takes(fake_openai):
    fake_openai.script(
        "I'm Sarah, order 98765 is late.", ["Checking order 98765 now.", "Done. ETA: Thursday"]
    )

    (result,) = _run_on_fake(fake_openai, load_suite(TRANSCRIPT_SUITE)).evals

    graded = {grader.name: grader.grades[0] for grader in result.graders}
    # the whole conversation holds the order number the user gave
    assert graded["whole"].score == 1.0
    assert graded["whole"].submission.startswith(
        "system: You are ShopFast's support agent.\n\nuser: I'm Sarah"
    )
    # without an extractor of its own a check grader reads the last reply, never the suite's default extractor
    # (first_assistant would hold the number)
    assert (graded["last"].score, graded["last"].submission) == (0.0, "Done. ETA: Thursday")
    assert (graded["eta"].score, graded["eta"].submission) == (1.0, "Thursday")
