"""Scripted turns (Letta Evals' multi-turn rows; AgentV `turns`): live inputs, per-turn grading, graders, extractors,
thresholds, aggregation, on_turn_failure, suite gates and resuming.

Everything goes through engine.conversation.run_eval (or engine.runner.run_suite on the built-in mock) with
an in-test scripted ChatClient that records the messages of every call. No Django, no patching.
"""

from __future__ import annotations

import re

import pytest

from engine.clients import EndpointConfig, EndpointError, EndpointRegistry
from engine.conversation import Defaults, EngineContext, ResumeMismatch, run_eval
from engine.grading import extract, grade
from engine.loader import load_suite
from engine.results import EvalResult, evaluate_gates, gated_status, percentile
from engine.runner import run_suite
from engine.schema import Eval, Extractor, Gate
from engine.source import SuiteError
from tests.engine.doubles import TURN_USAGE, ScriptedClient, make_eval

SYSTEM = "You are a geography tutor."
CAPITALS = [
    "What is the capital of France?",
    "What is the capital of Germany?",
    "What is the capital of Italy?",
]


def play(ev: Eval, replies, *, judge=None, defaults=None, system=SYSTEM, **kwargs):
    agent = ScriptedClient(replies)
    ctx = EngineContext(
        agent=agent,
        model="model-under-test",
        judge=judge or ScriptedClient([]),
        judge_model="judge-m",
        system=system,
        defaults=defaults or Defaults(),
    )
    return run_eval(ev, 0, "eval-1", ctx, **kwargs), agent


def problems_of(source: str, files=None) -> list:
    with pytest.raises(SuiteError) as info:
        load_suite(source, files=files)
    return info.value.problems


PER_TURN = make_eval(
    """
input:
  - What is the capital of France?
  - What is the capital of Germany?
  - What is the capital of Italy?
ground_truth: [Paris, Berlin, Rome]
grader: contains
"""
)


# --- live inputs ----------------------------------------------------------------------------------------


def test_every_input_is_sent_live_in_order_in_one_conversation():
    """Each call carries the system prompt, every earlier input and reply, then the next input."""
    result, agent = play(PER_TURN, ["Paris.", "Berlin.", "Rome."])
    assert len(agent.messages) == 3
    assert agent.messages[2] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": CAPITALS[0]},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": CAPITALS[1]},
        {"role": "assistant", "content": "Berlin."},
        {"role": "user", "content": CAPITALS[2]},
    ]
    assert [call[-1]["content"] for call in agent.messages] == CAPITALS
    assert [turn.prompt for turn in result.turns] == CAPITALS
    assert [turn.node for turn in result.turns] == [
        "evals[0].input[0]",
        "evals[0].input[1]",
        "evals[0].input[2]",
    ]
    assert (result.conversation, result.kind, result.prompt) == ("scripted", "multi-turn", CAPITALS[0])


def test_single_string_input_is_one_single_turn_conversation():
    """`input: "..."` is one live turn; the result is single-turn."""
    result, agent = play(make_eval("input: Capital of France?\nground_truth: Paris"), ["Paris"])
    assert len(agent.messages) == 1
    assert (result.status, result.kind, result.turns[0].node) == ("passed", "single-turn", "evals[0].input")


# --- per-turn grading -----------------------------------------------------------------------------------


