"""Unit tests for engine.checks and engine.judge: the llm_judge check, the judge prompt and verdict parsing,
or-lists, a level's follow-up choice, and the check registry.

Model calls go to an in-test scripted client implementing engine.clients.ChatClient; nothing is patched.
Run without Django: ``python -m pytest tests/engine/test_engine_checks_judged.py -q -p no:django``.
"""

from __future__ import annotations

import typing

import pytest

from engine.checks import (
    CHECK_TYPES,
    LOCAL_CHECKS,
    JudgeContext,
    calls_out,
    choose_followup,
    evaluate,
    evaluate_level,
    label,
)
from engine.clients import EndpointError
from engine.codegrade.run import CodeRunner, CodeScope
from engine.judge import JUDGE_SYSTEM, JudgeError, judge_messages, normalise_score, parse_verdict
from engine.schema import (
    CHECK_KEYS,
    Check,
    CodeSpec,
    FieldEquals,
    JudgeSpec,
    SemanticSpec,
    ToolCalled,
    ToolNotCalled,
    ToolResult,
    ToolSequence,
)
from engine.schema.checks import CHECK_FIELDS
from tests.engine.check_doubles import (
    JUDGE_USAGE,
    SYSTEM,
    ScriptedJudge,
    check,
    reply,
    run,
    unit,
)

# --- llm_judge -----------------------------------------------------------------------------------------


def judged(answer: str, threshold: float = 0.5, **spec):
    judge = ScriptedJudge([answer])
    result = run({"llm_judge": {"criteria": "Gives 105", "threshold": threshold, **spec}}, "105", judge=judge)
    return result, judge


def test_llm_judge_direct_json():
    """llm_judge: a plain JSON answer gives score and reason; raw answer kept."""
    answer = '{"score": 0.9, "reason": "Correct product."}'
    result, _ = judged(answer)
    assert (result.type, result.passed) == ("llm_judge", True)
    assert result.score == pytest.approx(0.9)
    assert "Correct product." in result.reason
    assert "score 0.90" in result.reason
    assert result.raw == answer


def test_llm_judge_json_inside_prose():
    """llm_judge: JSON embedded in prose is found."""
    result, _ = judged('Here is my verdict: {"score": 0.2, "reason": "Says 100."} Hope that helps.')
    assert not result.passed
    assert result.score == pytest.approx(0.2)
    assert "Says 100." in result.reason


def test_llm_judge_json_inside_code_fence():
    """llm_judge: JSON inside a ```json fence is found."""
    result, _ = judged('```json\n{"score": 0.75, "reason": "Mostly right."}\n```')
    assert result.passed
    assert result.score == pytest.approx(0.75)


@pytest.mark.parametrize(("answer", "score"), [("0.8", 0.8), ("7/10", 0.7), ("Score: 0.6", 0.6)])
def test_llm_judge_bare_numbers(answer, score):
    """llm_judge: a bare number or "n/m" answer is accepted."""
    result, _ = judged(answer)
    assert result.passed
    assert result.score == pytest.approx(score)
    assert "no reason given" in result.reason


def test_llm_judge_unreadable_twice_is_a_judge_error_not_a_fail():
    """llm_judge: an answer with no score is asked again; a second one is a JudgeError naming the judge and
    quoting both answers, never a FAIL or a silent 0."""
    judge = ScriptedJudge(["I think the reply is pretty good overall.", "Still pretty good."])
    with pytest.raises(JudgeError, match=r"judge judge-model .*'I think the reply is pretty good overall\.'.*"
                                         r"'Still pretty good\.'"):  # fmt: skip
        run({"llm_judge": {"criteria": "Gives 105", "threshold": 0.0}}, "105", judge=judge)
    assert len(judge.calls) == 2


@pytest.mark.parametrize(("answer", "score"), [("8", 0.8), ('{"score": 85, "reason": "ok"}', 0.85)])
def test_llm_judge_scores_above_one_are_normalised(answer, score):
    """llm_judge: 0-10 and 0-100 answers are read back onto 0-1, and the reason says so."""
    result, _ = judged(answer, threshold=0.8)
    assert result.score == pytest.approx(score)
    assert result.passed
    assert "read as" in result.reason


@pytest.mark.parametrize(("score", "passed"), [(0.7, True), (0.69, False), (0.71, True)])
def test_llm_judge_threshold_boundary(score, passed):
    """llm_judge passes when score >= threshold (the boundary passes)."""
    result, _ = judged(f'{{"score": {score}, "reason": "r"}}', threshold=0.7)
    assert result.passed is passed


def test_llm_judge_calls_judge_model_with_spec_overrides_and_charges_usage():
    """llm_judge uses the context's judge model unless the spec names one; temperature passed; usage charged."""
    judge = ScriptedJudge(['{"score": 1}', '{"score": 1}'], cost=0.01)
    ctx = JudgeContext(judge, "judge-model")
    evaluate(check({"llm_judge": {"criteria": "c"}}), reply("105"), ctx)
    evaluate(check({"llm_judge": {"criteria": "c", "model": "other", "temperature": 0.3}}), reply("105"), ctx)
    assert [(c["model"], c["temperature"]) for c in judge.calls] == [("judge-model", None), ("other", 0.3)]
    assert ctx.spent.total_tokens == 2 * JUDGE_USAGE.total_tokens
    assert ctx.cost == pytest.approx(0.02)


