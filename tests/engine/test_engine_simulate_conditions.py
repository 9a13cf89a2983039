"""Simulated users' stop conditions: what each kind of condition holds on, how they nest, and the simulate block's
validation and defaults.

Everything goes through engine.conditions.holds or engine.conversation.run_eval with in-test clients. No Django,
no patching.
"""

from __future__ import annotations

import pytest
import yaml

from engine.checks import JudgeContext
from engine.conditions import NATURAL_LANGUAGE_SYSTEM, holds
from engine.loader import load_suite
from engine.schema import Condition
from engine.source import SuiteError
from tests.engine.simulated_users import (
    CONFIRMED,
    JUDGE_USAGE,
    SYSTEM,
    Judge,
    reply,
    sim,
)

# --- conditions, one by one ------------------------------------------------------------------------------


def cond(data) -> Condition:
    return Condition.model_validate(yaml.safe_load(data) if isinstance(data, str) else data)


def check_holds(condition, text: str = "hello", turn: int = 1, judge: Judge | None = None):
    return holds(cond(condition), turn, reply(text), JudgeContext(judge or Judge(), "judge-m"))


def test_after_turns_holds_from_that_turn_on():
    assert [check_holds("after_turns: 3", turn=turn)[0] for turn in (1, 2, 3, 4)] == [
        False,
        False,
        True,
        True,
    ]
    assert check_holds("after_turns: 3", turn=3)[1] == "after_turns 3"


@pytest.mark.parametrize(
    ("text", "path", "value", "met"),
    [
        (CONFIRMED, "status", "confirmed", True),
        (CONFIRMED, "status", "pending", False),
        (CONFIRMED, "booking.party", 2, True),
        (CONFIRMED, "booking.time", "19:00", True),
        (CONFIRMED, "booking.missing", "x", False),
        ('{"items": [{"id": 7}, {"id": 9}]}', "items.1.id", 9, True),
        ('{"items": [{"id": 7}]}', "items.3.id", 7, False),
        ('{"ok": true}', "ok", True, True),
        ('{"ok": 1}', "ok", True, False),  # JSON's 1 is not true
        ('{"ok": false}', "ok", 0, False),  # nor is false 0
        ('{"n": 2.0}', "n", 2, True),  # numbers compare as numbers
        ('{"tags": ["a", "b"]}', "tags", ["a", "b"], True),
        ('{"v": null}', "v", None, True),
        ("Your booking status is confirmed.", "status", "confirmed", False),  # not JSON: no match
        ("", "status", "confirmed", False),
    ],
)
def test_field_equals_on_the_json_parsed_reply(text, path, value, met):
    ok, label = check_holds({"field_equals": {"path": path, "value": value}}, text)
    assert ok is met
    assert label.startswith(f"field_equals {path} = ")


@pytest.mark.parametrize(
    ("text", "met"),
    [
        ('{"booking": {"id": "B-1"}}', True),
        ('{"booking": {"id": 0}}', True),  # falsy values are set
        ('{"booking": {"id": ""}}', True),
        ('{"booking": {"id": false}}', True),
        ('{"booking": {"id": null}}', False),
        ('{"booking": {}}', False),
        ('{"booking": "B-1"}', False),
        ("booking.id is B-1", False),  # not JSON
    ],
)
def test_field_is_set_means_present_and_not_null(text, met):
    ok, label = check_holds("field_is_set: booking.id", text)
    assert ok is met and label == "field_is_set booking.id"


def test_natural_language_asks_the_judge_with_a_confidence_and_default_threshold_0_7():
    judge = Judge(confidences=['{"score": 0.7, "reason": "Booked."}'])
    ok, label = check_holds(
        "natural_language: {prompt: 'Has the booking been confirmed?'}", "Done, see you at 7.", judge=judge
    )
    assert ok
    assert label == 'natural_language "Has the booking been confirmed?" (confidence 0.70, threshold 0.7)'
    (call,) = judge.nl_calls
    assert call[0] == {"role": "system", "content": NATURAL_LANGUAGE_SYSTEM}
    assert call[1]["role"] == "user"
    assert call[1]["content"] == (
        f"Conversation:\n[System]:\n{SYSTEM}\n\n[User]:\nBook a table.\n\n[Assistant]:\nDone, see you at 7."
        "\n\nQuestion: Has the booking been confirmed?\nRespond with the JSON object only."
    )
    assert judge.models == [("nl", "judge-m")]