def test_per_turn_grading_grades_each_turn_on_its_own_reply():
    """A ground_truth list grades turn i's reply against item i; score = mean, 2 of 3 turns passed."""
    result, _ = play(PER_TURN, ["The capital of France is paris.", "Berlin!", "Madrid, I think."])
    grades = [g.model_dump() for g in result.per_turn_grades]
    assert [(g["turn"], g["score"], g["submission"], g["ground_truth"]) for g in grades] == [
        (1, 1.0, "The capital of France is paris.", "Paris"),
        (2, 1.0, "Berlin!", "Berlin"),
        (3, 0.0, "Madrid, I think.", "Rome"),
    ]
    assert {"turn", "score", "rationale", "submission", "ground_truth"} <= set(grades[0])
    assert grades[2]["rationale"] == "does not contain 'Rome'"
    assert result.score == pytest.approx(2 / 3)
    assert (result.turns_passed, result.turns_total) == (2, 3)
    assert result.status == "failed"  # default pass_threshold 1.0
    assert result.verdict == "failed: 2/3 passed (score 0.67, needs 1)"
    assert [turn.grade.turn for turn in result.turns] == [1, 2, 3]
    assert [turn.passed for turn in result.turns] == [True, True, False]


def test_per_turn_grading_all_turns_right_passes():
    result, _ = play(PER_TURN, ["Paris", "Berlin", "Rome"])
    assert (result.status, result.score, result.turns_passed, result.turns_total) == ("passed", 1.0, 3, 3)
    assert result.verdict == "passed: 3/3 passed"


def test_pass_threshold_on_the_eval_and_as_suite_default():
    """pass_threshold 0.6 lets 2/3 pass; the suite default applies unless the eval sets its own."""
    replies = ["Paris", "Berlin", "Madrid"]
    lenient = PER_TURN.model_copy(update={"pass_threshold": 0.6})
    assert play(lenient, replies)[0].status == "passed"
    assert play(PER_TURN, replies, defaults=Defaults(pass_threshold=0.6))[0].status == "passed"
    strict = PER_TURN.model_copy(update={"pass_threshold": 0.7})
    result, _ = play(strict, replies, defaults=Defaults(pass_threshold=0.5))
    assert result.status == "failed" and "needs 0.7" in result.verdict


def test_ground_truth_list_of_other_length_is_a_located_error_naming_both_lengths():
    problems = problems_of(
        "name: s\nevals:\n  - id: a\n    input: [one, two, three]\n    ground_truth: [x, y]\n"
    )
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.line, problem.column, problem.path) == (3, 5, "evals[0]")
    assert "`ground_truth` has 2 items but `input` has 3" in problem.message


def test_ground_truth_list_needs_an_input_list():
    problems = problems_of("name: s\nevals:\n  - input: one\n    ground_truth: [x]\n")
    assert "needs an `input` list" in problems[0].message


def test_ground_truth_string_grades_only_the_last_turn():
    """Earlier replies are context; only the last one is compared with a single ground truth."""
    ev = make_eval("input: [a, b, c]\nground_truth: Rome\ngrader: exact_match")
    result, _ = play(ev, ["wrong", "also wrong", "Rome"])
    assert result.status == "passed"
    assert [(g.turn, g.submission) for g in result.per_turn_grades] == [(3, "Rome")]
    assert [turn.grade is not None for turn in result.turns] == [False, False, True]
    assert (result.turns_passed, result.turns_total) == (1, 1)


def test_ground_truth_string_with_first_assistant_reads_the_whole_conversation():
    ev = make_eval("input: [a, b, c]\nground_truth: Paris\nextractor: first_assistant")
    result, _ = play(ev, ["Paris", "Berlin", "Rome"])
    assert result.per_turn_grades[0].submission == "Paris"
    assert result.status == "passed"


def test_ground_truth_string_with_all_assistant_joins_every_live_reply():
    ev = make_eval(
        "input: [a, b, c]\nground_truth: 'Paris | Berlin | Rome'\n"
        "extractor: {all_assistant: {separator: ' | '}}"
    )
    result, _ = play(ev, ["Paris", "Berlin", "Rome"])
    assert result.per_turn_grades[0].submission == "Paris | Berlin | Rome"
    assert result.status == "passed"


