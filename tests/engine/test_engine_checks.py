"""Unit tests for engine.checks: the check types that read the reply itself (patterns, text, tokens, fields) and
semantic similarity.

Model calls go to an in-test scripted client implementing engine.clients.ChatClient; nothing is patched.
Run without Django: ``python -m pytest tests/engine/test_engine_checks.py -q -p no:django``.
"""

from __future__ import annotations

import pytest

from engine.checks import (
    JudgeContext,
    cosine,
    evaluate,
    label,
)
from engine.clients import EndpointError
from engine.conditions import evaluate_condition
from engine.matching import glob_match
from engine.schema import (
    DEFAULT_EMBEDDING_MODEL,
    Condition,
    FieldEquals,
)
from tests.engine.check_doubles import (
    EMBED_USAGE,
    ScriptedJudge,
    check,
    reply,
    run,
    unit,
)

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
