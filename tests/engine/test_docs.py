"""Keep docs/suite-format.md and docs/results-format.md true to the code.

Every field and every fixed value of the formats must be documented, every complete suite shown must load,
every suite marked invalid must be rejected (with exactly the error text shown after it, when one is
shown), every output shown must be what the engine produces today, and what the docs announce as "coming
next" must still be rejected. No database is used.

An HTML comment on the line just before a fenced block says what the block is; directives combine with `;`:

- `<!-- invalid -->`: a suite that must not load; a ```text block right after it holds the exact errors.
- `<!-- files: a.jsonl, b.md -->`: the suite needs these attached files. Each is given further down in a
  block marked `<!-- file: a.jsonl -->` (the first such block after the suite).
- `<!-- file: a.jsonl -->`: the content of an attached file.
- `<!-- suite: examples/demo-mock.yaml -->`: an output produced by that file (relative to the repository,
  attached files read from its folder as `evalrun` reads them), not by the suite shown above it.
- `<!-- sent -->`: JSON, the messages sent before the live turns of the first eval of the suite above.
- `<!-- model: CheckResult -->`: JSON, a fragment of the results format (an `EvalResult` or
  `IteratedResult` fragment with `suite:` must equal that eval, or that iteration of it, of a real run).
- `<!-- not-suite -->`: YAML that is no part of a suite (a CI job, say), so `evalvalidate` leaves it alone.

Every ```yaml block of README.md and docs/*.md not marked `invalid` or `not-suite` must pass `evalvalidate`
as a user runs it, attached files read from the suite's folder: a whole suite as written, a fragment (one
eval, a list of evals or of checks, suite keys without `name`) wrapped into the smallest suite around it.

Outputs are ```text blocks starting with `Suite: ` (a whole report) or `Eval ` (every eval's transcript),
and the one full `evalsite.results/1` JSON document; each is compared with a real run, on the mock, of the
nearest complete suite above it (or of its `suite:`).
"""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel

from engine import conditions, datasets, grading, judge, results, schema, simulate
from engine.loader import load_suite
from engine.source import SuiteError
from tests.engine.doc_blocks import (
    ALL_DOCS,
    DOCS,
    MARKS,
    RESULT_MODELS,
    RESULTS_DOC,
    SCHEMA_MODELS,
    SUITE_DOC,
    YAML_LANGS,
    _all_blocks,
    _backticked,
    _blocks,
    _coming_next,
    _field_names,
    _files_for,
    _folded,
    _invalid_blocks,
    _literal_values,
    _params,
    _prose,
)

# --- (a) every suite-format field and value is documented -------------------------------------------------


def test_schema_models_are_all_found():
    found = {
        name
        for name, obj in inspect.getmembers(schema, inspect.isclass)
        if issubclass(obj, BaseModel)
        and obj.__module__.startswith(f"{schema.__name__}.")  # defined in the package's modules
        and obj.model_fields
    }
    assert found == SCHEMA_MODELS


@pytest.mark.parametrize("model_name", sorted(SCHEMA_MODELS))
def test_suite_doc_names_every_schema_field(model_name):
    model = getattr(schema, model_name)
    names = _field_names(model)
    assert names, f"{model_name} has no fields"
    if model_name == "Check":
        assert "or" in names and "or_" not in names
    if model_name == "Condition":
        assert {"all", "any", "not"} <= set(names) and "all_" not in names
    missing = [name for name in names if name not in _backticked(SUITE_DOC)]
    assert not missing, f"docs/suite-format.md does not mention {model_name} fields: {missing}"


@pytest.mark.parametrize("model_name", sorted(SCHEMA_MODELS))
def test_suite_doc_names_every_fixed_value(model_name):
    values = _literal_values(getattr(schema, model_name))
    missing = sorted(values - _backticked(SUITE_DOC))
    assert not missing, f"docs/suite-format.md does not mention {model_name} values: {missing}"


def test_suite_doc_names_every_check_grader_extractor_and_row_key():
    named = _backticked(SUITE_DOC)
    assert set(schema.CHECK_KEYS) <= named
    assert set(schema.GRADERS) <= named
    assert set(schema.EXTRACTORS) <= named
    assert set(datasets.ROW_KEYS) <= named
    assert {"{" + name + "}" for name in schema.RUBRIC_PLACEHOLDERS} <= named
    assert set(schema.CONDITION_KEYS) <= named
    assert set(schema.SCALES) <= named


def test_suite_doc_quotes_the_prompts_sent_to_models():
    prose = _prose(SUITE_DOC)
    for text in (
        judge.JUDGE_SYSTEM,
        conditions.NATURAL_LANGUAGE_SYSTEM,
        simulate.SIMULATOR_INSTRUCTIONS,
        simulate.SIMULATOR_ASK,
        judge.REASK,  # asked of a judge whose answer could not be read, with its placeholders
        grading.RUBRIC_JSON,
        *(f"The score is {words}." for scale, words in judge.SCALE_WORDS.items() if scale != "0-1"),
    ):
        assert _folded(text) in prose, f"docs/suite-format.md does not quote: {text!r}"


def test_docs_name_the_termination_reasons_and_iterated_kinds():
    for doc in DOCS:
        named = _backticked(doc)
        assert {"inputs exhausted", "error"} <= named, doc.name
        assert any(text.startswith("condition met: ") for text in named), doc.name
        assert any(text.startswith("max turns (") for text in named), doc.name
    assert {"single-turn-iterated", "multi-turn-iterated", "criterion"} <= _backticked(RESULTS_DOC)