def test_conversation_extractor_ignores_the_given_history():
    """first_assistant over a conversation means the first *live* reply, not an assistant message given."""
    ev = make_eval(
        """
messages:
  - {role: user, content: Hi}
  - {role: assistant, content: Given reply}
input: [a, b]
ground_truth: First live
extractor: first_assistant
"""
    )
    result, _ = play(ev, ["First live", "Second live"])
    assert result.per_turn_grades[0].submission == "First live"


def test_per_turn_extractor_runs_on_that_turns_reply_only():
    """all_assistant in per-turn mode sees one reply: a turn is never graded on earlier replies."""
    ev = make_eval("input: [a, b]\nground_truth: [x, y]\nextractor: all_assistant")
    result, _ = play(ev, ["x", "y"])
    assert [g.submission for g in result.per_turn_grades] == ["x", "y"]
    assert result.status == "passed"


def test_grade_and_checks_on_the_same_turn_count_as_one_turn():
    """turns_passed / turns_total counts turns: a turn with a ground truth and checks is one turn."""
    ev = make_eval("input: [a, b]\nground_truth: [x, y]\nchecks: [{max_tokens: 50}]")
    result, _ = play(ev, ["x", "y"])
    assert result.status == "passed"
    assert (result.turns_passed, result.turns_total) == (2, 2)
    single = make_eval("input: a\nground_truth: x\nchecks: [{contains: x}]")
    result, _ = play(single, ["x"])
    assert (result.status, result.turns_passed, result.turns_total) == ("passed", 1, 1)


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


def _judge_eval(rubric: str = "Q: {input}\nExpected: {ground_truth}\nGot: {submission}\nScore 0-1."):
    return Eval(input="Capital of France?", ground_truth="Paris", grader="llm_judge", rubric=rubric)


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


# --- `turns`: checks on chosen turns, aggregation, on_turn_failure ------------------------------------

NAME_MEMORY = make_eval(
    """
turns:
  - input: My name is Alice.
  - input: What is my name?
    checks: [{match: "*Alice*"}]
"""
)


def test_turns_grade_only_the_turns_with_checks():
    result, agent = play(NAME_MEMORY, ["Nice to meet you.", "Your name is Alice."])
    assert len(agent.messages) == 2
    assert agent.messages[1][-3:] == [
        {"role": "user", "content": "My name is Alice."},
        {"role": "assistant", "content": "Nice to meet you."},
        {"role": "user", "content": "What is my name?"},
    ]
    assert [(turn.checks, turn.passed) for turn in result.turns][0] == ([], None)
    assert result.turns[1].checks[0].passed is True
    assert (result.status, result.turns_passed, result.turns_total, result.conversation) == (
        "passed",
        1,
        1,
        "turns",
    )
    assert [turn.node for turn in result.turns] == ["evals[0].turns[0]", "evals[0].turns[1]"]


def test_turn_checks_read_their_own_turns_reply():
    """A check on turn 2 sees turn 2's reply, not the conversation's last one."""
    ev = make_eval(
        """
turns:
  - input: one
  - input: two
    checks: [{contains: TWO}]
  - input: three
"""
    )
    result, _ = play(ev, ["x", "reply TWO", "reply three"])
    assert result.status == "passed"
    result, _ = play(ev, ["TWO", "x", "TWO"])
    assert result.status == "failed"


THREE_CHECKED = """
turns:
  - input: one
    checks: [{contains: A}]
  - input: two
    checks: [{contains: B}]
  - input: three
    checks: [{contains: C}]
"""


@pytest.mark.parametrize(
    ("aggregation", "threshold", "score", "status"),
    [
        ("mean", 0.6, 2 / 3, "passed"),
        ("mean", 0.7, 2 / 3, "failed"),
        ("min", 0.1, 0.0, "failed"),
        ("max", 1.0, 1.0, "passed"),
    ],
)
def test_aggregation_combines_turn_scores(aggregation, threshold, score, status):
    ev = make_eval(THREE_CHECKED + f"aggregation: {aggregation}\npass_threshold: {threshold}\n")
    result, agent = play(ev, ["A", "nope", "C"])
    assert len(agent.messages) == 3  # continue is the default
    assert result.score == pytest.approx(score)
    assert result.status == status
    assert (result.turns_passed, result.turns_total) == (2, 3)


