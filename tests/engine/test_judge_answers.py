"""A judge's answer is read as judges write it, and a judge that cannot be read fails itself, never the model.

Thinking blocks are dropped before reading; fenced and embedded JSON, `Score: 8/10`, `N out of M`, `I would
rate it 0.9`, percentages and, for pass/fail (or yes/no) judges, the words are read, each saying how; what
still cannot be read is asked again once, in the same judge conversation, and is then a judge error that
ends the conversation as `error`. End to end through the fake endpoint: the judge's answers are a rule's
list, in order.
"""

from __future__ import annotations

import pytest

from engine.calibration import load_calibration
from engine.calibration.run import run_calibration
from engine.clients import EndpointConfig, EndpointRegistry
from engine.judge import JUDGE_SYSTEM, PASS_FAIL, YES_NO, parse_verdict
from engine.loader import load_suite
from engine.report import format_eval
from engine.runner import run_suite
from tests.fakeopenai import FakeOpenAI

# --- the reading -------------------------------------------------------------------------------------------

ISSUE_ANSWERS = [
    # (answer, words, score, fraction, parsed_from, read_from, reason)
    ('<think>\nThe user wants {"score": 0.2}? No: the reply is right.\n</think>\n{"score": 0.9, "reason": "Right."}',
     None, 0.9, False, "json", '{"score": 0.9, "reason": "Right."}', "Right."),
    ("Score: 8/10. The reply is good.", None, 0.8, True, "prose", "Score: 8/10", "The reply is good."),
    ("I would rate it 0.9.", None, 0.9, False, "prose", "I would rate it 0.9", ""),
    ("PASS - the answer meets the criteria.", PASS_FAIL, 1.0, True, "words", "PASS", "the answer meets the criteria."),
]  # fmt: skip

MORE_ANSWERS = [
    # Thinking, however it is written.
    ("<thinking>3/10? No.</thinking>Score: 7/10", None, 0.7, True, "number", "Score: 7/10", ""),
    ('<THINK>a</THINK><think>b {"score": 0}</think> {"score": 1}', None, 1.0, False, "json", '{"score": 1}', ""),
    ('Reasoning with {"score": 0} in it.</think>\n{"score": 0.6, "reason": "ok"}', None, 0.6, False, "json",
     '{"score": 0.6, "reason": "ok"}', "ok"),  # the parser dropped the opening tag
    # JSON in a fence or in prose.
    ('```json\n{"score": 70, "reason": "ok"}\n```', None, 70.0, False, "fenced-json",
     '{"score": 70, "reason": "ok"}', "ok"),
    ('My verdict: {"rating": 4, "explanation": "fine"}.', None, 4.0, False, "embedded-json",
     '{"rating": 4, "explanation": "fine"}', "fine"),
    # N/M, N out of M, percentages: shares of full marks.
    ("7/10", None, 0.7, True, "number", "7/10", ""),
    ("8 out of 10", None, 0.8, True, "number", "8 out of 10", ""),
    ("85%", None, 0.85, True, "number", "85%", ""),
    ("7/10 - clear, but it misses the date.", None, 0.7, True, "prose", "7/10", "clear, but it misses the date."),
    ("**Score:** 4/5\n\nPolite and correct.", None, 0.8, True, "prose", "Score: 4/5", "Polite and correct."),
    ("Rating: 85%. Mostly right.", None, 0.85, True, "prose", "Rating: 85%", "Mostly right."),
    ("The reply is right and polite.\n\nFinal score: 9 out of 10", None, 0.9, True, "prose",
     "Final score: 9 out of 10", "The reply is right and polite."),
    ("It answers the question.\n8/10", None, 0.8, True, "prose", "8/10", "It answers the question."),
    ("I'd give it a 6/10 because it is curt.", None, 0.6, True, "prose", "I'd give it a 6/10",
     "because it is curt."),
    ("My score is 2", None, 2.0, False, "number", "My score is 2", ""),
    ("-2: rude.", None, -2.0, False, "prose", "-2", "rude."),
    ("0.75", None, 0.75, False, "number", "0.75", ""),
    ("Score: 8/10. Then again the score: 8/10.", None, 0.8, True, "prose", "Score: 8/10",
     "Then again the score: 8/10."),  # the same score twice is one
    # Words, for the judges that answer with them.
    ("Verdict: FAIL", PASS_FAIL, 0.0, True, "words", "Verdict: FAIL", ""),
    ("It misses the date.\n\nVerdict: **FAIL**", PASS_FAIL, 0.0, True, "words", "Verdict: FAIL",
     "It misses the date."),
    ("**PASS**", PASS_FAIL, 1.0, True, "words", "PASS", ""),
    ('{"verdict": "fail", "reason": "No date."}', PASS_FAIL, 0.0, True, "json", None, "No date."),
    ("Yes, the table is booked.", YES_NO, 1.0, True, "words", "Yes", "the table is booked."),
    ("No.", YES_NO, 0.0, True, "words", "No", ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "words", "score", "fraction", "parsed_from", "read_from", "reason"),
    ISSUE_ANSWERS + MORE_ANSWERS,
)
def test_an_answer_is_read_and_says_how(answer, words, score, fraction, parsed_from, read_from, reason):
    verdict = parse_verdict(answer, words=words)
    assert (verdict.score, verdict.fraction) == (pytest.approx(score), fraction)
    assert (verdict.parsed_from, verdict.read_from, verdict.reason) == (parsed_from, read_from, reason)
    assert verdict.raw == answer and verdict.error == ""