@pytest.mark.parametrize(
    ("answer", "threshold", "met", "confidence"),
    [
        ('{"score": 0.69}', 0.7, False, "0.69"),
        ('{"score": 0.8, "reason": "yes"}', 0.8, True, "0.80"),
        ('{"score": 0.79}', 0.8, False, "0.79"),
        ("0.95", 0.9, True, "0.95"),  # a bare number is a confidence too
        ('Sure: {"score": 1, "reason": "Confirmed."}', 0.7, True, "1.00"),  # embedded object
        ('{"score": 85}', 0.9, False, "0.85"),  # out of 100, read back onto 0-1 like llm_judge
        ('{"score": -0.5}', 0.0, True, "0.00"),
    ],
)
def test_natural_language_threshold(answer, threshold, met, confidence):
    judge = Judge(confidences=[answer])
    ok, label = check_holds(
        {"natural_language": {"prompt": "Booked?", "threshold": threshold}}, "ok", judge=judge
    )
    assert ok is met
    assert f"(confidence {confidence}, threshold {threshold:g})" in label


@pytest.mark.parametrize(
    ("own", "suites", "sent"),
    [("", None, None), ("", 0.2, 0.2), (", temperature: 0", 0.2, 0.0), (", temperature: 1.5", None, 1.5)],
)
def test_natural_language_takes_its_own_temperature_else_the_suites_judge_temperature(own, suites, sent):
    judge = Judge(confidences=['{"score": 0.9}'])
    condition = cond(f"natural_language: {{prompt: 'Booked?'{own}}}")
    holds(condition, 1, reply("ok"), JudgeContext(judge, "judge-m", temperature=suites))
    assert judge.temperatures == [("nl", sent)]


def test_natural_language_unreadable_answer_is_asked_again():
    judge = Judge(confidences=["I think the user is happy.", '{"score": 0.9, "reason": "Happy."}'])
    ok, label = check_holds("natural_language: {prompt: 'Booked?'}", "ok", judge=judge)
    assert ok and label == 'natural_language "Booked?" (confidence 0.90, threshold 0.7)'
    assert judge.nl_calls[1][-2:] == [
        {"role": "assistant", "content": "I think the user is happy."},
        {"role": "user", "content": "Your answer could not be read: it has no score: expected a JSON object with "
         "a score, or YES or NO. Answer again with the JSON object only, no other text: "
         '{"score": <your confidence from 0 to 1 that the answer is yes>, "reason": "<one sentence>"}'},
    ]  # fmt: skip


def test_natural_language_model_resolves_its_own_endpoint_and_charges_the_judge():
    other = Judge(confidences=['{"score": 0.9}'])
    seen = []

    def resolve(ref):
        seen.append(ref)
        return other, "gpt-x"

    context = JudgeContext(Judge(), "judge-m", resolve)
    ok, _ = holds(cond("natural_language: {prompt: 'Booked?', model: other/gpt-x}"), 1, reply("ok"), context)
    assert ok and seen == ["other/gpt-x"] and other.models == [("nl", "gpt-x")]
    assert context.spent == JUDGE_USAGE and context.cost == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("condition", "text", "met"),
    [
        ("match: '*confirmed*'", "Your table is CONFIRMED.", True),
        ("not_match: '*sorry*'", "Sorry, we are full.", False),
        ("contains: confirmed", "All confirmed!", True),
        ("regex: 'B-\\d{3}'", "Reference B-123.", True),
        ("regex: 'B-\\d{3}'", "Reference B-12.", False),
        ("equals: Done", "  Done \n", True),
        ("max_tokens: 5", "short", True),
        ("min_tokens: 6", "short", False),
    ],
)
def test_any_check_of_the_vocabulary_is_a_condition(condition, text, met):
    ok, label = check_holds(condition, text)
    assert ok is met
    assert label.split(" ")[0] == next(iter(yaml.safe_load(condition)))


def test_llm_judge_as_a_condition_uses_the_judge():
    judge = Judge(verdicts=['{"score": 0.9, "reason": "Booked."}'])
    ok, label = check_holds("llm_judge: {criteria: The booking is confirmed}", "Booked!", judge=judge)
    assert ok and label == 'llm_judge "The booking is confirmed"' and len(judge.judge_calls) == 1


