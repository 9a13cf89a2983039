"""Unit tests for engine.checks and engine.judge: every check type, the judge prompt and verdict parsing.

Model calls go to an in-test scripted client implementing engine.clients.ChatClient; nothing is patched.
Run without Django: ``python -m pytest tests/engine/test_engine_checks.py -q -p no:django``.
"""

from __future__ import annotations

import math
import typing

import pytest

from engine.checks import (
    CHECK_TYPES,
    LOCAL_CHECKS,
    JudgeContext,
    Reply,
    choose_followup,
    cosine,
    evaluate,
    evaluate_level,
    label,
)
from engine.clients import Completion, EndpointError
from engine.codegrade.run import CodeRunner, CodeScope
from engine.conditions import evaluate_condition
from engine.judge import JUDGE_SYSTEM, JudgeError, judge_messages, normalise_score, parse_verdict
from engine.matching import glob_match
from engine.results import Usage
from engine.schema import (
    CHECK_KEYS,
    DEFAULT_EMBEDDING_MODEL,
    Check,
    CodeSpec,
    Condition,
    FieldEquals,
    JudgeSpec,
    SemanticSpec,
)
from engine.schema.checks import CHECK_FIELDS

JUDGE_USAGE = Usage(prompt_tokens=120, completion_tokens=30)
EMBED_USAGE = Usage(prompt_tokens=16)


class ScriptedJudge:
    """A ChatClient whose answers and embeddings are given by the test; it records every call."""

    label = "scripted-judge"
    is_mock = False

    def __init__(self, answers=(), vectors=None, *, cost: float = 0.002, embed_cost: float = 0.0001):
        self.answers = list(answers)
        self.vectors = vectors
        self.cost = cost
        self.embed_cost = embed_cost
        self.calls: list[dict] = []
        self.embed_calls: list[dict] = []

    def complete(self, model, messages, *, temperature=None):
        self.calls.append(
            {"model": model, "messages": [dict(m) for m in messages], "temperature": temperature}
        )
        if not self.answers:
            raise AssertionError("judge called more often than scripted")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Completion(text=answer, usage=JUDGE_USAGE, cost=self.cost, latency_ms=5)

    def embed(self, model, texts):
        self.embed_calls.append({"model": model, "texts": list(texts)})
        if self.vectors is None:
            raise AssertionError("embed called but no vectors scripted")
        return self.vectors, EMBED_USAGE, self.embed_cost


SYSTEM = {"role": "system", "content": "You are a careful tutor."}


def reply(text: str, completion_tokens: int | None = 7, conversation: list[dict] | None = None) -> Reply:
    if conversation is None:
        conversation = [
            SYSTEM,
            {"role": "user", "content": "What is 15 * 7?"},
            {"role": "assistant", "content": text},
        ]
    return Reply(text=text, completion_tokens=completion_tokens, conversation=conversation)


def check(data: dict) -> Check:
    return Check.model_validate(data)


def run(data: dict, text: str, *, judge: ScriptedJudge | None = None, completion_tokens: int | None = 7):
    ctx = JudgeContext(judge or ScriptedJudge(), "judge-model")
    return evaluate(check(data), reply(text, completion_tokens), ctx)


def unit(x: float) -> list[float]:
    """A 2-d unit vector whose cosine with [1, 0] is x."""
    return [x, math.sqrt(1 - x * x)]


# --- match / not_match (glob) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("*105*", "15 * 7 = 105.", True),
        ("*105*", "15 * 7 = 100.", False),
        ("*HELLO*", "well, hello there", True),  # case-insensitive
        ("*paris*", "PARIS", True),
        ("a*b", "a\nline two\n\nb", True),  # * spans newlines
        ("*105*", "first line\nthe answer is\n105\n", True),
        ("h?t", "hat", True),  # ? is one character
        ("h?t", "heat", False),
        ("h?t", "ht", False),
        ("105", "it is 105", False),  # whole-text: no stars, no substring match
        ("105", "105", True),
        ("*[1]*", "see note [1] below", True),  # brackets are literal
        ("*[1]*", "see note 1 below", False),
        ("[abc]", "a", False),  # not a character class
        ("[abc]", "[ABC]", True),
        ("*$5.00*", "costs $5.00 today", True),  # regex metacharacters are literal
        ("*$5.00*", "costs $5X00 today", False),
        ("*(a|b)*", "x (a|b) y", True),
        ("*(a|b)*", "a", False),
    ],
)
def test_glob_match_semantics(pattern, text, expected):
    """glob: whole text, case-insensitive, * spans newlines, ? is one char, brackets and regex chars literal."""
    assert glob_match(pattern, text) is expected


