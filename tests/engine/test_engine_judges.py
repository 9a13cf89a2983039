"""Richer LLM judges: scales 0-1, 0-100 and -3..+3 with their thresholds, several weighted criteria
each with its own verdict, `scope: conversation`, a judge model and temperature per check or the suite's
default, and reading the judge's answer (direct JSON, fenced or embedded object, bare number; else asked
again, then a judge error: tests/engine/test_judge_answers.py has the rest of the reading).

Everything goes through engine.checks.evaluate (or run_eval) with an in-test judge that records its calls.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from engine.checks import JudgeContext, Reply, evaluate
from engine.clients import Completion, EndpointConfig, EndpointRegistry
from engine.conversation import EngineContext, run_eval
from engine.judge import JUDGE_SYSTEM, JudgeError, judge_messages, parse_verdict
from engine.loader import load_suite
from engine.results import Usage
from engine.runner import build_context
from engine.schema import SCALES, Check, Eval, JudgeSpec
from engine.source import SuiteError

JUDGE_USAGE = Usage(prompt_tokens=40, completion_tokens=8)
CONVERSATION = [
    {"role": "system", "content": "You are a booking agent."},
    {"role": "user", "content": "A table for two, Friday 7pm."},
    {"role": "assistant", "content": "Booked: two people, Friday 19:00."},
]


class Judge:
    label = "judge"
    is_mock = False

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def complete(self, model, messages, *, temperature=None):
        self.calls.append({"model": model, "messages": copy.deepcopy(messages), "temperature": temperature})
        if not self.answers:
            raise AssertionError(f"unexpected judge call: {messages[-1]['content'][:100]}")
        return Completion(text=self.answers.pop(0), usage=JUDGE_USAGE, cost=0.002, latency_ms=1)

    def embed(self, model, texts):
        raise AssertionError("no embeddings expected")


def judge_check(spec: dict | str, answers, conversation=CONVERSATION, resolve=None):
    spec = yaml.safe_load(spec) if isinstance(spec, str) else spec
    judge = Judge(answers)
    context = JudgeContext(judge, "suite-judge", resolve)
    text = conversation[-1]["content"]
    result = evaluate(Check.model_validate({"llm_judge": spec}), Reply(text, 5, conversation), context)
    return result, judge, context


# --- reading the answer -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "score", "parsed_from", "fraction"),
    [
        ('{"score": 2, "reason": "Good."}', 2.0, "json", False),  # direct JSON
        ('{"score": -2, "reason": "Bad."}', -2.0, "json", False),
        ('{"score": "85%", "reason": "r"}', 0.85, "json", True),
        ('{"score": false}', 0.0, "json", True),
        ('Here is my verdict:\n```json\n{"score": 70, "reason": "ok"}\n```', 70.0, "fenced-json", False),
        ('I weighed it. {"reason": "fine", "score": -1} That is all.', -1.0, "embedded-json", False),
        ("-3", -3.0, "number", False),  # bare number
        ("85/100", 0.85, "number", True),
        ("Score: 2/3", 2 / 3, "number", True),
        ("42.", 42.0, "number", False),
    ],
)
def test_parse_verdict_fallbacks(text, score, parsed_from, fraction):
    verdict = parse_verdict(text)
    assert (verdict.score, verdict.parsed_from, verdict.fraction) == (
        pytest.approx(score),
        parsed_from,
        fraction,
    )


@pytest.mark.parametrize(
    "text",
    [
        "The reply is excellent.",
        "Score: high",
        '{"score": "excellent", "reason": "words"}',
        '{"score": NaN}',
        '{"verdict": "pass"}',  # PASS is a score on 0-1 only
        "PASS",
        "",
    ],
)
def test_unreadable_answers_are_a_judge_error_never_a_score(text):
    """Even with the lowest possible threshold: never a silent zero that passes, nor one that fails."""
    with pytest.raises(JudgeError) as raised:
        judge_check({"criteria": "Booked", "scale": "-3..3", "threshold": -3}, [text, text])
    assert str(raised.value).startswith(f"judge suite-judge gave no verdict that could be read, asked twice: "
                                        f"its answer {text!r}")  # fmt: skip


# --- scales and thresholds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "threshold", "answer", "passed", "score", "reason"),
    [
        ("0-1", None, '{"score": 0.5, "reason": "Half."}', True, 0.5, "score 0.50 (threshold 0.5): Half."),
        ("0-1", None, '{"score": 0.49, "reason": "r"}', False, 0.49, "score 0.49 (threshold 0.5): r"),
        ("0-1", 0.8, '{"score": 8, "reason": "r"}', True, 0.8,
         "score 0.80 (threshold 0.8): r (judge said 8, read as 0.80)"),
        ("0-100", None, '{"score": 50, "reason": "r"}', True, 0.5, "score 50.00 on 0-100 (threshold 50): r"),
        ("0-100", None, '{"score": 49.5, "reason": "r"}', False, 0.495, None),
        ("0-100", 70, "85/100", True, 0.85, "score 85.00 on 0-100 (threshold 70): no reason given"),
        ("0-100", 70, "17/20", True, 0.85, None),
        ("0-100", 70, '{"score": "85%", "reason": "r"}', True, 0.85, None),
        ("0-100", 70, '{"score": true}', True, 1.0, None),
        ("0-100", 70, '{"score": 150, "reason": "r"}', True, 1.0,
         "score 100.00 on 0-100 (threshold 70): r (judge said 150, outside 0-100)"),
        ("-3..3", None, '{"score": 1, "reason": "r"}', True, 4 / 6, "score 1.00 on -3..3 (threshold 1): r"),
        ("-3..3", None, '{"score": 0, "reason": "Neutral."}', False, 0.5, None),
        ("-3..3", None, '{"score": -3, "reason": "r"}', False, 0.0, None),
        ("-3..3", None, '{"score": 3, "reason": "r"}', True, 1.0, None),
        ("-3..3", -1, '{"score": -1, "reason": "r"}', True, 2 / 6, None),
        ("-3..3", 2, "2/3", True, 5 / 6, None),  # two thirds of full marks on -3..3 is +2
        ("-3..3", 1, "-2", False, 1 / 6, None),
        ("-3..3", 1, '{"score": -7, "reason": "r"}', False, 0.0,
         "score -3.00 on -3..3 (threshold 1): r (judge said -7, outside -3..3)"),
    ],
)  # fmt: skip
def test_scales_thresholds_and_the_stored_0_1_score(scale, threshold, answer, passed, score, reason):
    spec = {"criteria": "Booked correctly", "scale": scale}
    if threshold is not None:
        spec["threshold"] = threshold
    result, _, _ = judge_check(spec, [answer])
    assert result.passed is passed
    assert result.score == pytest.approx(score)  # always 0-1, whatever the scale
    assert result.raw == answer
    if reason is not None:
        assert result.reason == reason


@pytest.mark.parametrize(
    ("scale", "answer", "note"),
    [
        ("0-100", '{"score": 0.8, "reason": "r"}', "0.8 on a 0–100 scale: looks like a 0–1 score"),
        ("-3..3", '{"score": 0.5, "reason": "r"}', "0.5 on a -3..3 scale: looks like a 0–1 score"),
        ("0-100", '{"score": 80, "reason": "r"}', None),
        ("0-100", '{"score": 0, "reason": "r"}', None),
        ("0-100", '{"score": 1, "reason": "r"}', None),
        ("0-100", "4/5", None),  # a share of full marks is read as one: 80
        ("0-1", '{"score": 0.8, "reason": "r"}', None),
    ],
)
def test_a_fraction_on_a_wider_scale_is_scored_as_given_and_flagged(scale, answer, note):
    result, _, _ = judge_check({"criteria": "Booked", "scale": scale}, [answer])
    assert result.scale_note == note
    weighted, _, _ = judge_check(
        {"criteria": [{"criteria": "Booked", "weight": 1}], "scale": scale}, [answer]
    )
    assert weighted.children[0].scale_note == note
    if note:
        assert result.score == pytest.approx(0.008 if scale == "0-100" else 3.5 / 6)


def test_default_thresholds_per_scale():
    assert SCALES == {"0-1": (0.0, 1.0, 0.5), "0-100": (0.0, 100.0, 50.0), "-3..3": (-3.0, 3.0, 1.0)}
    assert [JudgeSpec(criteria="c", scale=s).threshold for s in SCALES] == [0.5, 50.0, 1.0]


@pytest.mark.parametrize(
    ("scale", "threshold"), [("0-1", 1.5), ("0-1", -0.1), ("0-100", 101), ("-3..3", 4), ("-3..3", -3.5)]
)
def test_a_threshold_off_the_scale_is_rejected(scale, threshold):
    with pytest.raises(SuiteError, match=f"threshold {threshold:g} is outside the {scale} scale"):
        load_suite(
            "name: s\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n"
            f"      - llm_judge: {{criteria: c, scale: '{scale}', threshold: {threshold}}}\n"
        )


def test_unknown_scales_and_scopes_are_rejected():
    for bad in ("scale: 0-10", "scale: 5", "scope: turn", "criteria: []", "temperature: 3"):
        with pytest.raises(SuiteError):
            load_suite(
                f"name: s\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - llm_judge: {{criteria: c, {bad}}}\n"
            )


@pytest.mark.parametrize(
    ("scale", "words"),
    [
        ("0-100", "The score is a number from 0 (not met at all) to 100 (fully met)."),
        ("-3..3", "The score is an integer from -3 (the opposite of the criteria) through 0 (neutral) to 3"),
    ],
)
def test_the_judge_is_told_the_scale(scale, words):
    _, judge, _ = judge_check({"criteria": "c", "scale": scale}, ['{"score": 1}'])
    system = judge.calls[0]["messages"][0]["content"]
    assert words in system and "from 0 to 1" not in system and '"score": <score>' in system
    _, judge, _ = judge_check({"criteria": "c"}, ['{"score": 1}'])
    assert judge.calls[0]["messages"][0]["content"] == JUDGE_SYSTEM


# --- weighted criteria ------------------------------------------------------------------------------------


MULTI = """
criteria:
  - {name: accuracy, criteria: States the right day and time, weight: 3}
  - {criteria: Is polite}
