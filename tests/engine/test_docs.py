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

import enum
import functools
import inspect
import json
import re
import typing
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from engine import conditions, datasets, grading, judge, results, schema, simulate, stats
from engine.attached import read_suite_files
from engine.clients import EndpointRegistry, default_endpoint_from_env
from engine.history import build_history
from engine.loader import file_references, is_calibration, load_suite
from engine.report import format_eval, format_report
from engine.runner import run_suite
from engine.source import SuiteError

ROOT = Path(__file__).resolve().parents[2]
SUITE_DOC = ROOT / "docs" / "suite-format.md"
RESULTS_DOC = ROOT / "docs" / "results-format.md"
DOCS = (SUITE_DOC, RESULTS_DOC)
DEMO = "examples/demo-mock.yaml"

SCHEMA_MODELS = {
    "Suite",
    "Eval",
    "NamedGrader",
    "WeightedPassRule",
    "Check",
    "SemanticSpec",
    "JudgeSpec",
    "MockSpec",
    "MockRule",
    "Metadata",
    "Extractor",
    "ContentPart",
    "Message",
    "ScriptedTurn",
    "Gate",
    "Condition",
    "NaturalLanguage",
    "FieldEquals",
    "CheckFields",
    "PersonaStage",
    "FollowUpInput",
    "Simulate",
    "Criterion",
    "CodeSpec",
}
RESULT_MODELS = [
    results.RunReport,
    results.SuiteRef,
    results.EvalResult,
    results.TurnRecord,
    results.TurnGrade,
    results.CheckResult,
    results.ConditionResult,
    results.SimulatedUserCall,
    results.GateResult,
    results.Usage,
    results.Totals,
    results.RunTotals,
    stats.IteratedResult,
    stats.IterationStats,
]
MARKS = {"invalid", "files", "file", "suite", "sent", "model", "not-suite"}
README = ROOT / "README.md"
ALL_DOCS = (README, *sorted((ROOT / "docs").glob("*.md")))
EXAMPLES = ROOT / "examples"

# A fenced block: an optional marker comment on the line before, the info string, the body.
FENCE = re.compile(
    r"(?:^<!--(?P<marks>[^\n]*?)-->[ \t]*\n)?^```(?P<lang>\w*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S
)


@dataclass(frozen=True)
class Block:
    doc: Path
    index: int
    line: int
    lang: str
    body: str
    marks: tuple[tuple[str, str], ...]

    def mark(self, key: str) -> str | None:
        return dict(self.marks).get(key)

    @property
    def where(self) -> str:
        return f"{self.doc.name}:{self.line}"

    @property
    def invalid(self) -> bool:
        return self.mark("invalid") is not None

    @property
    def needs(self) -> list[str]:
        return [name.strip() for name in (self.mark("files") or "").split(",") if name.strip()]

    @property
    def is_suite(self) -> bool:
        return self.lang == "yaml" and not self.invalid and _is_complete_suite(self.body)

    @property
    def is_output(self) -> bool:
        return self.lang == "text" and self.body.startswith(("Suite: ", "Eval "))


def _marks(text: str | None) -> tuple[tuple[str, str], ...]:
    marks = []
    for part in (text or "").split(";"):
        key, _, value = part.strip().partition(":")
        if key.strip():
            marks.append((key.strip(), value.strip()))
    return tuple(marks)


@functools.cache
def _blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [
        Block(path, index, text.count("\n", 0, m.start()) + 1, m["lang"], m["body"], _marks(m["marks"]))
        for index, m in enumerate(FENCE.finditer(text))
    ]


def _all_blocks() -> list[Block]:
    return [block for doc in DOCS for block in _blocks(doc)]


def _is_complete_suite(body: str) -> bool:
    lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and lines[0].startswith(("name:", "metadata:"))


def _backticked(path: Path) -> set[str]:
    """Texts in backticks; a JSON string (`"tree"`) also counts as its value."""
    found = set(re.findall(r"`([^`\n]+)`", path.read_text(encoding="utf-8")))
    return found | {text[1:-1] for text in found if len(text) > 2 and text[0] == text[-1] == '"'}