def test_match_check_passes_and_fails_with_label_and_reason():
    """match check: passed/score/type/label/reason for a pass and a fail."""
    ok = run({"match": "*105*"}, "15 * 7 = 105.")
    assert (ok.type, ok.passed, ok.score) == ("match", True, 1.0)
    assert ok.label == 'match "*105*"'
    assert ok.reason == "reply matches"
    bad = run({"match": "*105*"}, "15 * 7 = 100.")
    assert (bad.passed, bad.score) == (False, 0.0)
    assert bad.reason == "reply does not match"


def test_match_check_star_spans_newlines_and_ignores_case():
    """match check over a multi-line reply, different case."""
    assert run({"match": "*def*RETURN*"}, "def add(a, b):\n    return a + b\n").passed


def test_match_check_brackets_are_literal():
    """match check: "[1]" in a pattern is literal, not a character class."""
    assert run({"match": "*[1]*"}, "price [1]").passed
    assert not run({"match": "*[1]*"}, "price 1").passed


def test_not_match_is_the_inverse_of_match():
    """not_match passes when the glob does not match and fails when it does."""
    ok = run({"not_match": "*SyntaxError*"}, "def f(): return 1")
    assert (ok.type, ok.passed, ok.score) == ("not_match", True, 1.0)
    assert "does not match" in ok.reason
    bad = run({"not_match": "*syntaxerror*"}, "Traceback: SyntaxError: invalid syntax")
    assert (bad.passed, bad.score) == (False, 0.0)
    assert bad.reason == "reply matches, and must not"


# --- regex / contains / equals -------------------------------------------------------------------------


def test_regex_searches_anywhere():
    """regex is re.search: matches in the middle of the reply and reports what it found."""
    result = run({"regex": r"\b\d{3}\b"}, "The answer is 105, I think.")
    assert (result.type, result.passed, result.score) == ("regex", True, 1.0)
    assert "105" in result.reason
    assert result.label == r"regex /\b\d{3}\b/"


def test_regex_fails_when_absent_and_is_case_sensitive():
    """regex without a match fails; no implicit IGNORECASE."""
    absent = run({"regex": r"\d{3}"}, "fifteen times seven")
    assert not absent.passed
    assert absent.reason == "no match found"
    assert not run({"regex": "Canberra"}, "canberra").passed
    assert run({"regex": "(?i)Canberra"}, "canberra").passed


def test_regex_spans_lines_only_when_asked():
    """regex uses Python defaults: ^ anchors the whole text unless (?m) is given."""
    assert not run({"regex": "^105$"}, "answer:\n105\n").passed
    assert run({"regex": "(?m)^105$"}, "answer:\n105\n").passed


def test_contains_is_case_insensitive_substring():
    """contains: case-insensitive substring."""
    ok = run({"contains": "canberra"}, "The capital is CANBERRA.")
    assert (ok.type, ok.passed) == ("contains", True)
    assert ok.reason == "substring found"
    bad = run({"contains": "Canberra"}, "The capital is Sydney.")
    assert not bad.passed
    assert bad.reason == "substring not found"


def test_equals_strips_and_is_case_sensitive():
    """equals: exact after stripping surrounding whitespace on both sides, case-sensitive."""
    assert run({"equals": "Paris"}, "  Paris \n").passed
    assert run({"equals": " Paris\n"}, "Paris").passed
    wrong_case = run({"equals": "Paris"}, "paris")
    assert not wrong_case.passed
    assert '"paris"' in wrong_case.reason
    assert not run({"equals": "Paris"}, "Paris.").passed
    assert not run({"equals": "Paris"}, "It is Paris").passed


def test_starts_with_is_a_case_sensitive_prefix_after_leading_whitespace():
    """starts_with: the reply begins with the text once leading whitespace is stripped; case counts."""
    ok = run({"starts_with": "Answer: 105"}, "\n  Answer: 105, since 15 * 7 = 105.")
    assert (ok.type, ok.label, ok.passed, ok.score) == ("starts_with", 'starts_with "Answer: 105"', True, 1.0)
    assert ok.reason == "reply starts with the expected text"
    wrong_case = run({"starts_with": "Answer:"}, "answer: 105")
    assert not wrong_case.passed and wrong_case.reason == 'reply starts "answer: 105"'
    assert not run({"starts_with": "Answer:"}, "The Answer: 105").passed  # anywhere else is not a prefix
    assert not run({"starts_with": "Answer: 105"}, "Answer: 10").passed  # a reply shorter than the text


def test_starts_with_works_as_a_stop_condition():
    """Any check is a stop condition (simulate.stop_when); starts_with reads as its label there too."""
    condition = Condition.model_validate({"starts_with": "Booked"})
    result, decided = evaluate_condition(
        condition, 1, reply("Booked: table for two"), JudgeContext(ScriptedJudge(), "m")
    )
    assert (result.kind, result.met, decided) == ("starts_with", True, 'starts_with "Booked"')