def test_on_turn_failure_stop_ends_the_conversation_and_fails_it():
    ev = make_eval(THREE_CHECKED + "on_turn_failure: stop\naggregation: max\npass_threshold: 0.0\n")
    result, agent = play(ev, ["A", "nope"])
    assert len(agent.messages) == 2
    assert len(result.turns) == 2
    assert result.status == "failed"  # even though max >= 0.0: a stopped conversation is not finished
    assert "stopped after turn 2" in result.verdict


def test_on_turn_failure_continue_plays_every_turn():
    ev = make_eval(THREE_CHECKED + "on_turn_failure: continue\n")
    result, agent = play(ev, ["nope", "nope", "C"])
    assert len(agent.messages) == 3
    assert "stopped" not in result.verdict


def test_turn_score_is_the_mean_of_its_checks():
    ev = make_eval(
        "turns:\n  - input: one\n    checks: [{contains: A}, {contains: B}]\npass_threshold: 0.5\n"
    )
    result, _ = play(ev, ["only A"])
    assert result.score == 0.5
    assert result.status == "passed"
    assert (result.turns_passed, result.turns_total) == (0, 1)


def test_passing_judge_checks_pass_the_conversation():
    """A check that passes its own threshold counts in full: a judge's 0.9 (threshold 0.5) must not fail
    a conversation whose every check passed against the default pass_threshold of 1.0."""
    ev = make_eval(
        """
turns:
  - input: Hello
  - input: Tell me a joke.
    checks: [{llm_judge: {criteria: Is a joke}}, {match: "*chicken*"}]
"""
    )
    judge = ScriptedClient(['{"score": 0.9, "reason": "A pun."}'])
    result, _ = play(ev, ["Hi", "Why did the chicken..."], judge=judge)
    assert result.turns[1].checks[0].passed is True
    assert (result.status, result.score) == ("passed", 1.0)


def test_a_failed_judge_check_keeps_partial_credit():
    ev = make_eval(
        "turns:\n  - input: Tell me a joke.\n    checks: [{llm_judge: {criteria: Is a joke, threshold: 0.5}}]\n"
        "pass_threshold: 0.3\n"
    )
    judge = ScriptedClient(['{"score": 0.4, "reason": "Barely."}'])
    result, _ = play(ev, ["Knock knock."], judge=judge)
    assert result.turns[0].checks[0].passed is False
    assert (result.status, result.score, result.turns_passed) == ("passed", 0.4, 0)


def test_eval_checks_on_turns_grade_the_last_reply():
    ev = make_eval(
        "turns:\n  - input: one\n    checks: [{contains: A}]\n  - input: two\nchecks: [{contains: Z}]\n"
    )
    result, _ = play(ev, ["A", "Z"])
    assert [len(turn.checks) for turn in result.turns] == [1, 1]
    assert result.status == "passed"
    result, _ = play(ev, ["A", "no"])
    assert result.status == "failed"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("input: a\nground_truth: b\naggregation: min", "apply to `turns` conversations"),
        ("input: a\nground_truth: b\non_turn_failure: stop", "apply to `turns` conversations"),
        ("turns: [{input: a}]", "no turn has checks"),
        ("turns: []", "`turns` needs at least one turn"),
        ("turns: [{input: a, checks: [{contains: x}]}]\nground_truth: x", "give `turns` their own checks"),
        (
            "turns: [{input: a, checks: [{contains: x, prompt: again, checks: [{contains: x}]}]}]",
            "follow-ups (prompt + checks) belong to `prompt` conversations only",
        ),
        ("input: []\nchecks: [{contains: x}]", "`input` needs at least one message"),
        ("input: a", "nothing grades this conversation"),
        ("input: a\nprompt: b\nchecks: [{contains: x}]", "use one of prompt, input, turns or reply"),
        ("input: a\nground_truth: b\naggregation: median", "Input should be"),
    ],
)
def test_scripted_validation_errors(body, needle):
    indented = "\n".join("    " + line for line in body.splitlines()).replace("    ", "  - ", 1)
    problems = problems_of(f"name: s\nevals:\n{indented}\n")
    assert any(needle in problem.message for problem in problems), problems
    assert all(problem.path.startswith("evals[0]") and problem.line >= 3 for problem in problems)