def test_llm_judge_endpoint_error_propagates():
    """An EndpointError from the judge propagates out of evaluate (the conversation marks it error)."""
    judge = ScriptedJudge([EndpointError("judge endpoint down")])
    with pytest.raises(EndpointError, match="judge endpoint down"):
        run({"llm_judge": {"criteria": "c"}}, "105", judge=judge)


def test_llm_judge_sees_criteria_and_the_conversation():
    """The judge request holds the criteria and the whole conversation in [Role]: markers."""
    judge = ScriptedJudge(['{"score": 1, "reason": "ok"}'])
    conversation = [
        SYSTEM,
        {"role": "user", "content": "What is 15 * 7?"},
        {"role": "assistant", "content": "100"},
        {"role": "user", "content": "Please recalculate."},
        {"role": "assistant", "content": "105"},
    ]
    ctx = JudgeContext(judge, "judge-model")
    evaluate(check({"llm_judge": {"criteria": "Corrects itself to 105"}}), reply("105", 3, conversation), ctx)
    messages = judge.calls[0]["messages"]
    assert messages[0] == {"role": "system", "content": JUDGE_SYSTEM}
    user = messages[1]["content"]
    assert messages[1]["role"] == "user"
    assert "Corrects itself to 105" in user
    assert (
        "[System]:\nYou are a careful tutor.\n\n[User]:\nWhat is 15 * 7?\n\n[Assistant]:\n100\n\n"
        "[User]:\nPlease recalculate.\n\n[Assistant]:\n105"
    ) in user


# --- judge module directly -----------------------------------------------------------------------------


def test_judge_messages_format():
    """judge_messages: system instructions asking for JSON, then criteria and the [User]/[Assistant] transcript."""
    messages = judge_messages(
        "Is polite",
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}],
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "JSON" in messages[0]["content"]
    assert '"score"' in messages[0]["content"]
    body = messages[1]["content"]
    assert body.startswith("Criteria:\nIs polite\n\nConversation:\n")
    assert "[User]:\nHi\n\n[Assistant]:\nHello! How can I help?" in body
    assert body.index("Criteria:") < body.index("[User]:") < body.index("[Assistant]:")


@pytest.mark.parametrize(
    ("text", "score", "reason", "parsed_from"),
    [
        ('{"score": 0.9, "reason": "ok"}', 0.9, "ok", "json"),
        ('  {"score": "0.4", "reasoning": "string score"}  ', 0.4, "string score", "json"),
        ('{"rating": 3, "explanation": "x"}', 3.0, "x", "json"),
        ('{"score": true}', 1.0, "", "json"),
        ('Verdict: {"score": 0.5, "reason": "half"} done', 0.5, "half", "embedded-json"),
        ('```json\n{"score": 0.6, "reason": "meh"}\n```', 0.6, "meh", "fenced-json"),
        ('Note {not json} then {"score": 0.4, "reason": "has } brace"}', 0.4, "has } brace", "embedded-json"),
        ('{"result": {"score": 0.3, "rationale": "nested"}}', 0.3, "nested", "embedded-json"),
        ("0.8", 0.8, "", "number"),
        ("  1  ", 1.0, "", "number"),
        ("7/10", 0.7, "", "number"),
        ("Score: 8", 8.0, "", "number"),
        ("score = 0.25.", 0.25, "", "number"),
    ],
)
def test_parse_verdict_accepts(text, score, reason, parsed_from):
    """parse_verdict: whole JSON, embedded JSON (prose, fences, nested), bare numbers and n/m."""
    verdict = parse_verdict(text)
    assert verdict.score == pytest.approx(score)
    assert verdict.reason == reason
    assert verdict.parsed_from == parsed_from


@pytest.mark.parametrize(
    "text", ["", "pretty good", "0.8 because it is right", '{"reason": "no score"}', "{broken", "[0.8]"]
)
def test_parse_verdict_unparseable(text):
    """parse_verdict: answers without a readable score are unparseable (score None), never zero."""
    verdict = parse_verdict(text)
    assert verdict.score is None
    assert verdict.parsed_from == "unparseable"


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0), (7.0, 0.7), (10.0, 1.0), (85.0, 0.85), (100.0, 1.0), (250.0, 1.0)],
)
def test_normalise_score(raw, normalised):
    """normalise_score maps 0-10 and 0-100 answers back to 0-1, caps above, floors at 0."""
    assert normalise_score(raw) == pytest.approx(normalised)
    assert normalise_score(-0.5) == 0.0


# --- or ------------------------------------------------------------------------------------------------


def test_or_passes_when_any_member_passes_and_keeps_children():
    """or: passes if any member passes; each member's result is kept as a child."""
    result = run({"or": [{"match": "*one hundred five*"}, {"contains": "105"}, {"equals": "x"}]}, "It is 105")
    assert (result.type, result.passed, result.score) == ("or", True, 1.0)
    assert result.reason == "an option passed"
    assert [(c.type, c.passed) for c in result.children] == [
        ("match", False),
        ("contains", True),
        ("equals", False),
    ]
    assert result.label == 'or(match "*one hundred five*", contains "105", equals "x")'