"""


def test_each_criterion_is_judged_on_its_own_and_the_score_is_their_weighted_mean():
    answers = ['{"score": 0.9, "reason": "Right day and time."}', '{"score": 0.1, "reason": "Curt."}']
    result, judge, context = judge_check(MULTI, answers)
    # One call per criterion, each carrying only its own criteria text.
    criteria = [call["messages"][1]["content"].split("\n\n")[0] for call in judge.calls]
    assert criteria == ["Criteria:\nStates the right day and time", "Criteria:\nIs polite"]
    assert [(c.type, c.label, c.passed, c.score, c.reason, c.raw) for c in result.children] == [
        ("criterion", "accuracy (weight 3)", True, 0.9, "score 0.90: Right day and time.", answers[0]),
        ("criterion", "criterion 2 (weight 1)", False, 0.1, "score 0.10: Curt.", answers[1]),
    ]
    assert result.score == pytest.approx((3 * 0.9 + 1 * 0.1) / 4)  # 0.7
    assert result.passed  # the overall weighted score decides: 0.7 >= 0.5
    assert result.reason == "weighted score 0.70 (threshold 0.50 of 1) over 2 criteria"
    assert result.label == "llm_judge (2 weighted criteria)"
    assert context.spent == JUDGE_USAGE + JUDGE_USAGE  # every call is charged to the judge


def test_weighted_criteria_fail_below_the_threshold():
    result, _, _ = judge_check(MULTI, ['{"score": 0.3}', '{"score": 1.0}'])
    assert result.score == pytest.approx((0.9 + 1.0) / 4)
    assert not result.passed


def test_weighted_criteria_on_0_100_and_on_minus_3_to_3():
    spec = yaml.safe_load(MULTI) | {"scale": "0-100", "threshold": 60}
    result, _, _ = judge_check(spec, ['{"score": 50}', '{"score": 100}'])
    assert result.score == pytest.approx((3 * 0.5 + 1.0) / 4)  # 0.625 >= 0.6
    assert result.passed and "threshold 0.60 of 1" in result.reason
    assert [c.reason for c in result.children] == ["score 50.00 on 0-100: no reason given",
                                                   "score 100.00 on 0-100: no reason given"]  # fmt: skip
    spec = yaml.safe_load(MULTI) | {"scale": "-3..3"}  # threshold 1, i.e. 4/6 of the way up
    result, _, _ = judge_check(spec, ['{"score": 2}', '{"score": -3}'])
    assert result.score == pytest.approx((3 * 5 / 6 + 0) / 4)  # 0.625 < 0.667
    assert not result.passed
    assert [c.passed for c in result.children] == [True, False]


@pytest.mark.parametrize(
    ("scale", "threshold", "answer"), [("0-100", 70, "70"), ("0-1", 0.7, "0.7"), ("-3..3", 1, "1")]
)
def test_criteria_all_exactly_at_the_threshold_pass(scale, threshold, answer):
    """0.1 * 0.7 + 0.2 * 0.7 over 0.3 is 0.6999999999999997 in floating point: still at the threshold."""
    spec = {
        "criteria": [{"criteria": "a", "weight": 0.1}, {"criteria": "b", "weight": 0.2}],
        "scale": scale,
        "threshold": threshold,
    }
    result, _, _ = judge_check(spec, [answer, answer])
    assert result.passed and all(child.passed for child in result.children)


def test_an_unreadable_criterion_is_asked_again_and_then_a_judge_error_for_the_whole_check():
    answers = ['{"score": 1.0, "reason": "Exact."}', "Very polite indeed!", "Truly polite!"]
    with pytest.raises(JudgeError, match="'Very polite indeed!'"):
        judge_check(MULTI, answers)
    answers = ['{"score": 1.0, "reason": "Exact."}', "Very polite indeed!", "Score: 3/10. Curt."]
    result, judge, _ = judge_check(MULTI, answers)
    assert len(judge.calls) == 3 and result.score == pytest.approx(0.825)
    child = result.children[1]
    assert (child.raw, child.first_answer, child.read_from) == ("Score: 3/10. Curt.", "Very polite indeed!",
                                                                "Score: 3/10")  # fmt: skip


# --- scope ------------------------------------------------------------------------------------------------


LONG = [
    {"role": "system", "content": "You are a booking agent."},
    {"role": "user", "content": "A table for two."},
    {"role": "assistant", "content": "Which day?"},
    {"role": "user", "content": "Friday 7pm."},
    {"role": "assistant", "content": "Booked."},
]
TRANSCRIPT = (
    "[System]:\nYou are a booking agent.\n\n[User]:\nA table for two.\n\n[Assistant]:\nWhich day?\n\n"
    "[User]:\nFriday 7pm.\n\n[Assistant]:\nBooked."
)


def test_scope_conversation_grades_the_whole_conversation_in_role_format():
    _, judge, _ = judge_check({"criteria": "Got day and party size", "scope": "conversation"},
                              ['{"score": 1}'], LONG)  # fmt: skip
    system, user = judge.calls[0]["messages"]
    assert user["content"] == (
        f"Criteria:\nGot day and party size\n\nConversation:\n{TRANSCRIPT}\n\n"
        "Grade the whole conversation against the criteria. Respond with the JSON object only."
    )
    assert system["content"].startswith("You are a strict evaluation judge. You grade a whole conversation ")
    assert "final reply" not in system["content"]


def test_scope_reply_is_the_default_and_grades_the_final_reply():
    _, judge, _ = judge_check({"criteria": "Says booked"}, ['{"score": 1}'], LONG)
    system, user = judge.calls[0]["messages"]
    assert system["content"] == JUDGE_SYSTEM
    assert user["content"].endswith(
        f"{TRANSCRIPT}\n\nGrade the assistant's final reply against the criteria. Respond with the JSON object only."
    )
    assert judge_messages("Says booked", LONG) == judge.calls[0]["messages"]


def test_scope_conversation_over_a_run_sees_every_turn():
    ev = Eval.model_validate(
        yaml.safe_load(
            """