# --- gates ----------------------------------------------------------------------------------------------


def result_of(status: str, score: float | None) -> EvalResult:
    return EvalResult(index=0, id="e", kind="single-turn", prompt="p", status=status, score=score, verdict="")


# scores 1.0, 0.5, 0.0, 0.75 (3 finished + 1 failed), plus an error with no score
EVALS = [
    result_of("passed", 1.0),
    result_of("failed", 0.5),
    result_of("failed", 0.0),
    result_of("passed", 0.75),
    result_of("error", None),
]


def test_gate_metrics_hand_computed():
    gates = [Gate(metric=metric, op=">=", value=0) for metric in ("avg", "min", "accuracy", "p95")]
    actual = {gate.metric: gate.actual for gate in evaluate_gates(gates, EVALS)}
    assert actual["avg"] == pytest.approx((1.0 + 0.5 + 0.0 + 0.75) / 4)  # 0.5625; the error has no score
    assert actual["min"] == 0.0
    assert actual["accuracy"] == pytest.approx(2 / 4)  # passed / (passed + failed); errors left out
    # sorted [0, .5, .75, 1]: rank (4-1)*0.95 = 2.85 -> 0.75 + 0.85 * (1 - 0.75)
    assert actual["p95"] == pytest.approx(0.9625)
    assert percentile([0.0, 1.0], 0.95) == pytest.approx(0.95)
    assert percentile([0.3], 0.95) == 0.3


@pytest.mark.parametrize(
    ("op", "value", "passed"),
    [
        (">=", 0.5625, True),
        (">=", 0.57, False),
        (">", 0.5625, False),
        (">", 0.56, True),
        ("<=", 0.5625, True),
        ("<=", 0.56, False),
        ("<", 0.5625, False),
        ("<", 0.6, True),
        ("==", 0.5625, True),
        ("==", 0.5, False),
    ],
)
def test_gate_operators(op, value, passed):
    (gate,) = evaluate_gates([Gate(metric="avg", op=op, value=value)], EVALS)
    assert gate.passed is passed
    assert gate.label == f"avg {op} {value:g}"


def test_gate_with_no_scored_eval_fails_with_no_actual():
    (gate,) = evaluate_gates([Gate(metric="avg", value=0.0)], [result_of("error", None)])
    assert (gate.actual, gate.passed) == (None, False)
    (gate,) = evaluate_gates([Gate(metric="accuracy", value=0.0)], [result_of("error", None)])
    assert (gate.actual, gate.passed) == (None, False)


def test_gated_status_gates_decide_but_errors_still_win():
    passing = evaluate_gates([Gate(metric="avg", op=">=", value=0.5)], EVALS[:4])
    failing = evaluate_gates([Gate(metric="min", op=">", value=0.0)], EVALS[:4])
    assert gated_status(EVALS[:4], passing) == "passed"  # two evals failed, the gate holds
    assert gated_status(EVALS[:4], failing) == "failed"
    assert gated_status(EVALS, passing) == "error"  # an eval errored: its result is unknown
    all_passed = [result_of("passed", 1.0), result_of("passed", 0.6)]
    assert gated_status(all_passed, evaluate_gates([Gate(metric="avg", value=0.9)], all_passed)) == "failed"
    assert gated_status(EVALS[:4], []) == "failed"  # no gates: any failure fails the run
    assert gated_status([result_of("cancelled", None), *all_passed], passing) == "cancelled"


