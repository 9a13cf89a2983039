"""promptfoo configuration and today's AgentV format (one reader): AgentV field accuracy, word bounds, and
`{{ env.NAME }}` references as suite variables, imported from fixture folders and played on the fake endpoint."""

from __future__ import annotations

import json

import pytest

from engine import suitevars
from engine.checks import Reply, evaluate
from engine.imports import convert
from engine.loader import load_suite
from engine.schema import Check
from tests.engine.promptfoo_play import (
    judged,
    play,
    play_with_vars,
    project,
    verdict,
)


def test_field_accuracy_keeps_each_fields_match_weight_and_optional_fields():
    result = convert(project("agentv-fields"))
    assert result.lost == []
    harbor, dock = load_suite(result.source).evals
    checks = {name: grader.check.field_equals for name, grader in harbor.graders.items()}
    issued = checks["invoice_fields-issued"]
    assert (
        issued.date_formats == ["DD-MMM-YYYY", "YYYY-MM-DD", "MM/DD/YYYY"] and issued.value == "03-FEB-2025"
    )
    net, tax = checks["invoice_fields-totals-net"], checks["invoice_fields-totals-tax"]
    assert (net.value, net.tolerance, net.relative) == (1200, 1, False)
    assert (tax.value, tax.tolerance, tax.relative) == (240, 0.05, True)
    # required: false is AgentV's optional field, not a gate on the case
    assert checks["invoice_fields-seller-address"].optional and not checks["invoice_fields-number"].optional
    assert harbor.pass_rule.required == [] and harbor.pass_rule.threshold == 0.8
    assert harbor.pass_rule.weighted_average == pytest.approx(
        {
            "invoice_fields-number": 0.2,
            "invoice_fields-issued": 0.1,
            "invoice_fields-seller-address": 0.1,
            "invoice_fields-totals-net": 0.3,
            "invoice_fields-totals-tax": 0.2,
            "invoice_fields-po_number": 0.1,
        }
    )
    # DOCK-2's expected output has no po_number: AgentV scores that field 1, so it keeps its weight as a pass
    assert dock.graders["invoice_fields-po_number"].check.kind == "min_words"
    assert dock.pass_rule.weighted_average["invoice_fields-po_number"] == pytest.approx(0.1)
    assert any("field-accuracy fields → field_equals graders" in line for line in result.mapped)


def test_field_accuracy_plays_as_agentv_scores_it(fake_openai):
    """HARBOR-7: a date in another format, totals within tolerance, an optional field missing: 1.0. DOCK-2: a
    wrong day and a net total off by 2 (tolerance 1) fail 3 + 1 of 10 weight, the field its expected output
    lacks passes: 0.6, under AgentV's 0.8."""
    fake = fake_openai
    fake.script(
        "Extract the invoice fields of HARBOR-7 as JSON.",
        ['{"number": "HARBOR-7", "issued": "2025-02-03", "seller": {}, '
         '"totals": {"net": 1200.6, "tax": "250"}, "po_number": "PO-55"}'],
    )  # fmt: skip
    fake.script(
        "Extract the invoice fields of DOCK-2 as JSON.",
        ['```json\n{"number": "DOCK-2", "issued": "03/11/2025", "seller": {"address": "9 Pier Lane"}, '
         '"totals": {"net": 502, "tax": 104}}\n```'],
    )  # fmt: skip
    report = play(fake, convert(project("agentv-fields")))
    harbor, dock = report.evals
    assert harbor.status == "passed" and harbor.score == pytest.approx(1.0), harbor.verdict
    assert dock.status == "failed" and dock.score == pytest.approx(0.6), dock.verdict
    failed = sorted(g.name for g in dock.graders if not g.passed)
    assert failed == ["invoice_fields-issued", "invoice_fields-totals-net"]


def test_word_bounds_come_from_the_item_or_agentvs_assertion_script(fake_openai):
    result = convert(project("agentv-words-env"))
    assert result.lost == []
    greeting, persona = load_suite(result.source).evals
    assert greeting.graders["min-words"].check.min_words == 4  # `const minWords = 4` in its script
    assert greeting.graders["max-words"].check.max_words == 12
    assert persona.pass_rule.required == ["min-words"]
    fake = fake_openai
    fake.script("Hello there!", ["Hello, lovely to see you!"])
    fake.script("Who are you?", ["A pirate."])
    fake.rule("Grade the reply against this criterion", verdict(1.0))
    report = play_with_vars(fake, result, {"EXPECTED_GREETING": "Hi!", "BOT_PERSONA": "a pirate"})
    first, second = report.evals
    assert first.status == "passed", first.verdict  # 5 words: at least 4, at most 12
    assert second.status == "failed" and "required min-words failed" in second.verdict  # 2 words