turns:
  - input: A table for two.
  - input: Friday 7pm.
checks:
  - llm_judge: {criteria: Asked for the day, scope: conversation, scale: "0-100", threshold: 80}
"""
        )
    )

    class Agent(Judge):
        label = "agent"

    judge = Judge(['{"score": 90, "reason": "Asked."}'])
    ctx = EngineContext(
        agent=Agent(["Which day?", "Booked."]),
        model="m",
        judge=judge,
        judge_model="j",
        system="You are a booking agent.",
    )
    result = run_eval(ev, 0, "e", ctx)
    assert result.status == "passed"
    assert (
        f"Conversation:\n{TRANSCRIPT}\n\nGrade the whole conversation"
        in judge.calls[0]["messages"][1]["content"]
    )


# --- judge model and temperature ---------------------------------------------------------------------------


def test_a_check_names_its_own_judge_model_and_temperature():
    other = Judge(['{"score": 1}', '{"score": 1}'])
    resolved = []

    def resolve(ref):
        resolved.append(ref)
        return other, ref.split("/")[-1]

    spec = {"criteria": [{"criteria": "a"}, {"criteria": "b"}], "model": "strict/gpt-4o", "temperature": 0}
    result, default, context = judge_check(spec, [], resolve=resolve)
    assert result.passed and default.calls == []
    assert [(c["model"], c["temperature"]) for c in other.calls] == [("gpt-4o", 0.0), ("gpt-4o", 0.0)]
    assert resolved == ["strict/gpt-4o", "strict/gpt-4o"]
    assert context.spent.total_tokens == 2 * JUDGE_USAGE.total_tokens  # still judge tokens


def test_without_one_the_suites_judge_model_and_the_endpoints_temperature():
    _, judge, _ = judge_check({"criteria": "c"}, ['{"score": 1}'])
    assert [(c["model"], c["temperature"]) for c in judge.calls] == [("suite-judge", None)]


def test_the_suites_judge_is_the_default_judge_and_the_model_when_none_is_given():
    registry = EndpointRegistry(
        EndpointConfig(name="default", base_url="http://127.0.0.1:9/v1"),
        {"strict": EndpointConfig(name="strict", base_url="http://127.0.0.1:9/v2")},
    )
    suite = load_suite(
        "name: s\nmodel: gpt-4o-mini\njudge: strict/gpt-4o\nevals: [{prompt: hi, checks: [{match: x}]}]"
    )
    ctx, endpoint = build_context(suite, registry)
    assert (endpoint, ctx.model, ctx.judge.label, ctx.judge_model) == (
        "default",
        "gpt-4o-mini",
        "strict",
        "gpt-4o",
    )
    client, model = ctx.resolve("strict/gpt-4.1")
    assert (client.label, model) == ("strict", "gpt-4.1")
    suite = load_suite("name: s\nmodel: gpt-4o-mini\nevals: [{prompt: hi, checks: [{match: x}]}]")
    ctx, _ = build_context(suite, registry)
    assert (ctx.judge.label, ctx.judge_model) == ("default", "gpt-4o-mini")


def test_a_judge_reason_that_says_unparseable_is_still_a_verdict():
    answers = [
        '{"score": 0.9, "reason": "The date is unparseable nonsense, but it is there."}',
        '{"score": 0.9}',
    ]
    result, _, _ = judge_check(MULTI, answers)
    assert result.passed and result.reason == "weighted score 0.90 (threshold 0.50 of 1) over 2 criteria"


def played_on_the_fake(source: str):
    """The suite played against the fake endpoint, whose every reply is a judge's verdict: its report and
    the request bodies the fake received."""
    from engine.loader import load_suite
    from engine.runner import run_suite
    from tests.fakeopenai import FakeOpenAI

    with FakeOpenAI() as fake:
        fake.default_reply = '{"score": 1, "reason": "ok"}'
        registry = EndpointRegistry(
            default=EndpointConfig(name="default", base_url=fake.base_url, max_retries=0)
        )
        report = run_suite(load_suite(source), registry)
        return report, fake.chat_requests()


def test_suite_judge_temperature_is_the_default_and_a_check_overrides_it():
    """judge_temperature in the suite applies to every llm_judge call; a check's own temperature wins."""
    report, bodies = played_on_the_fake(
        "name: t\nmodel: m\njudge_temperature: 0.2\nevals:\n"
        "  - prompt: hi\n    checks:\n      - llm_judge: {criteria: first}\n"
        "      - llm_judge: {criteria: second, temperature: 0.9}\n"
    )
    judged = [body for body in bodies if body["messages"][0]["role"] == "system"]
    assert report.status == "passed"
    assert sorted(body.get("temperature") for body in judged) == [0.2, 0.9]


def test_suite_judge_temperature_reaches_the_suites_llm_judge_grader():
    """`grader: llm_judge` (the suite's one judge, as a Letta import writes it) is asked at the suite's
    judge_temperature, as an llm_judge check is."""
    _, bodies = played_on_the_fake(
        "name: t\nmodel: m\njudge: judge-m\njudge_temperature: 0.3\ngrader: llm_judge\n"
        "rubric: Is it right?\nevals:\n  - input: hi\n    ground_truth: hello\n"
    )
    judged = [body for body in bodies if body["model"] == "judge-m"]
    assert [body.get("temperature") for body in judged] == [0.3]


@pytest.mark.timeout(20)  # a hang guard, not a timing: reading every brace of this answer took hours
@pytest.mark.parametrize(
    "answer",
    ["{" * 200_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000],
    ids=["braces", "deep-array", "deep-object"],
)
def test_a_hostile_judge_answer_is_unparseable_not_a_crash_or_a_hang(answer):
    assert parse_verdict(answer).parsed_from == "unparseable"
