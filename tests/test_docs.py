"""Keep docs/suite-format.md and docs/results-format.md true to the code.

Every field of the format must be documented, every complete suite shown must load, every suite marked
`<!-- invalid -->` must be rejected (with exactly the error text shown after it, when one is shown), and
the sample report and results JSON must be what the engine produces today. No database is used.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine import results, schema
from engine.clients import EndpointRegistry, default_endpoint_from_env
from engine.loader import SuiteError, load_suite
from engine.report import format_eval, format_report
from engine.runner import run_suite

ROOT = Path(__file__).resolve().parent.parent
SUITE_DOC = ROOT / "docs" / "suite-format.md"
RESULTS_DOC = ROOT / "docs" / "results-format.md"
DEMO = ROOT / "examples" / "demo-mock.yaml"

SCHEMA_MODELS = {"Suite", "Eval", "Check", "SemanticSpec", "JudgeSpec", "MockSpec", "MockRule", "Metadata"}
RESULT_MODELS = [
    results.RunReport,
    results.SuiteRef,
    results.EvalResult,
    results.TurnRecord,
    results.CheckResult,
    results.Usage,
    results.Totals,
    results.RunTotals,
]

# A fenced block: optional marker comment on the line before, the info string, the body.
FENCE = re.compile(r"(?:^(<!--\s*invalid\s*-->)[ \t]*\n)?^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def _blocks(path: Path) -> list[dict]:
    return [
        {"invalid": bool(m.group(1)), "lang": m.group(2), "body": m.group(3), "line": _line(path, m.start())}
        for m in FENCE.finditer(path.read_text(encoding="utf-8"))
    ]


def _line(path: Path, offset: int) -> int:
    return path.read_text(encoding="utf-8").count("\n", 0, offset) + 1


def _is_complete_suite(body: str) -> bool:
    lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and lines[0].startswith(("name:", "metadata:"))


def _backticked(path: Path) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", path.read_text(encoding="utf-8")))


def _field_names(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _mock_registry() -> EndpointRegistry:
    return EndpointRegistry(default=default_endpoint_from_env())


def _run_demo_without_latency() -> results.RunReport:
    suite = load_suite(DEMO.read_bytes(), filename=str(DEMO))
    assert suite.model == "mock" and suite.mock is not None
    suite.mock.latency_ms = 0  # the text report does not show latency; keep the test fast
    return run_suite(suite, _mock_registry())


# --- (a) every suite-format field is documented ------------------------------------------------------------


def test_schema_models_are_all_found():
    found = {
        name
        for name, obj in inspect.getmembers(schema, inspect.isclass)
        if issubclass(obj, BaseModel) and obj.__module__ == schema.__name__ and obj.model_fields
    }
    assert found == SCHEMA_MODELS


@pytest.mark.parametrize("model_name", sorted(SCHEMA_MODELS))
def test_suite_doc_names_every_schema_field(model_name):
    model = getattr(schema, model_name)
    names = _field_names(model)
    assert names, f"{model_name} has no fields"
    if model_name == "Check":
        assert "or" in names and "or_" not in names
    missing = [name for name in names if name not in _backticked(SUITE_DOC)]
    assert not missing, f"docs/suite-format.md does not mention {model_name} fields: {missing}"


def test_suite_doc_names_every_check_key():
    assert set(schema.CHECK_KEYS) <= _backticked(SUITE_DOC)


# --- (b) every results-format field is documented ----------------------------------------------------------


@pytest.mark.parametrize("model", RESULT_MODELS, ids=lambda model: model.__name__)
def test_results_doc_names_every_result_field(model):
    names = _field_names(model)
    assert names, f"{model.__name__} has no fields"
    missing = [name for name in names if name not in _backticked(RESULTS_DOC)]
    assert not missing, f"docs/results-format.md does not mention {model.__name__} fields: {missing}"


def test_results_doc_names_the_format_version():
    assert results.RESULTS_FORMAT in _backticked(RESULTS_DOC)


# --- (c) the YAML examples load, the invalid ones fail with the errors shown -------------------------------


def test_suite_doc_has_enough_examples():
    blocks = _blocks(SUITE_DOC)
    valid = [b for b in blocks if b["lang"] == "yaml" and not b["invalid"] and _is_complete_suite(b["body"])]
    invalid = [b for b in blocks if b["invalid"]]
    assert len(valid) >= 8, "the complete-suite examples went missing"
    assert len(invalid) >= 4, "the invalid examples went missing"
    assert all(b["lang"] == "yaml" for b in invalid), "<!-- invalid --> must precede a ```yaml block"


def _suite_blocks():
    return [
        pytest.param(b, id=f"line-{b['line']}")
        for b in _blocks(SUITE_DOC)
        if b["lang"] == "yaml" and not b["invalid"] and _is_complete_suite(b["body"])
    ]


def _invalid_blocks():
    blocks = _blocks(SUITE_DOC)
    out = []
    for index, block in enumerate(blocks):
        if block["invalid"]:
            following = blocks[index + 1] if index + 1 < len(blocks) else None
            expected = following["body"] if following and following["lang"] == "text" else None
            out.append(pytest.param(block, expected, id=f"line-{block['line']}"))
    return out


@pytest.mark.parametrize("block", _suite_blocks())
def test_complete_suite_examples_load(block):
    suite = load_suite(block["body"])
    assert suite.name and suite.evals


@pytest.mark.parametrize(("block", "expected"), _invalid_blocks())
def test_invalid_examples_are_rejected(block, expected):
    with pytest.raises(SuiteError) as caught:
        load_suite(block["body"])
    if expected is not None:
        assert str(caught.value) == expected.strip()


# --- the pasted outputs are what the engine prints today ---------------------------------------------------


def _normalise_duration(text: str) -> str:
    return re.sub(r", \d+\.\ds$", ", <duration>s", text, flags=re.M)


def test_cli_sample_is_the_real_report():
    sample = next(
        (b["body"] for b in _blocks(SUITE_DOC) if b["lang"] == "text" and b["body"].startswith("Suite: ")),
        None,
    )
    assert sample is not None, "the evalrun sample is missing from docs/suite-format.md"
    actual = format_report(_run_demo_without_latency())
    assert _normalise_duration(sample.strip()) == _normalise_duration(actual.strip())


def _transcript_examples():
    blocks = _blocks(SUITE_DOC)
    return [
        pytest.param(block["body"], following["body"], id=f"line-{block['line']}")
        for block, following in zip(blocks, blocks[1:], strict=False)
        if block["lang"] == "yaml"
        and not block["invalid"]
        and _is_complete_suite(block["body"])
        and following["lang"] == "text"
        and following["body"].startswith("Eval ")
    ]


def test_suite_doc_has_a_transcript_example():
    assert _transcript_examples(), "the worked example's transcript went missing"


@pytest.mark.parametrize(("source", "transcript"), _transcript_examples())
def test_transcript_examples_are_real(source, transcript):
    suite = load_suite(source)
    assert suite.model == "mock", "transcript examples must run offline on the mock"
    report = run_suite(suite, _mock_registry())
    assert "\n\n".join(format_eval(result) for result in report.evals) == transcript.strip()


def test_demo_is_the_one_documented():
    assert "examples/demo-mock.yaml" in SUITE_DOC.read_text(encoding="utf-8")
    assert "examples/demo-mock.yaml" in RESULTS_DOC.read_text(encoding="utf-8")


def _json_blocks() -> list[dict]:
    return [json.loads(b["body"]) for b in _blocks(RESULTS_DOC) if b["lang"] == "json"]


def test_results_example_is_a_complete_real_report():
    documents = [doc for doc in _json_blocks() if doc.get("format") == results.RESULTS_FORMAT]
    assert len(documents) == 1, "expected one full evalsite.results/1 example"
    example = documents[0]
    # Every field present, none extra: what the model writes is exactly what the example shows.
    assert results.RunReport.model_validate(example).model_dump(mode="json") == example

    actual = _run_demo_without_latency().model_dump(mode="json")
    assert example["evals"], "the example shows no eval"
    for shown in example["evals"]:
        real = actual["evals"][shown["index"]]
        for turn in (*shown["turns"], *real["turns"]):
            turn.pop("latency_ms")
        assert shown == real
    for key in ("format", "suite", "model", "endpoint", "mock", "status"):
        assert example[key] == actual[key]
    shown_totals = {k: v for k, v in example["totals"].items() if k != "duration_s"}
    real_totals = {k: v for k, v in actual["totals"].items() if k != "duration_s"}
    assert shown_totals == real_totals


def test_results_check_examples_are_valid_check_results():
    checks = [doc for doc in _json_blocks() if "format" not in doc]
    assert {doc["type"] for doc in checks} >= {"or", "llm_judge"}
    for doc in checks:
        assert results.CheckResult.model_validate(doc).model_dump(mode="json") == doc