@pytest.mark.parametrize(
    "item, reply, passes",
    [
        ({"type": "word-count", "value": 3}, "one two three", True),
        ({"type": "word-count", "value": 3}, "one two three four", False),
        ({"type": "word-count", "value": {"min": 2, "max": 4}}, "  one\ntwo three ", True),
        ({"type": "word-count", "value": {"min": 2, "max": 4}}, "one", False),
        ({"type": "word-count", "value": {"min": 2, "max": 4}}, "a b c d e", False),
        ({"type": "word-count", "value": {"max": 2}}, "a b c", False),
        ({"type": "word-count", "value": {"min": 0, "max": 1}}, "", True),
        ({"type": "min-words", "value": 2}, "a b", True),
    ],
)
def test_promptfoo_word_count_grades_as_promptfoo_counts(item, reply, passes):
    config = {"prompts": ["{{q}}"], "providers": ["openai:gpt-4.1-mini"],
              "tests": [{"vars": {"q": "hi"}, "assert": [item]}]}  # fmt: skip
    result = convert({"promptfooconfig.yaml": json.dumps(config)})
    assert result.lost == []
    (grader,) = load_suite(result.source).evals[0].graders.values()
    check = Check.model_validate(grader.check.model_dump(by_alias=True, exclude_none=True))
    assert evaluate(check, Reply(reply, None, []), None).passed is passes


def test_env_references_become_suite_variables_given_at_launch(fake_openai):
    """AgentV fills `{{ env.NAME }}` when it runs; the import declares each as a variable (with the template's
    default) and the run fills it where AgentV would: the system prompt, the criterion, the reference."""
    result = convert(project("agentv-words-env"))
    assert result.lost == [] and not any("env." in line for line in result.unmapped)
    suite = load_suite(result.source)
    assert suite.vars == {
        "GREETING_RULE": "Greets the user warmly",
        "EXPECTED_GREETING": None,
        "BOT_PERSONA": None,
    }
    assert any("{{ env.BOT_PERSONA }} → {{var:BOT_PERSONA}}" in line for line in result.mapped)
    with pytest.raises(suitevars.VarsError, match="EXPECTED_GREETING"):
        suitevars.bind(suite, {"BOT_PERSONA": "a pirate"})
    fake = fake_openai
    fake.script("Hello there!", ["Hello, lovely to see you!"])
    fake.script("Who are you?", ["Arr, a pirate I be."])
    fake.rule("Greets the user warmly", verdict(1.0))
    fake.rule("Speaks in the persona", verdict(1.0))
    play_with_vars(fake, result, {"EXPECTED_GREETING": "Hello {friend}!", "BOT_PERSONA": "a pirate"})
    (persona,) = [r["messages"] for r in fake.chat_requests("Who are you?") if r["messages"][0]["role"] == "system"
                  and "judge" not in r["messages"][0]["content"]]  # fmt: skip
    assert persona[0]["content"] == "You are a pirate. Keep it short."
    (judge,) = judged(fake, "Greets the user warmly")
    assert "Hello {friend}!" in judge and "{{" not in judge and "var:" not in judge


def test_promptfoo_env_block_gives_the_default_and_a_pattern_keeps_the_variable():
    """promptfoo's `env:` sets the environment for its run, so it is the variable's default; a `contains`
    built as an escaped pattern still names the variable, so the run fills it in."""
    config = {
        "prompts": ["Greet {{ name }} for {{ env.SHOP }}"],
        "providers": ["openai:gpt-4.1-mini"],
        "env": {"SHOP": "Crumb"},
        "tests": [{"vars": {"name": "Ada"}, "assert": [{"type": "contains", "value": "{{ env.SHOP }}"}]}],
    }
    result = convert({"promptfooconfig.yaml": json.dumps(config)})
    assert result.lost == []
    suite = load_suite(result.source)
    assert suite.vars == {"SHOP": "Crumb"}
    bound = suitevars.bind(suite, {"SHOP": "Petal & Co."})
    (ev,) = bound.evals
    assert ev.input == "Greet Ada for Petal & Co."
    (grader,) = ev.graders.values()
    assert evaluate(grader.check, Reply("Welcome to Petal & Co.!", None, []), None).passed
    assert not evaluate(grader.check, Reply("Welcome to Crumb!", None, []), None).passed
