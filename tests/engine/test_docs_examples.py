"""The docs' examples are real: every YAML fragment is wrapped into the smallest suite and validated, and the
outputs, reports and sent messages they show are what the code produces.

The fences and marks these tests read are described in tests/engine/test_docs.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from engine import results, stats
from engine.history import build_history
from engine.loader import load_suite
from engine.report import format_eval, format_report
from tests.engine.doc_blocks import (
    DEMO,
    README,
    RESULTS_DOC,
    SUITE_DOC,
    YAML_LANGS,
    Block,
    _all_blocks,
    _as_suite,
    _blocks,
    _eval_of,
    _fragments,
    _normalise_duration,
    _params,
    _result_model,
    _run_source,
    _source,
    _without_latency,
)


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("evals:\n  - input: Hi\n    ground_truth: hi\n", "a suite, with name added"),
        ("iterations: 3\n", "a suite, with name and evals added"),
        ("checks:\n  - match: '*a*'\n", "one eval"),
        ("- input: Hi\n  ground_truth: hi\n- prompt: Hi\n  checks: [{match: a}]\n", "a list of evals"),
        ("- match: '*a*'\n- prompt: Again\n  checks: [{match: a}]\n", "a list of checks"),
        ("on: push\njobs: {test: {runs-on: ubuntu-latest}}\n", "unknown"),
    ],
)
# --- (e) every suite or fragment of one in README.md and docs/*.md passes evalvalidate ----------------------


def test_fragments_are_wrapped_into_the_smallest_suite(body, rule):
    block = Block(README, 0, 1, "yaml", body, ())
    text, found = _as_suite(block)
    assert found == rule
    if text is not None:
        assert load_suite(text).evals
        assert body.splitlines()[0].lstrip("- ") in text


def test_the_readme_examples_are_all_validated():
    """The README's suite-format section shows a whole suite, then fragments: none of them may be skipped."""
    rules = [_as_suite(b)[1] for b in _blocks(README) if b.lang in YAML_LANGS]
    assert len(rules) >= 3 and all(rule.startswith("a suite") for rule in rules), rules


@pytest.mark.parametrize("block", _params([b for b in _all_blocks() if b.is_output]))
# --- (d) the outputs shown are what the engine produces today ----------------------------------------------


def test_outputs_are_real(block):
    report = _run_source(block)
    if block.body.startswith("Suite: "):
        actual = format_report(report)
        assert _normalise_duration(block.body.strip()) == _normalise_duration(actual.strip())
    else:
        runs_of = Counter(result.index for result in report.evals)
        assert block.body.strip() == "\n\n".join(
            format_eval(result, runs_of[result.index]) for result in report.evals
        )


def test_the_demo_report_is_documented():
    demo = [b for b in _blocks(SUITE_DOC) if b.is_output and b.mark("suite") == DEMO]
    assert demo and demo[0].body.startswith("Suite: "), "the evalrun sample of the demo went missing"
    assert DEMO in SUITE_DOC.read_text(encoding="utf-8")
    assert DEMO in RESULTS_DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("block", _params([b for b in _blocks(SUITE_DOC) if b.mark("sent") is not None]))
def test_sent_messages_are_real(block):
    source, files, _ = _source(block)
    suite = load_suite(source, files=files)
    sent, _ = build_history(suite.system, suite.evals[0].messages, files)
    assert json.loads(block.body) == sent


def test_results_example_is_a_complete_real_report():
    documents = [b for b in _blocks(RESULTS_DOC) if b.lang == "json" and '"format"' in b.body]
    assert len(documents) == 1, "expected one full evalsite.results/1 example"
    example = json.loads(documents[0].body)
    assert example["format"] == results.RESULTS_FORMAT
    # Every field present, none extra: what the model writes is exactly what the example shows.
    assert results.RunReport.model_validate(example).model_dump(mode="json") == example

    actual = _run_source(documents[0]).model_dump(mode="json")
    assert example["evals"], "the example shows no eval"
    for shown in example["evals"]:
        assert _without_latency(shown) == _without_latency(_eval_of(actual, shown))
    assert len(example["evals"]) == len(actual["evals"]), "the example leaves out evals of the run"
    for key in ("format", "suite", "model", "endpoint", "mock", "status", "gates", "iterated"):
        assert example[key] == actual[key]
    assert example["gates"], "the example shows no gate"
    shown_totals = {k: v for k, v in example["totals"].items() if k != "duration_s"}
    real_totals = {k: v for k, v in actual["totals"].items() if k != "duration_s"}
    assert shown_totals == real_totals


def test_results_fragments_are_marked():
    fragments = _fragments()
    assert all(b.mark("model") for b in fragments), "mark every JSON fragment with <!-- model: Name -->"
    assert {b.mark("model") for b in fragments} >= {"CheckResult", "EvalResult", "IteratedResult"}
    shown = [json.loads(b.body) for b in fragments if b.mark("model") == "EvalResult"]
    assert {e["conversation"] for e in shown} >= {"tree", "simulated"}, "a simulated EvalResult went missing"
    checks = [json.loads(b.body) for b in fragments if b.mark("model") == "CheckResult"]
    assert any(c["type"] == "llm_judge" and c["children"] for c in checks), "weighted criteria went missing"


@pytest.mark.parametrize("block", _params(_fragments()))
def test_results_fragments_are_valid(block):
    model = _result_model(block.mark("model") or "")
    doc = json.loads(block.body)
    assert model.model_validate(doc).model_dump(mode="json") == doc
    if block.mark("suite") is not None:
        report = _run_source(block).model_dump(mode="json")
        if model is results.EvalResult:
            assert _without_latency(doc) == _without_latency(_eval_of(report, doc))
        else:
            assert model is stats.IteratedResult, "only EvalResult and IteratedResult fragments have a suite"
            assert doc in report["iterated"], "this IteratedResult is not what the run gives"