def test_or_fails_when_every_member_fails():
    """or: fails when all members fail, with every child result kept."""
    result = run({"or": [{"match": "*105*"}, {"contains": "one hundred"}]}, "It is 100")
    assert result.passed is False
    assert result.reason == "every option failed"
    assert len(result.children) == 2
    assert not any(child.passed for child in result.children)


def test_or_score_is_best_member_score():
    """or: the score is the best member's score (e.g. a judge's partial score)."""
    judge = ScriptedJudge(['{"score": 0.3, "reason": "weak"}'])
    result = run(
        {"or": [{"match": "*105*"}, {"llm_judge": {"criteria": "c", "threshold": 0.9}}]}, "100", judge=judge
    )
    assert not result.passed
    assert result.score == pytest.approx(0.3)


def test_or_skips_pure_followup_members():
    """or: a pure follow-up member ({prompt, checks}) has no result among the children."""
    result = run(
        {"or": [{"match": "*105*"}, {"prompt": "Try again", "checks": [{"match": "*105*"}]}]}, "It is 100"
    )
    assert [c.type for c in result.children] == ["match"]
    assert not result.passed


# --- levels --------------------------------------------------------------------------------------------


def test_evaluate_level_skips_followup_items_and_keeps_order():
    """evaluate_level returns one result per check item, in order, skipping pure follow-ups."""
    items = [
        check({"match": "*a*"}),
        check({"prompt": "again", "checks": [{"match": "*a*"}]}),
        check({"contains": "b", "prompt": "b please", "checks": [{"contains": "b"}]}),
    ]
    results = evaluate_level(items, reply("a"), JudgeContext(ScriptedJudge(), "j"))
    assert [(r.type, r.passed) for r in results] == [("match", True), ("contains", False)]


def test_choose_followup_none_when_nothing_failed():
    """choose_followup returns None when every check passed, even if follow-ups exist."""
    items = [check({"match": "*a*", "prompt": "p", "checks": [{"match": "*a*"}]})]
    results = evaluate_level(items, reply("a"), JudgeContext(ScriptedJudge(), "j"))
    assert choose_followup(items, results) is None


# --- the registry: every check type of the schema reads and grades ------------------------------------------

# The smallest value a suite can write for a check, by the type its schema field holds: a new check type
# whose value has another type fails below until it is given one here.
EXAMPLES = {
    str: "ok",
    int: 1,
    bool: True,
    SemanticSpec: {"expected": "ok"},
    JudgeSpec: {"criteria": "ok"},
    FieldEquals: {"path": "a", "value": 1},
    CodeSpec: ["sh", "-c", "echo 1"],
    list[Check]: [{"contains": "ok"}],
    ToolCalled: "ok",
    ToolNotCalled: "ok",
    ToolSequence: {"calls": ["ok"]},
    ToolResult: {"result": "ok"},
}


def example(key: str) -> dict:
    annotation = Check.model_fields[CHECK_FIELDS[key]].annotation
    (held,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    assert held in EXAMPLES, f"{key}: no example value for {held}"
    return {key: EXAMPLES[held]}


def test_the_registry_has_one_entry_per_check_key_of_the_schema():
    assert list(CHECK_TYPES) == list(CHECK_KEYS)
    assert all(callable(entry.label) and callable(entry.evaluate) for entry in CHECK_TYPES.values())


def test_every_check_type_declares_whether_it_calls_out():
    """The conversation loop grades on its event loop only what calls no model and runs no program."""
    assert all(type(entry.calls_out) is bool for entry in CHECK_TYPES.values())
    assert {key for key, entry in CHECK_TYPES.items() if not entry.calls_out} == LOCAL_CHECKS


@pytest.mark.parametrize("key", CHECK_KEYS)
def test_a_check_type_calls_out_exactly_when_it_declares_so(key):
    item = check(example(key))
    judge = ScriptedJudge()  # no answers and no vectors: any call fails; no code runner either
    context = JudgeContext(judge, "judge-model")
    if calls_out(item):
        with pytest.raises((AssertionError, EndpointError)):
            evaluate(item, reply("ok", completion_tokens=1), context)
    else:
        assert evaluate(item, reply("ok", completion_tokens=1), context).type == key
        assert not judge.calls and not judge.embed_calls


@pytest.mark.parametrize("key", CHECK_KEYS)
def test_every_check_type_reads_and_grades_a_reply(key):
    item = check(example(key))
    judge = ScriptedJudge(answers=['{"score": 1, "reason": "fine"}'], vectors=[unit(1.0), unit(1.0)])
    code = CodeScope(CodeRunner())  # where a code check's program runs
    result = evaluate(item, reply("ok", completion_tokens=1), JudgeContext(judge, "judge-model", code=code))
    assert result.type == key and result.label == label(item)
    assert result.label.startswith(key) and result.reason and result.score is not None