# --- min_tokens / max_tokens ---------------------------------------------------------------------------


def test_min_tokens_uses_reported_completion_tokens():
    """min_tokens compares the endpoint's completion_tokens, not the text length, inclusive bound."""
    at_bound = run({"min_tokens": 12}, "short", completion_tokens=12)
    assert (at_bound.type, at_bound.passed) == ("min_tokens", True)
    assert at_bound.reason == "12 completion tokens"
    below = run({"min_tokens": 13}, "a very long reply " * 20, completion_tokens=12)
    assert not below.passed
    assert "estimated" not in below.reason


def test_max_tokens_uses_reported_completion_tokens():
    """max_tokens passes at the bound and fails above it."""
    assert run({"max_tokens": 12}, "x" * 400, completion_tokens=12).passed
    over = run({"max_tokens": 11}, "x", completion_tokens=12)
    assert not over.passed
    assert over.reason == "12 completion tokens"


def test_token_checks_estimate_when_usage_missing_and_say_so():
    """With completion_tokens None the check estimates (~4 chars a token) and says "estimated"."""
    text = "x" * 40  # 10 estimated tokens
    result = run({"min_tokens": 10}, text, completion_tokens=None)
    assert result.passed
    assert result.reason.startswith("10 completion tokens")
    assert "estimated" in result.reason
    assert not run({"min_tokens": 11}, text, completion_tokens=None).passed
    assert run({"max_tokens": 10}, text, completion_tokens=None).passed
    assert not run({"max_tokens": 9}, text, completion_tokens=None).passed


# --- min_words / max_words -----------------------------------------------------------------------------


def test_word_bounds_count_runs_of_non_whitespace_inclusively():
    """Words are what lies between whitespace, whatever the token count; both bounds include N."""
    text = "Hello, I'm  an\nassistant!"
    at_bound = run({"min_words": 4}, text, completion_tokens=1)
    assert (at_bound.type, at_bound.passed, at_bound.reason) == ("min_words", True, "4 words")
    assert not run({"min_words": 5}, text, completion_tokens=50).passed
    assert run({"max_words": 4}, text).passed
    assert not run({"max_words": 3}, text).passed
    assert run({"max_words": 0}, "   ").passed
    assert label(check({"min_words": 3})) == "min_words 3"


# --- field_equals: numbers within a tolerance, dates in formats ----------------------------------------


def test_field_equals_with_a_tolerance_compares_numbers():
    reply_text = '{"invoice": {"total": 1889.5, "tax": "120.40", "note": "n/a"}}'
    near = {"field_equals": {"path": "invoice.total", "value": 1889.49, "tolerance": 0.01}}
    assert run(near, reply_text).passed
    assert not run(
        {"field_equals": {"path": "invoice.total", "value": 1889.4, "tolerance": 0.01}}, reply_text
    ).passed
    # numeric text reads as a number on either side
    assert run({"field_equals": {"path": "invoice.tax", "value": 120, "tolerance": 0.5}}, reply_text).passed
    assert not run({"field_equals": {"path": "invoice.tax", "value": 120}}, reply_text).passed
    missed = run({"field_equals": {"path": "invoice.note", "value": 1, "tolerance": 5}}, reply_text)
    assert not missed.passed and "not a number" in missed.reason
    assert label(check(near)) == "field_equals invoice.total = 1889.49 ± 0.01"


def test_a_relative_tolerance_is_a_share_of_the_expected_value():
    text = '{"amount": 103, "zero": 0.004}'
    assert run(
        {"field_equals": {"path": "amount", "value": 100, "tolerance": 0.03, "relative": True}}, text
    ).passed
    assert not run(
        {"field_equals": {"path": "amount", "value": 100, "tolerance": 0.02, "relative": True}}, text
    ).passed
    # at an expected 0 the difference itself counts, as AgentV does
    assert run(
        {"field_equals": {"path": "zero", "value": 0, "tolerance": 0.005, "relative": True}}, text
    ).passed