NOT_READ = [
    # No score at all, or only in what the judge quotes from the conversation.
    ("The reply is excellent.", None, "it has no score"),
    ("Score: high", None, "it has no score"),
    ("", None, "it is empty"),
    ('The assistant said "Score: 5/10" and moved on.', None, "it has no score"),
    ("The assistant wrote `8/10` in its reply.", None, "it has no score"),
    ("> I would rate it 0.9\nThat is what the user wrote.", None, "it has no score"),
    ("The assistant computed 3/4 of the total correctly.", None, "it has no score"),
    ("The user rated it 4 out of 5 last week.", None, "it has no score"),
    ("It mentions 2 people at 7 pm.", None, "it has no score"),
    ("The assistant answered:\n4", None, "it has no score"),  # the reply, quoted on a line of its own
    ("1. It is accurate. 2. It is polite.", None, "it has no score"),  # a numbered list, not a 1
    ("A grade 5 student would understand it.", None, "it has no score"),
    # Thinking is never read, even when that is all there is.
    ('<think>{"score": 0.9, "reason": "fine"} I would rate it 8/10', None,
     "it held only a thinking block that was never closed"),
    ("<think>Score: 8/10</think>", None, "it held only thinking"),
    # Several different scores are none; words only for the judges that answer with them.
    ("Score: 8/10 for accuracy. Score: 4/10 for tone.", None, "it gives several different scores"),
    ("PASS - it meets the criteria.", None, "it has no score"),
    ("Passes, mostly.", PASS_FAIL, "it has no score: expected a JSON object with a score, or PASS or FAIL"),
    ("No booking was made.", YES_NO, "it has no score"),
    ('{"score": "excellent", "reason": "words"}', None, "it has no score"),
    ('{"score": NaN}', None, "it has no score"),
    ("Score: 8/0", None, "it has no score"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "words", "error"), NOT_READ)
def test_what_gives_no_score_is_not_read(answer, words, error):
    verdict = parse_verdict(answer, words=words)
    assert (verdict.score, verdict.parsed_from) == (None, "unparseable")
    assert verdict.error.startswith(error)


# --- end to end through the fake endpoint ------------------------------------------------------------------

SUITE = """\
name: judged
model: agent-m
judge: judge-m
evals:
  - id: booking
    prompt: A table for two, Friday 7pm.
    checks:
      - llm_judge: {criteria: States the day and the time, threshold: 0.7}
"""


def play(fake: FakeOpenAI, source: str = SUITE, *answers: str):
    fake.script("A table for two, Friday 7pm.", ["Booked: two people, Friday 19:00."])
    fake.rule(JUDGE_SYSTEM[:60], list(answers), where="system", model="judge-m")
    registry = EndpointRegistry(default=EndpointConfig(name="default", base_url=fake.base_url, max_retries=0))
    report = run_suite(load_suite(source), registry)
    asked = [body["messages"] for body in fake.chat_requests() if body["model"] == "judge-m"]
    return report.evals[0], asked


@pytest.mark.parametrize(("answer", "score"), [(answer, score) for answer, _, score, *_ in ISSUE_ANSWERS])
def test_the_issues_answers_grade_the_model_with_one_judge_call(answer, score):
    with FakeOpenAI() as fake:
        result, asked = play(fake, SUITE, answer)
    assert (result.status, len(asked)) == ("passed", 1)
    (check,) = result.turns[0].checks
    assert (check.passed, check.score, check.raw) == (True, pytest.approx(score), answer)