# --- combinators ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "turn", "met", "label"),
    [
        ("all: [{after_turns: 2}, {field_equals: {path: status, value: confirmed}}]", 2, True,
         'after_turns 2 and field_equals status = "confirmed"'),
        ("all: [{after_turns: 3}, {field_equals: {path: status, value: confirmed}}]", 2, False,
         "not after_turns 3"),
        ("any: [{after_turns: 5}, {field_is_set: booking.party}]", 1, True, "field_is_set booking.party"),
        ("any: [{after_turns: 5}, {contains: cancelled}]", 1, False,
         'none of: after_turns 5; contains "cancelled"'),
        ("not: {field_is_set: error}", 1, True, "not (field_is_set error)"),
        ("not: {after_turns: 1}", 1, False, "not (after_turns 1)"),
        # nested: (status confirmed and no error) or turn 9
        ("any: [{all: [{field_equals: {path: status, value: confirmed}}, {not: {field_is_set: error}}]},"
         " {after_turns: 9}]", 2, True,
         'field_equals status = "confirmed" and not (field_is_set error)'),
        ("not: {any: [{after_turns: 9}, {not: {contains: confirmed}}]}", 1, True,
         'not (none of: after_turns 9; not (contains "confirmed"))'),
    ],
)  # fmt: skip
def test_all_any_not_nest(condition, turn, met, label):
    assert check_holds(condition, CONFIRMED, turn=turn) == (met, label)


def test_any_stops_at_the_first_member_that_holds_and_all_at_the_first_that_does_not():
    """The judge is not paid for a member whose answer cannot change the result."""
    judge = Judge()  # any judge call would fail the test
    nl = {"natural_language": {"prompt": "Booked?"}}
    met = {"field_equals": {"path": "status", "value": "confirmed"}}
    assert check_holds({"any": [met, nl]}, CONFIRMED, judge=judge)[0]
    assert not check_holds({"all": [{"after_turns": 4}, nl]}, CONFIRMED, judge=judge)[0]
    assert judge.calls == 0


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("stop_when: {after_turns: 1, contains: x}", "a condition is exactly one of"),
        ("stop_when: {}", "a condition is exactly one of"),
        ("stop_when: {all: []}", "at least 1"),
        ("stop_when: {or: [{after_turns: 1}]}", "unknown key `or`"),
        ("stop_when: {after_turns: 0}", "expected a number at least 1; found the number 0"),
        (
            "stop_when: {natural_language: {prompt: x, threshold: 1.5}}",
            "expected a number at most 1; found the number 1.5",
        ),
        ("stop_when: {not: [{after_turns: 1}]}", ""),
        ("follow_ups: [{input: a, turns: .inf}, {input: b}]", "turns: inf is allowed only on the last"),
        ("follow_ups: [{input: a, turns: 0}]", "turns is at least 1"),
        ("persona: [{text: a}, {text: b}]", "only the last persona stage may leave out until_turn"),
        ("persona: [{until_turn: 3, text: a}, {until_turn: 2, text: b}]", "must increase"),
        ("persona: []", "at least one stage"),
        ("max_turns: 0", "expected a number at least 1; found the number 0"),
        ("on_condition_met: maybe", "'pass' or 'fail'"),
        ("on_max_turns: maybe", "'pass' or 'fail'"),
    ],
)
def test_invalid_simulate_blocks_are_rejected_with_their_path(source, message):
    with pytest.raises(SuiteError) as caught:
        load_suite(f"name: s\nmodel: mock\nevals:\n  - prompt: hi\n    simulate:\n      {source}\n")
    assert "evals[0].simulate" in str(caught.value)
    assert message in str(caught.value)


def test_simulate_needs_a_prompt_and_no_ground_truth():
    for source in (
        "input: hi\n    simulate: {persona: p}",
        "prompt: hi\n    ground_truth: x\n    simulate: {}",
    ):
        with pytest.raises(SuiteError):
            load_suite(f"name: s\nmodel: mock\nevals:\n  - {source}\n")


def test_yaml_inf_and_the_string_inf_both_mean_forever_on_the_last_follow_up():
    for inf in (".inf", "inf", ".Inf"):
        suite = load_suite(
            f"name: s\nmodel: mock\nevals:\n  - prompt: hi\n    simulate:\n"
            f"      follow_ups: [{{input: a, turns: 2}}, {{input: b, turns: {inf}}}]\n"
            "      stop_when: {contains: done}\n"
        )
        assert [f.turns for f in suite.evals[0].simulate.follow_ups] == [2, "inf"]


def test_defaults():
    spec = sim("persona: p").simulate
    assert (spec.max_turns, spec.on_condition_met, spec.on_max_turns) == (10, "pass", "fail")
    assert spec.follow_ups == [] and spec.stop_when is None and spec.model is None
    assert cond("natural_language: {prompt: x}").natural_language.threshold == 0.7