def test_gate_validation():
    problems = problems_of(
        "name: s\ngates:\n  - {metric: median, value: 1}\nevals:\n  - input: a\n    ground_truth: b\n"
    )
    assert problems[0].path == "gates[0].metric"
    problems = problems_of(
        "name: s\ngates:\n  - {metric: avg, op: '=>', value: 1}\nevals:\n  - input: a\n    ground_truth: b\n"
    )
    assert problems[0].path == "gates[0].op"
    problems = problems_of("name: s\ngates:\n  - {metric: avg}\nevals:\n  - input: a\n    ground_truth: b\n")
    assert problems[0].message == "`value` is required"


GATED_SUITE = """
name: gated
model: mock
grader: contains
gates:
  - {metric: avg, op: ">=", value: 0.6}
  - {metric: accuracy, op: ">=", value: 0.5}
mock:
  rules:
    - {when: "*France*", reply: Paris}
    - {when: "*Germany*", reply: Berlin}
    - {when: "*Italy*", reply: Madrid}
evals:
  - id: europe
    input: [France?, Germany?, Italy?]
    ground_truth: [Paris, Berlin, Rome]
  - id: france
    input: France?
    ground_truth: Paris
"""


def test_run_suite_gates_decide_the_report_status():
    """In-process run on the mock: one eval fails (2/3), the gates (avg 0.83, accuracy 0.5) pass the run."""
    registry = EndpointRegistry(EndpointConfig(name="default", base_url="http://127.0.0.1:9/v1"))
    report = run_suite(load_suite(GATED_SUITE), registry)
    by_id = {result.id: result for result in report.evals}
    assert (by_id["europe"].status, by_id["europe"].score) == ("failed", pytest.approx(2 / 3))
    assert [g.submission for g in by_id["europe"].per_turn_grades] == ["Paris", "Berlin", "Madrid"]
    assert by_id["france"].status == "passed"
    assert [(g.label, g.passed) for g in report.gates] == [("avg >= 0.6", True), ("accuracy >= 0.5", True)]
    assert report.gates[0].actual == pytest.approx((2 / 3 + 1) / 2)
    assert report.status == "passed"
    stricter = run_suite(load_suite(GATED_SUITE.replace("value: 0.6", "value: 0.9")), registry)
    assert stricter.status == "failed"
    assert [g.passed for g in stricter.gates] == [False, True]


# --- resume ---------------------------------------------------------------------------------------------


def test_resume_scripted_replays_stored_turns_without_calling_the_model():
    full, _ = play(PER_TURN, ["Paris", "Berlin", "Madrid"])
    replayed, agent = play(PER_TURN, [], prior=full.turns)
    assert agent.messages == []
    assert replayed.model_dump() == full.model_dump()

    resumed, agent = play(PER_TURN, ["Rome"], prior=full.turns[:2])
    assert len(agent.messages) == 1
    assert agent.messages[0][1:] == [
        {"role": "user", "content": CAPITALS[0]},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": CAPITALS[1]},
        {"role": "assistant", "content": "Berlin"},
        {"role": "user", "content": CAPITALS[2]},
    ]
    assert (resumed.status, resumed.turns_passed, [t.turn for t in resumed.turns]) == ("passed", 3, [1, 2, 3])


def test_resume_does_not_call_the_judge_for_stored_turns():
    judge = ScriptedClient(['{"score": 1, "reason": "ok"}'])
    full, _ = play(_judge_eval(), ["Paris"], judge=judge)
    idle_judge = ScriptedClient([])
    replayed, agent = play(_judge_eval(), [], judge=idle_judge, prior=full.turns)
    assert agent.messages == [] and idle_judge.messages == []
    assert replayed.per_turn_grades == full.per_turn_grades


