"""Reading the docs' fenced blocks and their marks, and turning a documented fragment into a suite to load or run."""

from __future__ import annotations

import enum
import functools
import json
import re
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from engine import gates, results, schema, stats
from engine.attached import read_suite_files
from engine.clients import EndpointRegistry, default_endpoint_from_env
from engine.loader import file_references, is_calibration, load_suite
from engine.runner import run_suite

ROOT = Path(__file__).resolve().parents[2]


SUITE_DOC = ROOT / "docs" / "suite-format.md"


RESULTS_DOC = ROOT / "docs" / "results-format.md"


DOCS = (SUITE_DOC, RESULTS_DOC)


DEMO = "examples/demo-mock.yaml"


SCHEMA_MODELS = {
    "Suite",
    "ModelSettings",
    "CacheRoles",
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
    "Tool",
    "ToolRule",
    "ToolItem",
    "LlmTool",
    "McpServer",
    "ToolCalled",
    "ToolCallPattern",
    "ToolNotCalled",
    "ToolResult",
    "ToolSequence",
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
    results.ToolRound,
    results.ToolCall,
    gates.GateResult,
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


def _prose(path: Path) -> str:
    """The doc's text with quote markers and line breaks folded away, to find a wrapped sentence."""
    text = re.sub(r"^> ?", "", path.read_text(encoding="utf-8"), flags=re.M)
    return " ".join(text.split())


def _folded(text: str) -> str:
    return " ".join(text.split())


def _invalid_blocks():
    out = []
    for block in _all_blocks():
        if block.invalid:
            following = _next_block(block)
            expected = following.body if following and following.lang == "text" else None
            out.append(pytest.param(block, expected, id=block.where))
    return out


def _coming_next() -> str:
    text = SUITE_DOC.read_text(encoding="utf-8")
    return text.split("\n## Coming next", 1)[1] if "\n## Coming next" in text else ""


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


def _normalise_duration(text: str) -> str:
    return re.sub(r", \d+\.\ds$", ", <duration>s", text, flags=re.M)


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


def _fragments():
    return [b for b in _blocks(RESULTS_DOC) if b.lang == "json" and '"format"' not in b.body]


def _result_model(name: str) -> type[BaseModel]:
    model = getattr(results, name, None) or getattr(stats, name, None)
    assert isinstance(model, type) and issubclass(model, BaseModel), f"no results model {name!r}"
    return model