# --- (b) every results-format field and value is documented -----------------------------------------------


@pytest.mark.parametrize("model", RESULT_MODELS, ids=lambda model: model.__name__)
def test_results_doc_names_every_result_field(model):
    names = _field_names(model)
    assert names, f"{model.__name__} has no fields"
    missing = [name for name in names if name not in _backticked(RESULTS_DOC)]
    assert not missing, f"docs/results-format.md does not mention {model.__name__} fields: {missing}"


@pytest.mark.parametrize("model", RESULT_MODELS, ids=lambda model: model.__name__)
def test_results_doc_names_every_fixed_value(model):
    missing = sorted(_literal_values(model) - _backticked(RESULTS_DOC))
    assert not missing, f"docs/results-format.md does not mention {model.__name__} values: {missing}"


def test_results_doc_names_the_format_version():
    assert results.RESULTS_FORMAT in _backticked(RESULTS_DOC)


# --- (c) the YAML examples load, the invalid ones fail with the errors shown -------------------------------


def test_markers_are_known_and_well_placed():
    for block in [b for doc in ALL_DOCS for b in _blocks(doc)]:
        unknown = {key for key, _ in block.marks} - MARKS
        assert not unknown, f"{block.where}: unknown marker {sorted(unknown)}"
        if block.invalid:
            assert block.lang == "yaml", f"{block.where}: <!-- invalid --> must precede a ```yaml block"
        if block.needs:
            assert block.lang == "yaml", f"{block.where}: <!-- files: ... --> must precede a ```yaml block"
        if block.mark("not-suite") is not None:
            assert block.lang in YAML_LANGS, f"{block.where}: <!-- not-suite --> must precede a ```yaml block"


def test_every_attached_file_shown_is_used():
    for doc in DOCS:
        needed = {name for block in _blocks(doc) for name in block.needs}
        shown = {block.mark("file") for block in _blocks(doc) if block.mark("file") is not None}
        assert shown <= needed, f"{doc.name}: file blocks no suite attaches: {sorted(shown - needed)}"


def test_suite_doc_has_enough_examples():
    blocks = _blocks(SUITE_DOC)
    valid = [b for b in blocks if b.is_suite]
    assert len(valid) >= 20, "the complete-suite examples went missing"
    assert len([b for b in valid if b.needs]) >= 3, "the examples with attached files went missing"
    assert len([b for b in blocks if b.invalid]) >= 8, "the invalid examples went missing"
    assert len([b for b in blocks if b.is_output]) >= 6, "the outputs went missing"


@pytest.mark.parametrize("block", _params([b for b in _all_blocks() if b.is_suite]))
def test_complete_suite_examples_load(block):
    suite = load_suite(block.body, files=_files_for(block))
    assert suite.name and suite.evals


@pytest.mark.parametrize(("block", "expected"), _invalid_blocks())
def test_invalid_examples_are_rejected(block, expected):
    with pytest.raises(SuiteError) as caught:
        load_suite(block.body, files=_files_for(block))
    if expected is not None:
        assert str(caught.value) == expected.strip()


NOT_YET: dict[str, str] = {
    # key: the smallest suite using it; each must still be rejected while the docs list it as coming next.
    # Nothing is announced today: everything the product brief described is implemented (see IMPLEMENTED).
}


IMPLEMENTED = {
    # Keys the docs must not announce as coming next: each loads.
    "simulate": "evals:\n  - prompt: Hi\n    simulate: {persona: a traveller, stop_when: {contains: booked}}\n",
    "iterations": "iterations: 3\nevals:\n  - input: Hi\n    ground_truth: hi\n    iterations: 2\n",
    "field_equals": "evals:\n  - input: Hi\n    checks: [{field_equals: {path: a, value: b}}]\n",
    "field_is_set": "evals:\n  - input: Hi\n    checks: [{field_is_set: a}]\n",
    "scale": "evals:\n  - input: Hi\n    checks: [{llm_judge: {criteria: ok, scale: 0-100}}]\n",
    "scope": "evals:\n  - input: Hi\n    checks: [{llm_judge: {criteria: ok, scope: conversation}}]\n",
    "criteria": "evals:\n  - input: Hi\n    checks: [{llm_judge: {criteria: [{criteria: ok}, {criteria: polite}]}}]\n",
}


def test_coming_next_is_not_implemented():
    coming = _coming_next()
    for key, source in NOT_YET.items():
        assert f"`{key}`" in coming, f"`{key}` is not listed under Coming next"
        with pytest.raises(SuiteError):
            load_suite("name: coming-next\nmodel: mock\n" + source)
    if not NOT_YET:
        assert not coming, "Coming next announces something; list its keys in NOT_YET"


@pytest.mark.parametrize("key", sorted(IMPLEMENTED))
def test_implemented_is_no_longer_coming_next(key):
    assert f"`{key}`" not in _coming_next(), f"`{key}` is implemented: take it out of Coming next"
    suite = load_suite("name: implemented\nmodel: mock\n" + IMPLEMENTED[key])
    assert suite.evals
    assert f"`{key}`" in SUITE_DOC.read_text(encoding="utf-8")