def test_resume_turns_with_stop_stays_stopped():
    ev = make_eval(THREE_CHECKED + "on_turn_failure: stop\n")
    full, _ = play(ev, ["A", "nope"])
    replayed, agent = play(ev, [], prior=full.turns)
    assert agent.messages == []
    assert replayed.verdict == full.verdict


def test_resume_refuses_turns_from_another_script():
    full, _ = play(PER_TURN, ["Paris", "Berlin", "Rome"])
    other = PER_TURN.model_copy(update={"input": ["Capital of Spain?", *CAPITALS[1:]]})
    with pytest.raises(ResumeMismatch, match=re.escape("stored turn 1 was")):
        play(other, [], prior=full.turns)


def test_llm_judge_input_is_the_turns_input_or_every_live_input():
    """Per turn, {input} is that turn's message; for one grade of the conversation, every live input."""
    rubric = "INPUT<{input}> TRUTH<{ground_truth}> GOT<{submission}>"
    per_turn = Eval(input=["First?", "Second?"], ground_truth=["a", "b"], grader="llm_judge", rubric=rubric)
    judge = ScriptedClient(['{"score": 1}', '{"score": 1}'])
    play(per_turn, ["ra", "rb"], judge=judge)
    assert "INPUT<Second?> TRUTH<b> GOT<rb>" in judge.messages[1][-1]["content"]
    whole = Eval(
        input=["First?", "Second?"],
        ground_truth="ab",
        grader="llm_judge",
        rubric=rubric,
        extractor="all_assistant",
    )
    judge = ScriptedClient(['{"score": 1}'])
    play(whole, ["ra", "rb"], judge=judge)
    assert "INPUT<First?\nSecond?> TRUTH<ab> GOT<ra\nrb>" in judge.messages[0][-1]["content"]


def test_judge_scores_on_other_scales_are_read_as_0_to_1():
    judge = ScriptedClient(['{"score": 8, "reason": "Good."}'])
    result, _ = play(_judge_eval().model_copy(update={"pass_threshold": 0.8}), ["Paris"], judge=judge)
    assert (result.score, result.status) == (0.8, "passed")


DEFAULTS_SUITE = """
name: defaults
model: mock
grader: contains
extractor: {after_marker: "ANSWER:"}
pass_threshold: 0.5
mock:
  rules:
    - {when: "*one*", reply: "thinking about Rome... ANSWER: Paris"}
    - {when: "*two*", reply: "ANSWER: Lyon"}
evals:
  - id: defaults
    input: [one, two]
    ground_truth: [paris, berlin]
  - id: own-threshold
    input: [one, two]
    ground_truth: [paris, berlin]
    pass_threshold: 1.0
"""


def test_suite_level_grader_extractor_and_threshold_reach_every_eval():
    registry = EndpointRegistry(EndpointConfig(name="default", base_url="http://127.0.0.1:9/v1"))
    report = run_suite(load_suite(DEFAULTS_SUITE), registry)
    defaults, own = report.evals
    assert [g.submission for g in defaults.per_turn_grades] == ["Paris", "Lyon"]  # after the marker
    assert [g.passed for g in defaults.per_turn_grades] == [True, False]  # contains, case-insensitive
    assert (defaults.status, defaults.score) == ("passed", 0.5)  # suite pass_threshold 0.5
    assert own.status == "failed"
    assert report.status == "failed"


def test_judge_endpoint_failure_makes_the_conversation_an_error_not_a_failure():
    class BrokenJudge(ScriptedClient):
        def complete(self, model, messages, *, temperature=None):
            raise EndpointError("HTTP 500 from judge: boom")

    result, agent = play(_judge_eval(), ["Paris"], judge=BrokenJudge([]))
    assert len(agent.messages) == 1
    assert (result.status, result.score, result.error) == ("error", None, "HTTP 500 from judge: boom")
    assert result.verdict == "error on turn 1: HTTP 500 from judge: boom"