def _field_names(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _literal_values(model: type[BaseModel]) -> set[str]:
    """Every fixed value a field of the model can take (its Literal and enum types)."""
    found: set[str] = set()

    def walk(annotation) -> None:
        if typing.get_origin(annotation) is typing.Literal:
            found.update(str(value) for value in typing.get_args(annotation))
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            found.update(str(member.value) for member in annotation)
        for arg in typing.get_args(annotation):
            walk(arg)

    for field in model.model_fields.values():
        walk(field.annotation)
    return found


def _mock_registry() -> EndpointRegistry:
    return EndpointRegistry(default=default_endpoint_from_env())


def _files_for(block: Block) -> dict[str, str]:
    """The attached files a suite block names, from the `file:` blocks after it."""
    files = {}
    for name in block.needs:
        given = next((b for b in _blocks(block.doc)[block.index + 1 :] if b.mark("file") == name), None)
        assert given is not None, f"{block.where}: no block marked `<!-- file: {name} -->` after the suite"
        files[name] = given.body
    return files


def _next_block(block: Block) -> Block | None:
    """The block after `block`, skipping the attached files shown in between."""
    return next((b for b in _blocks(block.doc)[block.index + 1 :] if b.mark("file") is None), None)


def _source(block: Block) -> tuple[str, dict[str, str], str]:
    """The suite an output comes from: (YAML, attached files, where it is)."""
    named = block.mark("suite")
    if named:
        path = ROOT / named
        data = path.read_text(encoding="utf-8")
        return data, read_suite_files(path, data), named
    suite = next((b for b in reversed(_blocks(block.doc)[: block.index]) if b.is_suite), None)
    assert suite is not None, f"{block.where}: no complete suite above this output"
    return suite.body, _files_for(suite), suite.where


@functools.cache
def _run(source: str, files: tuple[tuple[str, str], ...]) -> results.RunReport:
    suite = load_suite(source, files=dict(files))
    assert suite.model == "mock", "outputs in the docs must come from offline runs on the mock"
    if suite.mock is not None:
        suite.mock.latency_ms = 0  # latency is not compared; keep the test fast
    return run_suite(suite, _mock_registry(), files=dict(files))


def _run_source(block: Block) -> results.RunReport:
    source, files, _ = _source(block)
    return _run(source, tuple(sorted(files.items())))


def _params(blocks: list[Block]) -> list:
    return [pytest.param(block, id=block.where) for block in blocks]


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


def _prose(path: Path) -> str:
    """The doc's text with quote markers and line breaks folded away, to find a wrapped sentence."""
    text = re.sub(r"^> ?", "", path.read_text(encoding="utf-8"), flags=re.M)
    return " ".join(text.split())


def _folded(text: str) -> str:
    return " ".join(text.split())


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


def _invalid_blocks():
    out = []
    for block in _all_blocks():
        if block.invalid:
            following = _next_block(block)
            expected = following.body if following and following.lang == "text" else None
            out.append(pytest.param(block, expected, id=block.where))
    return out


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


def _coming_next() -> str:
    text = SUITE_DOC.read_text(encoding="utf-8")
    return text.split("\n## Coming next", 1)[1] if "\n## Coming next" in text else ""


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


# --- (e) every suite or fragment of one in README.md and docs/*.md passes evalvalidate ----------------------

YAML_LANGS = ("yaml", "yml")
SUITE_KEYS = set(_field_names(schema.Suite))
EVAL_KEYS = set(_field_names(schema.Eval))
CHECK_KEYS = set(_field_names(schema.Check))
DRIVERS = {"prompt", "input", "turns", "messages"}
# The smallest suite around a fragment: what the fragment leaves out.
WRAP_NAME = "name: documented-example"
WRAP_EVALS = "evals: [{input: Hi, ground_truth: hi}]"


def _indent(text: str, first: str, rest: str) -> str:
    head, *tail = text.rstrip("\n").splitlines()
    return "\n".join([first + head, *(rest + line if line.strip() else line for line in tail)]) + "\n"


def _as_suite(block: Block) -> tuple[str | None, str]:
    """The block as a whole suite for evalvalidate (None: skipped), and the rule that decided it."""
    if block.invalid:
        return None, "marked invalid: test_invalid_examples_are_rejected checks that it is rejected"
    if block.mark("not-suite") is not None:
        return None, "marked not-suite"
    try:
        data = yaml.load(block.body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return block.body, "not YAML: validated as written, so that the error shows"
    keys = set(data) if isinstance(data, dict) else None
    if is_calibration(data) and "name" in keys:
        return block.body, "a calibration set"
    items = data if isinstance(data, list) and all(isinstance(item, dict) for item in data) else None
    if keys is not None and (keys & {"name", "metadata", "evals", "dataset"} or keys <= SUITE_KEYS):
        added = [WRAP_NAME] if not keys & {"name", "metadata"} else []
        added += [WRAP_EVALS] if not keys & {"evals", "dataset"} else []
        rule = "a suite" + (f", with {' and '.join(a.split(':')[0] for a in added)} added" if added else "")
        return block.body + "".join(line + "\n" for line in added), rule
    if keys is not None and keys <= EVAL_KEYS:
        driver = "" if keys & DRIVERS else "    input: Hi\n" if "ground_truth" in keys else "    prompt: Hi\n"
        return f"{WRAP_NAME}\nevals:\n" + _indent(block.body, "  - ", "    ") + driver, "one eval"
    if items and all(item.keys() <= EVAL_KEYS and item.keys() & DRIVERS for item in items):
        return f"{WRAP_NAME}\nevals:\n" + _indent(block.body, "  ", "  "), "a list of evals"
    if items and all(item.keys() <= CHECK_KEYS for item in items):
        wrapped = f"{WRAP_NAME}\nevals:\n  - prompt: Hi\n    checks:\n" + _indent(
            block.body, "      ", "      "
        )
        return wrapped, "a list of checks"
    return None, "unknown"


def _attached(block: Block, text: str) -> dict[str, str]:
    """The files the suite names: shown in the doc (`<!-- file: -->`), else the one in examples/."""
    files = _files_for(block)
    for name in file_references(text):
        if name not in files:
            example = EXAMPLES / name
            assert example.is_file(), (
                f"{block.where}: the example uses `{name}`, which is neither shown in a `<!-- file: {name} -->` "
                "block nor in examples/"
            )
            files[name] = example.read_text(encoding="utf-8")
    return files


def _yaml_blocks() -> list:
    return _params([b for doc in ALL_DOCS for b in _blocks(doc) if b.lang in YAML_LANGS])


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


# --- (d) the outputs shown are what the engine produces today ----------------------------------------------


def _normalise_duration(text: str) -> str:
    return re.sub(r", \d+\.\ds$", ", <duration>s", text, flags=re.M)


@pytest.mark.parametrize("block", _params([b for b in _all_blocks() if b.is_output]))
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


def _without_latency(evaluation: dict) -> dict:
    evaluation = json.loads(json.dumps(evaluation))
    for turn in evaluation["turns"]:
        turn.pop("latency_ms")
    return evaluation


def _eval_of(report: dict, shown: dict) -> dict:
    """The eval of a real run that a documented EvalResult stands for: same index, same iteration."""
    found = [
        e for e in report["evals"] if (e["index"], e["iteration"]) == (shown["index"], shown["iteration"])
    ]
    assert len(found) == 1, f"no eval {shown['index']} iteration {shown['iteration']} in the run"
    return found[0]


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


def _fragments():
    return [b for b in _blocks(RESULTS_DOC) if b.lang == "json" and '"format"' not in b.body]


def test_results_fragments_are_marked():
    fragments = _fragments()
    assert all(b.mark("model") for b in fragments), "mark every JSON fragment with <!-- model: Name -->"
    assert {b.mark("model") for b in fragments} >= {"CheckResult", "EvalResult", "IteratedResult"}
    shown = [json.loads(b.body) for b in fragments if b.mark("model") == "EvalResult"]
    assert {e["conversation"] for e in shown} >= {"tree", "simulated"}, "a simulated EvalResult went missing"
    checks = [json.loads(b.body) for b in fragments if b.mark("model") == "CheckResult"]
    assert any(c["type"] == "llm_judge" and c["children"] for c in checks), "weighted criteria went missing"


def _result_model(name: str) -> type[BaseModel]:
    model = getattr(results, name, None) or getattr(stats, name, None)
    assert isinstance(model, type) and issubclass(model, BaseModel), f"no results model {name!r}"
    return model


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
