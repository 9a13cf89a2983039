"""User patterns run with a time limit over a bounded text, and are bounded when a suite loads.

A pattern that backtracks catastrophically must fail its own check, grade or condition with "regex took
too long" (naming the pattern) and let the conversation go on, wherever a suite's pattern runs: checks,
globs, extractors, graders, stop conditions and the mock endpoint's rules. The timeout marker is the
assertion that it finishes: under plain `re` each of these runs for days.

Run without Django: ``python -m pytest tests/engine/test_engine_patterns.py -q -p no:django``.
"""

from __future__ import annotations

import re

import pytest
import yaml

from engine import patterns
from engine.checks import JudgeContext, Reply, evaluate
from engine.clients import Completion, EndpointError, MockClient
from engine.conditions import holds
from engine.conversation import EngineContext, run_eval
from engine.grading import grade
from engine.judge import parse_verdict
from engine.loader import load_suite
from engine.results import Usage
from engine.schema import Check, Condition, Eval, MockSpec
from engine.source import SuiteError

EVIL = "a" * 40 + "!"
CATASTROPHIC = "(a|a)*$"  # 2^40 paths on EVIL; `regex` optimises the issue's own (a+)+$, not this one


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch):
    monkeypatch.setattr(patterns, "TIMEOUT_SECONDS", 0.2)


class Scripted:
    label = "scripted"
    is_mock = False

    def __init__(self, replies=()):
        self.replies = list(replies)

    def complete(self, model, messages, *, temperature=None):
        return Completion(
            text=self.replies.pop(0), usage=Usage(prompt_tokens=5, completion_tokens=5), cost=0, latency_ms=1
        )

    def embed(self, model, texts):
        raise AssertionError("no embeddings expected")


def judge() -> JudgeContext:
    return JudgeContext(Scripted(), "judge-m")


def reply(text: str) -> Reply:
    return Reply(text=text, completion_tokens=5, conversation=[{"role": "assistant", "content": text}])


def play(ev: dict, replies: list[str]):
    ctx = EngineContext(agent=Scripted(replies), model="m", judge=Scripted(), judge_model="judge-m")
    return run_eval(Eval.model_validate(ev), 0, "e", ctx)


# --- at run time ----------------------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_catastrophic_regex_check_fails_with_regex_took_too_long_naming_the_pattern():
    result = evaluate(Check(regex=CATASTROPHIC), reply(EVIL), judge())
    assert result.passed is False and result.score == 0.0
    assert result.reason.startswith("regex took too long: /(a|a)*$/ ran over 0.2 s on 41 characters")


@pytest.mark.timeout(20)
def test_the_issues_pattern_finishes_and_fails_its_check():
    result = evaluate(Check(regex="(a+)+$"), reply(EVIL), judge())
    assert result.passed is False


@pytest.mark.timeout(20)
def test_a_timed_out_member_of_an_or_fails_alone_and_another_member_can_pass():
    check = Check.model_validate({"or": [{"regex": CATASTROPHIC}, {"contains": "!"}]})
    result = evaluate(check, reply(EVIL), judge())
    assert result.passed is True
    assert "regex took too long" in result.children[0].reason and result.children[1].passed


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["match", "not_match"])
def test_a_backtracking_glob_fails_either_way_with_regex_took_too_long(kind):
    glob = "*a*a*a*a*a*a*a*a*b"  # cubic and worse over a long text with no b
    result = evaluate(Check.model_validate({kind: glob}), reply("a" * 5000), judge())
    assert result.passed is False  # a not_match that could not run does not pass
    assert result.reason.startswith(f'regex took too long: glob "{glob}" ran over 0.2 s')


@pytest.mark.timeout(20)
def test_regex_match_grader_scores_zero_with_regex_took_too_long():
    graded = grade(
        "regex_match", turn=1, submission=EVIL, ground_truth=CATASTROPHIC, threshold=1.0, judge=judge()
    )
    assert graded.score == 0.0 and not graded.passed
    assert graded.rationale.startswith("regex took too long: /(a|a)*$/")


@pytest.mark.timeout(20)
def test_pattern_extractor_that_runs_out_of_time_fails_the_grade_and_the_conversation_finishes():
    result = play(
        {
            "input": "say a lot of a",
            "ground_truth": "aaa",
            "grader": "contains",
            "extractor": {"pattern": f"({CATASTROPHIC})"},
        },
        [EVIL],
    )
    assert result.status == "failed" and result.error is None
    (turn,) = result.turns
    assert turn.grade.passed is False
    assert turn.grade.rationale.startswith("extractor: regex took too long: /((a|a)*$)/")


@pytest.mark.timeout(20)
def test_stop_condition_that_runs_out_of_time_does_not_hold_and_the_conversation_goes_on():
    condition = Condition.model_validate({"regex": CATASTROPHIC})
    met, label = holds(condition, 1, reply(EVIL), judge())
    assert met is False and label == f"regex /{CATASTROPHIC}/"

    ev = {
        "prompt": "Book a table.",
        "simulate": {
            "follow_ups": [{"input": "And for four?"}],
            "max_turns": 2,
            "stop_when": {"regex": CATASTROPHIC},
        },
    }
    result = play(ev, [EVIL, EVIL])
    assert result.error is None and len(result.turns) == 2
    assert result.termination == "max turns (2)"