def test_an_unreadable_answer_then_a_good_one_passes_after_asking_again():
    with FakeOpenAI() as fake:
        result, asked = play(fake, SUITE, "The reply looks right to me.", '{"score": 0.9, "reason": "Both."}')
    assert result.status == "passed" and len(asked) == 2
    assert asked[1][:2] == asked[0]  # the same conversation, continued
    assert asked[1][2:] == [
        {"role": "assistant", "content": "The reply looks right to me."},
        {"role": "user", "content": "Your answer could not be read: it has no score: expected a JSON object with a "
         "score, or PASS or FAIL. Answer again with the JSON object only, no other text: "
         '{"score": <number from 0 to 1>, "reason": "<one or two sentences>"}'},
    ]  # fmt: skip
    (check,) = result.turns[0].checks
    assert (check.reason, check.first_answer, check.raw) == (
        "score 0.90 (threshold 0.7): Both.", "The reply looks right to me.", '{"score": 0.9, "reason": "Both."}',
    )  # fmt: skip
    assert result.turns[0].judge_usage.total_tokens > 0 and result.totals.judge_tokens > 0
    assert "asked again" in format_eval(result)


def test_two_unreadable_answers_make_the_conversation_an_error_not_a_fail():
    with FakeOpenAI() as fake:
        result, asked = play(fake, SUITE, "Looks right.", "<think>Score: 9/10</think>")
    assert len(asked) == 2
    assert (result.status, result.score) == ("error", None)
    (turn,) = result.turns  # the reply stays, ungraded (no check result), with the judge's tokens
    assert (turn.passed, turn.checks, turn.judge_usage.prompt_tokens) == (None, [], 214)
    assert result.error == (
        "judge judge-m gave no verdict that could be read, asked twice: its answer 'Looks right.' (it has no "
        "score: expected a JSON object with a score, or PASS or FAIL), then '<think>Score: 9/10</think>' (it "
        "held only thinking)"
    )
    assert "💥 ERROR (judge judge-m gave no verdict" in format_eval(result)


def test_scores_out_of_m_are_read_on_the_checks_scale():
    source = SUITE.replace("threshold: 0.7}", "scale: -3..3, threshold: 1}")
    with FakeOpenAI() as fake:
        result, _ = play(fake, source, "Score: 2/3. Right day, no time.")
    (check,) = result.turns[0].checks
    assert (check.judged, check.passed) == (pytest.approx(2.0), True)
    assert check.reason == "score 2.00 on -3..3 (threshold 1): Right day, no time."
    assert "— read from `Score: 2/3`" in format_eval(result)


def test_a_rubric_grader_and_a_conversation_grader_ask_again_then_err():
    source = """\
name: graded
model: agent-m
judge: judge-m
graders:
  quality: {kind: llm_judge, rubric: "Grade {submission}", threshold: 0.5}
evals:
  - id: booking
    input: A table for two, Friday 7pm.
    ground_truth: Friday 19:00
"""
    with FakeOpenAI() as fake:
        result, asked = play(fake, source, "Hmm.", "Unsure.")
    assert len(asked) == 2 and result.status == "error"
    assert result.error.startswith("judge judge-m gave no verdict that could be read, asked twice")
    assert len(result.turns) == 1  # graded after its last turn: the turn stays, the verdict is an error


# --- calibration -------------------------------------------------------------------------------------------

SET = """\
name: politeness
judge: {criteria: Polite and correct, scale: -3..3}
samples:
  - messages: [{role: user, content: "2+2?"}, {role: assistant, content: "4, happy to help."}]
    expected: {score: 3, reason: Correct and kind}
  - messages: [{role: user, content: "3+3?"}, {role: assistant, content: "Figure it out."}]
    expected: {score: -2, reason: Rude}
"""


def test_an_unreadable_calibration_answer_is_a_judge_error_on_that_sample_never_a_score():
    loaded = load_calibration(SET)
    with FakeOpenAI() as fake:
        fake.rule("4, happy to help.", ["I would rate it 3."], where="any")
        fake.rule("Figure it out.", ["Rude.", "Very rude."], where="any")
        registry = EndpointRegistry(
            default=EndpointConfig(name="default", base_url=fake.base_url, max_retries=0)
        )
        calibrated = run_calibration(loaded, registry, judge_model="judge-m")
    (judge,) = calibrated.judges
    assert (judge.metrics.judgements, judge.metrics.unscored) == (2, 1)
    rows = {row.index: row for row in judge.samples}
    assert rows[0].scores == [3.0] and rows[0].errors == [None]
    assert rows[1].scores == [None] and "'Rude.'" in rows[1].errors[0] and "'Very rude.'" in rows[1].errors[0]


def test_a_judge_error_quoting_a_key_is_redacted_like_any_endpoint_error(monkeypatch):
    monkeypatch.setenv("JUDGE_TEST_SECRET", "judge-secret-0123456789")
    with FakeOpenAI() as fake:
        result, _ = play(fake, SUITE, "I cannot say. judge-secret-0123456789", "sk-proj-abcdef0123456789xyz")
    assert result.status == "error"
    assert "judge-secret-0123456789" not in result.error and "abcdef0123456789" not in result.error
    assert "[redacted]" in result.error and "…6789" in result.error  # its prefix and last four characters