def test_field_equals_with_date_formats_compares_calendar_days():
    formats = ["DD-MMM-YYYY", "MM/DD/YYYY"]
    text = (
        '{"issued": "15-JAN-2025", "due": "02/14/2025", "paid": "2025-03-01T10:30:00Z", "eu": "15/01/2025"}'
    )
    assert run(
        {"field_equals": {"path": "issued", "value": "2025-01-15", "date_formats": formats}}, text
    ).passed
    assert run(
        {"field_equals": {"path": "due", "value": "14-Feb-2025", "date_formats": formats}}, text
    ).passed
    assert run(
        {"field_equals": {"path": "paid", "value": "03/01/2025", "date_formats": formats}}, text
    ).passed
    wrong = run({"field_equals": {"path": "due", "value": "2025-02-15", "date_formats": formats}}, text)
    assert not wrong.passed and "2025-02-14" in wrong.reason
    unread = run({"field_equals": {"path": "eu", "value": "2025-01-15", "date_formats": formats}}, text)
    assert not unread.passed and "not a date" in unread.reason
    assert run(
        {"field_equals": {"path": "eu", "value": "2025-01-15", "date_formats": ["DD/MM/YYYY"]}}, text
    ).passed
    # without date_formats the same texts are compared exactly
    assert not run({"field_equals": {"path": "issued", "value": "2025-01-15"}}, text).passed


def test_an_optional_field_passes_when_a_json_reply_lacks_it():
    spec = {"field_equals": {"path": "supplier.address", "value": "1 Harbor Rd", "optional": True}}
    absent = run(spec, '{"supplier": {"name": "Acme"}}')
    assert absent.passed and "optional" in absent.reason
    assert not run(spec, '{"supplier": {"address": "2 Dock St"}}').passed
    assert not run(spec, '{"supplier": {"address": null}}').passed
    assert not run(spec, "I could not read the invoice.").passed
    assert not run({"field_equals": {"path": "supplier.address", "value": "x"}}, '{"supplier": {}}').passed


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"tolerance": 1, "date_formats": ["YYYY-MM-DD"]}, "not both"),
        ({"relative": True}, "needs a `tolerance`"),
        ({"tolerance": -1}, "greater than or equal"),
        ({"date_formats": ["every day"]}, "none of YYYY"),
    ],
)
def test_field_equals_comparisons_are_checked(spec, message):
    with pytest.raises(ValueError, match=message):
        FieldEquals(path="a", value=1, **spec)


# --- semantic ------------------------------------------------------------------------------------------


def test_cosine():
    """cosine similarity of plain vectors, and 0 for a zero vector."""
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.0)
    assert cosine([1.0, 1.0], [-1.0, -1.0]) == pytest.approx(-1.0)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


@pytest.mark.parametrize(("similarity", "passed"), [(0.81, True), (0.79, False), (0.99, True), (0.1, False)])
def test_semantic_passes_at_or_above_threshold(similarity, passed):
    """semantic: cosine of the client's embeddings against the threshold; score is the similarity."""
    judge = ScriptedJudge(vectors=[[1.0, 0.0], unit(similarity)])
    result = run({"semantic": {"expected": "one hundred and five", "threshold": 0.8}}, "105", judge=judge)
    assert result.type == "semantic"
    assert result.passed is passed
    assert result.score == pytest.approx(similarity)
    assert f"{similarity:.3f}" in result.reason
    assert "threshold 0.8" in result.reason


def test_semantic_embeds_reply_and_expected_with_the_default_model():
    """semantic sends [reply, expected] to embed with the default embedding model, or the spec's model."""
    judge = ScriptedJudge(vectors=[[1.0, 0.0], [1.0, 0.0]])
    run({"semantic": {"expected": "Canberra"}}, "It is Canberra.", judge=judge)
    assert judge.embed_calls == [{"model": DEFAULT_EMBEDDING_MODEL, "texts": ["It is Canberra.", "Canberra"]}]
    judge = ScriptedJudge(vectors=[[1.0, 0.0], [1.0, 0.0]])
    run({"semantic": {"expected": "Canberra", "model": "my-embedder"}}, "Canberra", judge=judge)
    assert judge.embed_calls[0]["model"] == "my-embedder"


def test_semantic_charges_embedding_usage_to_the_judge_context():
    """semantic adds the embedding call's usage and cost to JudgeContext.spent/cost."""
    judge = ScriptedJudge(vectors=[[1.0, 0.0], [1.0, 0.0]], embed_cost=0.25)
    ctx = JudgeContext(judge, "judge-model")
    evaluate(check({"semantic": {"expected": "x"}}), reply("x"), ctx)
    assert ctx.spent.prompt_tokens == EMBED_USAGE.prompt_tokens
    assert ctx.cost == pytest.approx(0.25)


def test_semantic_wrong_vector_count_is_an_endpoint_error():
    """An embedding answer with the wrong number of vectors raises EndpointError, not a silent score."""
    judge = ScriptedJudge(vectors=[[1.0, 0.0]])
    with pytest.raises(EndpointError, match="1 vectors for 2 inputs"):
        run({"semantic": {"expected": "x"}}, "x", judge=judge)


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
    if CHECK_TYPES[key].calls_out:
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