@pytest.mark.timeout(20)
def test_mock_rule_glob_that_runs_out_of_time_is_an_endpoint_error_for_that_conversation():
    mock = MockClient(spec=MockSpec(rules=[{"when": "*a*a*a*a*a*a*a*a*b", "reply": "no"}]))
    with pytest.raises(EndpointError, match=r'^mock endpoint: regex took too long: glob "\*a\*a'):
        mock.complete("m", [{"role": "user", "content": "a" * 5000}])


@pytest.mark.timeout(20)
def test_a_judge_answer_with_a_long_run_of_spaces_is_read_in_linear_time():
    """Our own score pattern met "5", 2,000 spaces and "x" in 30 s; 100,000 spaces would take days."""
    assert parse_verdict("5" + " " * 100_000 + "x").parsed_from == "unparseable"
    assert parse_verdict("Score: 7 / 10 .").score == 0.7


def test_only_the_first_max_chars_are_searched(monkeypatch):
    monkeypatch.setattr(patterns, "MAX_CHARS", 10)
    assert evaluate(Check(regex="a{10}"), reply("a" * 10 + "b"), judge()).passed
    far = evaluate(Check(regex="b"), reply("a" * 10 + "b"), judge())
    assert far.passed is False and far.reason == "no match found in the first 10 characters"


def test_settings_come_from_the_environment_and_bad_values_say_which_variable(monkeypatch):
    monkeypatch.setenv("EVALSITE_REGEX_TIMEOUT_SECONDS", "0.25")
    assert patterns._env_number("EVALSITE_REGEX_TIMEOUT_SECONDS", 1.0, float) == 0.25
    monkeypatch.setenv("EVALSITE_REGEX_MAX_CHARS", "lots")
    with pytest.raises(ValueError, match="EVALSITE_REGEX_MAX_CHARS must be a number, not 'lots'"):
        patterns._env_number("EVALSITE_REGEX_MAX_CHARS", 1_000_000, int)


# --- at load: a pattern that could not run safely is a located problem ---------------------------------


def only_problem(source: str):
    with pytest.raises(SuiteError) as info:
        load_suite(source)
    (problem,) = info.value.problems
    return problem


def suite(item: str) -> str:
    return yaml.safe_dump({"name": "s", "evals": [{"prompt": "hi", "checks": [yaml.safe_load(item)]}]})


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "pattern, why",
    [
        ("a{4294967296}", "a repeat count is too large"),  # OverflowError in re.compile
        ("a{100000}", "too large: with its repeats unrolled it has over 100,000 elements"),
        ("(?:(?:a|){1000}){1000}", "too large"),  # crashes the `regex` compiler
        ("(?:(?:(?:a{1000}){1000}){1000})", "too large"),  # gigabytes in the `regex` compiler
        ("(" * 150 + "a" + ")" * 150, "groups are nested more than 100 deep"),
        ("(" * 5000 + "a" + ")" * 5000, "groups are nested more than 100 deep"),  # RecursionError
    ],
)
def test_a_check_pattern_that_cannot_run_safely_is_a_located_problem(pattern, why):
    problem = only_problem(suite(yaml.safe_dump({"regex": pattern})))
    assert problem.path == "evals[0].checks[0].regex" and problem.line
    assert problem.message.startswith("invalid regular expression: ") and why in problem.message


def test_an_extractor_pattern_that_cannot_run_safely_is_a_located_problem():
    source = "name: s\nextractor: {pattern: 'a{4294967296}'}\nevals:\n  - {input: hi, ground_truth: x}\n"
    problem = only_problem(source)
    assert problem.line == 2 and "a repeat count is too large" in problem.message


def test_a_regex_match_ground_truth_that_cannot_run_safely_is_a_located_problem():
    source = "name: s\ngrader: regex_match\nevals:\n  - input: hi\n    ground_truth: 'x{4294967296}'\n"
    problem = only_problem(source)
    assert problem.path == "evals[0].ground_truth" and problem.line == 5
    assert "is not a valid regular expression for regex_match: a repeat count is too large" in problem.message


def test_ordinary_patterns_still_load_with_their_groups():
    loaded = load_suite(
        "name: s\nextractor: {pattern: 'Answer: (?P<n>\\d{1,5})(?=\\.)', group: n}\n"
        "evals:\n  - {input: hi, ground_truth: x}\n  - prompt: hi\n    checks: [{regex: '(?i)^(?!.*sorry)\\w{3}'}]\n"
    )
    assert len(loaded.evals) == 2


@pytest.mark.parametrize(
    "pattern",
    ["*done*", "done*", "*done", "done", "*", "", "**x**", "*DONE*", "*a b*", "*?*", "d?ne", "*d*e*", "[1]*"],
)
@pytest.mark.parametrize(
    "text",
    [
        "done",
        "Done.",
        "not done yet",
        "DONE",
        "",
        "x",
        "a b",
        "a\nb done\n",
        "[1] item",
        "donE!",
        "Straße done",
    ],
)
def test_plain_globs_match_exactly_as_the_regex_does(pattern, text):
    """glob_match answers the common globs without a regex: the same answer as the time-limited regex."""
    from engine.matching import _glob_regex, glob_match

    by_regex = patterns.search(_glob_regex(pattern), text, re.IGNORECASE | re.DOTALL) is not None
    assert glob_match(pattern, text) is by_regex
