"""Scripted turns (Letta Evals' multi-turn rows; AgentV `turns`): live inputs, per-turn grading, thresholds,
suite defaults and resuming. The graders and extractors, turns with their own checks and suite gates have files of their own.

Everything goes through engine.conversation.run_eval (or engine.runner.run_suite on the built-in mock) with
an in-test scripted ChatClient that records the messages of every call. No Django, no patching.
"""

from __future__ import annotations

import re

import pytest

from engine.clients import EndpointConfig, EndpointError, EndpointRegistry
from engine.conversation import Defaults, ResumeMismatch
from engine.loader import load_suite
from engine.runner import run_suite
from engine.schema import Eval
from tests.engine.doubles import ScriptedClient, make_eval
from tests.engine.scripted_play import (
    CAPITALS,
    PER_TURN,
    SYSTEM,
    THREE_CHECKED,
    _judge_eval,
    play,
    problems_of,
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
    assert result.verdict == "2 of 3 turns passed, score 0.67 < 1.00"
    assert [turn.grade.turn for turn in result.turns] == [1, 2, 3]
    assert [turn.passed for turn in result.turns] == [True, True, False]


def test_per_turn_grading_all_turns_right_passes():
    result, _ = play(PER_TURN, ["Paris", "Berlin", "Rome"])
    assert (result.status, result.score, result.turns_passed, result.turns_total) == ("passed", 1.0, 3, 3)
    assert result.verdict == "every turn passed: 3 of 3"


def test_pass_threshold_on_the_eval_and_as_suite_default():
    """pass_threshold 0.6 lets 2/3 pass; the suite default applies unless the eval sets its own."""
    replies = ["Paris", "Berlin", "Madrid"]
    lenient = PER_TURN.model_copy(update={"pass_threshold": 0.6})
    assert play(lenient, replies)[0].status == "passed"
    assert play(PER_TURN, replies, defaults=Defaults(pass_threshold=0.6))[0].status == "passed"
    strict = PER_TURN.model_copy(update={"pass_threshold": 0.7})
    result, _ = play(strict, replies, defaults=Defaults(pass_threshold=0.5))
    assert result.status == "failed" and result.verdict == "2 of 3 turns passed, score 0.67 < 0.70"


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
