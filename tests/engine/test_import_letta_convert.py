"""Import: Letta Evals folders converted to evalsite suites: datasets, graders and gates."""

from __future__ import annotations

import json

import pytest
import yaml

from engine.imports import ImportProblem, convert, detect
from engine.imports.letta.rubrics import WRAPPED_SYSTEM
from engine.loader import load_suite
from tests.engine.import_fixtures import FIXTURES, folder, has


def test_letta_per_turn_suite_and_dataset_convert_with_gate_and_report():
    files = folder("letta-per-turn")
    assert detect(files) == "letta"
    result = convert(files)
    assert list(result.files) == ["dataset.jsonl"] and result.needs_files == []
    suite = load_suite(result.source, files=result.files)
    assert suite.name == "multiturn-per-turn-grading-test"
    assert suite.description.startswith("Test if agent answers")
    # the agent becomes the model it ran on (the first of its model handles)
    assert (suite.grader, suite.extractor, suite.model) == ("contains", None, "openai/gpt-4.1-mini")
    assert [(g.metric, g.op, g.value) for g in suite.gates] == [("avg", ">=", 0.6)]
    assert [ev.id for ev in suite.evals] == ["sample-0", "sample-1", "sample-2", "sample-3"]
    assert suite.evals[0].input == [
        "What is the capital of France?",
        "What is the capital of Germany?",
        "What is the capital of Italy?",
    ]
    assert suite.evals[0].ground_truth == ["Paris", "Berlin", "Rome"]  # per-turn grading
    assert suite.evals[1].tags == ["mixed"]
    assert (suite.evals[3].input, suite.evals[3].ground_truth) == (
        "What is the capital of Australia?",
        "Canberra",
    )
    rows = [json.loads(line) for line in result.files["dataset.jsonl"].splitlines()]
    assert "agent_args" not in rows[2]

    assert has(
        result.mapped,
        "graders.answer_check (tool contains, extractor last_assistant) → grader: contains",
        "the gate uses",
    )
    assert has(result.mapped, "gate (answer_check avg_score gte 0.6) → gates: avg >= 0.6")
    assert has(result.mapped, "3 rows with per-turn ground truths", "mean")
    assert has(result.mapped, "dataset: dataset.jsonl → dataset: dataset.jsonl (4 rows")
    assert has(
        result.unmapped, "target (kind letta_agent, agent_file test-qa-agent.af", "cannot run a Letta agent"
    )
    assert has(result.mapped, "target.model_handles[0] → model: openai/gpt-4.1-mini")
    assert has(result.unmapped, "target.model_handles[1:] (anthropic/claude-haiku-4-5)", "--model")
    # a grader reading the agent's memory is lost (it graded), the rest of the suite is kept
    assert has(result.lost, "graders.remembers_name", "memory_block", "no memory")
    assert suite.iterations == 3
    assert has(result.mapped, "num_runs: 3 → iterations: 3")
    assert not has(result.unmapped, "num_runs")
    assert has(result.unmapped, "max_concurrent: 8")
    assert has(result.unmapped, "agent_args holding only the agent's tags", "line 3")


def test_letta_rubric_grader_and_a_check_grader_with_rubric_vars_become_named_graders_per_row():
    """Two graders that convert (a model_judge and ascii_printable_only): both kept, by name; rows with
    rubric_vars get their own version of the judge (rows cannot carry graders, so they become evals)."""
    files = folder("letta-rubric")
    result = convert(files)
    assert result.needs_files == [] and list(result.files) == ["rubric.txt"]
    raw = yaml.safe_load(result.source)
    assert raw["graders"]["quality"] == {
        "kind": "llm_judge",
        "rubric_file": "rubric.txt",
        "model": "gpt-4o-mini",
        "temperature": 0.0,
        "threshold": 0.7,  # the accuracy condition's pass_threshold
    }
    assert raw["graders"]["ascii_only"] == {"kind": "check", "check": {"regex": r"\A[\x20-\x7E\r\n]*\Z"}}
    # A rubric without {input} / {submission} was written for the earlier Letta: its judge prompt holds the
    # rubric (literal braces kept), then the question, ground truth and submission, under its system message.
    filled = result.files["rubric.txt"].format(input="QQ", ground_truth="TT", submission="SS")
    assert '{"score": <0-1>, "rationale": "..."}' in filled
    assert "## Evaluation Rubric\nEvaluate the ASCII art drawing of a {subject}." in filled
    assert filled.index("Question Given to the Agent\nQQ") < filled.index("(Ground Truth)\nTT")
    assert filled.index("(Ground Truth)\nTT") < filled.index("(What You Are Evaluating)\nSS")
    assert raw["rubric_prompt"] == "as_written" and raw["judge_system"] == WRAPPED_SYSTEM
    # sample_tags [animals] keeps 4 of 5 rows, max_samples 3 the first three of those.
    assert [ev["id"] for ev in raw["evals"]] == ["sample-0", "sample-2", "sample-3"]
    cat, fish, _ = raw["evals"]
    assert cat["ground_truth"] == "" and "a cat." in cat["graders"]["quality"]["rubric"]
    assert "{ground_truth}" not in cat["graders"]["quality"]["rubric"]
    assert fish["ground_truth"] == "><(((('>" and "{ground_truth}" in fish["graders"]["quality"]["rubric"]
    assert fish["graders"]["quality"]["model"] == "gpt-4o-mini"
    assert raw["gates"] == [
        {
            "logical_and": [
                {"metric": "avg", "grader": "quality", "op": ">=", "value": 0.6},
                {"metric": "accuracy", "grader": "quality", "op": ">=", "value": 0.6},
                {"metric": "accuracy", "grader": "ascii_only", "op": ">=", "value": 0.9},
            ]
        }
    ]

    assert has(result.mapped, "graders.quality (model_judge", "an llm_judge grader")
    assert has(result.mapped, "graders.quality.model → graders.quality.model: gpt-4o-mini")
    assert has(result.mapped, "graders.quality.temperature → graders.quality.temperature: 0")
    assert has(
        result.mapped, "graders.ascii_only (tool ascii_printable_only) → graders.ascii_only: a regex check"
    )
    assert has(result.mapped, "sample_tags ['animals'] → kept the 4 of 5 rows")
    assert has(result.mapped, "max_samples: 3 → kept the first 3 of 4 rows")
    assert has(result.mapped, "gate.conditions[1]: accuracy 60 → 0.6")
    assert has(result.mapped, "gate pass_threshold 0.7 on quality → graders.quality.threshold: 0.7")
    assert has(result.mapped, "rubric_vars → filled into the row's own rubric", "line 1")
    assert has(result.mapped, "rows with their own rubric", "evals written in the suite")
    # what is converted is not said to be lost
    assert not has(result.unmapped, "ascii_only")
    assert not has(result.unmapped, "temperature")
    assert not has(result.unmapped, "more lenient")
    assert has(result.unmapped, "graders.quality.provider: openai")

    suite = load_suite(result.source, files=result.files)  # needs named graders (graders-engine)
    assert [ev.id for ev in suite.evals] == ["sample-0", "sample-2", "sample-3"]


def test_letta_single_judge_temperature_is_the_suite_judge_temperature():
    text = (FIXTURES / "letta-rubric" / "suite.yaml").read_text()
    text = (
        text[: text.index("  ascii_only:")]
        + "gate: {metric_key: quality, aggregation: avg_score, op: gte, value: 0.5}\n"
    )
    files = {**folder("letta-rubric"), "suite.yaml": text}
    result = convert(files)
    suite = load_suite(result.source, files=result.files)
    assert (suite.grader, suite.judge, suite.judge_temperature) == ("llm_judge", "gpt-4o-mini", 0.0)
    assert has(result.mapped, "graders.quality.temperature → judge_temperature: 0")
    assert not has(result.unmapped, "temperature")


def test_letta_two_graders_with_a_weighted_gate_and_num_runs_keep_their_meaning():
    """Issue 14's suite: a model_judge (prompt_path, model, temperature) and ascii_only, a weighted gate
    0.7/0.3 gte 0.75, num_runs 3."""
    files = folder("letta-multi-grader")
    result = convert(files)
    assert result.needs_files == [] and set(result.files) == {"quality.md", "dataset.jsonl"}
    raw = yaml.safe_load(result.source)
    assert raw["graders"] == {
        "quality": {
            "kind": "llm_judge",
            "rubric_file": "quality.md",
            "model": "gpt-4.1-mini",
            "temperature": 0.2,
        },
        "ascii_only": {"kind": "check", "check": {"regex": r"\A[\x20-\x7E\r\n]*\Z"}},
    }
    assert raw["gates"] == [
        {"weighted_average": {"quality": 0.7, "ascii_only": 0.3}, "metric": "avg", "op": ">=", "value": 0.75}
    ]
    assert raw["iterations"] == 3 and raw["dataset"] == "dataset.jsonl"
    assert "## Evaluation Rubric\nRate the ASCII art drawing" in result.files["quality.md"]
    assert '{{"score": <0-1>' in result.files["quality.md"]
    rows = [json.loads(line) for line in result.files["dataset.jsonl"].splitlines()]
    assert [row["id"] for row in rows] == ["cat", "house", "boat-then-sun"]
    assert rows[2]["ground_truth"] == [
        "a boat",
        "a boat under a sun",
    ]  # per-turn: a grade per grader per turn

    assert has(
        result.mapped,
        "gate (weighted avg_score of 0.7×quality + 0.3×ascii_only gte 0.75)",
        "weighted_average",
    )
    assert has(result.mapped, "num_runs: 3 → iterations: 3")
    assert has(result.mapped, "graders.quality.temperature → graders.quality.temperature: 0.2")
    assert "# quality: “drawing quality”\ngraders:" in result.source  # Letta's display_name
    assert result.unmapped == [
        "target (kind letta_agent, agent_file ascii-art-agent.af, base_url http://localhost:8283): evalsite cannot "
        "run a Letta agent; it sends the conversations to the agent's model instead, with the agent's plain-text "
        "facts (system prompt, memory blocks, agent_args) as system messages — its tools, tool rules and memory "
        "edits are not reproduced",
        "target.agent_file: ascii-art-agent.af was not uploaded — upload it to carry its system prompt and memory "
        "blocks",
        "max_concurrent: 4 — concurrency is chosen when a run is launched",
    ]

    suite = load_suite(result.source, files=result.files)  # needs named graders (graders-engine)
    assert suite.iterations == 3 and len(suite.evals) == 3


def test_letta_logical_or_and_nested_gates_are_kept():
    text = (FIXTURES / "letta-multi-grader" / "suite.yaml").read_text()
    gate = """gate:
  kind: logical
  operator: or
  conditions:
    - {metric_key: quality, aggregation: avg_score, op: gte, value: 0.8}
    - kind: logical
      operator: and
      conditions:
        - {metric_key: quality, aggregation: min, op: gte, value: 0.5}
        - {metric_key: ascii_only, aggregation: accuracy, op: gte, value: 100, pass_threshold: 1.0}
"""
    text = text[: text.index("gate:")] + gate
    result = convert({**folder("letta-multi-grader"), "suite.yaml": text})
    raw = yaml.safe_load(result.source)
    assert raw["gates"] == [
        {
            "logical_or": [
                {"metric": "avg", "grader": "quality", "op": ">=", "value": 0.8},
                {
                    "logical_and": [
                        {"metric": "min", "grader": "quality", "op": ">=", "value": 0.5},
                        {"metric": "accuracy", "grader": "ascii_only", "op": ">=", "value": 1},
                    ]
                },
            ]
        }
    ]
    assert raw["graders"]["ascii_only"]["threshold"] == 1.0
    assert not has(result.unmapped, "OR of conditions")
    load_suite(result.source, files=result.files)  # needs named graders (graders-engine)


def test_letta_rubric_file_not_uploaded_is_listed_as_needed():
    result = convert(folder("letta-rubric", without=("rubric.txt",)))
    assert result.needs_files == ["rubric.txt"] and not result.complete
    assert has(result.unmapped, "graders.quality.prompt_path: rubric.txt was not uploaded")
    assert yaml.safe_load(result.source)["graders"]["quality"]["rubric_file"] == "rubric.txt"


def test_letta_without_its_dataset_is_a_clear_problem():
    with pytest.raises(ImportProblem, match=r"names the dataset `dataset.jsonl`.*upload dataset.jsonl"):
        convert(folder("letta-per-turn", without=("dataset.jsonl",)))


def test_letta_bad_dataset_line_and_unconvertible_graders_are_clear_problems():
    suite_yaml = (FIXTURES / "letta-per-turn" / "suite.yaml").read_text()
    with pytest.raises(ImportProblem, match=r"dataset.jsonl line 2 is not valid JSON"):
        convert({"suite.yaml": suite_yaml, "dataset.jsonl": '{"input": "a", "ground_truth": "b"}\n{oops\n'})
    # every grader reads agent memory: the first is kept as a code check that finds none (the suite still
    # runs), and both are listed as lost
    custom = suite_yaml.replace("extractor: last_assistant", "extractor: last_compaction")
    result = convert({"suite.yaml": custom, "dataset.jsonl": '{"input": "a", "ground_truth": "b"}\n'})
    raw = yaml.safe_load(result.source)
    assert raw["graders"]["answer_check"]["check"]["code"] == {
        "function": "letta_builtin:contains",
        "dialect": "letta",
        "threshold": 1.0,
        "config": {"extractor": "last_compaction"},
    }
    assert "from letta_evals.graders.builtin import" in result.files["letta_builtin.py"]
    assert has(result.lost, "graders.answer_check: extractor last_compaction", "a code check that finds none")
    assert has(result.lost, "graders.remembers_name (tool exact_match): not converted", "memory_block")
    load_suite(result.source, files=result.files)


def test_letta_regex_rows_that_do_not_compile_are_left_out_and_reported():
    suite_yaml = (
        (FIXTURES / "letta-per-turn" / "suite.yaml")
        .read_text()
        .replace("function: contains", "function: regex_match")
    )
    rows = '{"input": "Year?", "ground_truth": "\\\\b19\\\\d\\\\d\\\\b"}\n{"input": "Broken?", "ground_truth": "(unclosed"}\n'
    result = convert({"suite.yaml": suite_yaml, "dataset.jsonl": rows})
    suite = load_suite(result.source, files=result.files)
    assert suite.grader == "regex_match" and [ev.ground_truth for ev in suite.evals] == [r"\b19\d\d\b"]
    assert has(result.unmapped, "not a valid regular expression", "line 2")


def test_letta_csv_dataset_and_legacy_simple_gate():
    suite_yaml = """\
name: capitals
dataset: capitals.csv
target: {kind: letta_agent, agent_id: agent-123}
graders:
  exact:
    kind: tool
    function: exact_match
    extractor: pattern
    extractor_config: {pattern: "Answer: (\\\\w+)", group: 1}
gate:
  metric_key: exact
  aggregation: accuracy
  op: gte
  value: 0.75
"""
    csv_text = 'input,ground_truth,tags\n"Capital of France? End with Answer: <city>",Paris,europe\n"Capital of Japan?",Tokyo,"asia,far"\n'
    result = convert({"suite.yaml": suite_yaml, "capitals.csv": csv_text})
    assert list(result.files) == ["capitals.jsonl"]
    suite = load_suite(result.source, files=result.files)
    assert suite.extractor.kind == "pattern" and suite.extractor.group == 1
    assert [(g.metric, g.value) for g in suite.gates] == [("accuracy", 0.75)]
    assert suite.evals[1].tags == ["asia", "far"]
    assert has(result.mapped, "accuracy >= 0.75", "share")


def test_an_imported_multi_grader_letta_suite_runs_with_a_score_per_grader_and_its_weighted_gate(fake_openai):
    """The converted suite runs on the engine against the fake endpoint: each grader scores each eval (per
    turn for the per-turn row), the judge grader's model and temperature go on the wire, and the weighted
    gate Letta had decides the run."""
    import os

    from engine.clients import EndpointConfig, EndpointRegistry
    from engine.runner import run_suite
    from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

    result = convert(folder("letta-multi-grader"))
    suite = load_suite(result.source, files=result.files)
    replies = {
        "Draw a cat": "CAT-ART /\\_/\\",
        "Draw a house": "HOUSE-ART ⌂",  # not printable ASCII
        "Draw a boat.": "BOAT-ART __/__",
        "Now add a sun": "SUN-ART \\o/",
    }
    for prompt, reply in replies.items():
        fake_openai.rule(prompt, reply, model="agent")
    for reply, score in (("CAT", 1.0), ("HOUSE", 0.5), ("SUN", 0.6), ("BOAT", 0.8)):
        answer = json.dumps({"score": score, "reason": f"{reply} drawing"})
        fake_openai.rule(f"(What You Are Evaluating)\n{reply}-ART", answer, model="gpt-4.1-mini")
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(
        name="default", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0
    )
    report = run_suite(suite, EndpointRegistry(config), model="agent", files=result.files, concurrency=2)

    assert len(report.evals) == 9  # num_runs 3 → iterations 3
    by_id = {(r.id, r.iteration): r for r in report.evals}
    cat, house, boat = by_id[("cat", 0)], by_id[("house", 0)], by_id[("boat-then-sun", 0)]
    assert [(g.name, g.score) for g in cat.graders] == [("quality", 1.0), ("ascii_only", 1.0)]
    assert [(g.name, g.score, g.passed) for g in house.graders] == [
        ("quality", 0.5, False),
        ("ascii_only", 0.0, False),
    ]
    assert [[(g.name, g.score) for g in turn.grades] for turn in boat.turns] == [
        [("quality", 0.8), ("ascii_only", 1.0)],
        [("quality", 0.6), ("ascii_only", 1.0)],
    ]
    judged = [r for r in fake_openai.chat_requests() if r["model"] == "gpt-4.1-mini"]
    assert judged and {r["temperature"] for r in judged} == {0.2}
    # the attached rubric file inside the earlier Letta's judge prompt, under its system message
    assert [m["role"] for m in judged[0]["messages"]] == ["system", "user"]
    assert judged[0]["messages"][0]["content"] == WRAPPED_SYSTEM
    assert "## Evaluation Rubric\nRate the ASCII art drawing" in judged[0]["messages"][1]["content"]
    (gate,) = report.gates
    # per eval 0.7×quality + 0.3×ascii_only: cat 1.0, house 0.35, boat 0.7×0.7 + 0.3 = 0.79; avg 0.7133
    assert gate.kind == "weighted_average" and gate.actual == pytest.approx((1.0 + 0.35 + 0.79) / 3)
    assert not gate.passed and report.status == "failed"


def test_letta_single_grader_or_gate_is_kept_over_eval_scores():
    """With one grader the eval score is that grader's score, so an OR of its conditions is a logical_or
    gate (it used to be reported as inexpressible)."""
    text = (FIXTURES / "letta-per-turn" / "suite.yaml").read_text()
    gate = (
        "gate:\n  kind: logical\n  operator: or\n  conditions:\n"
        "    - {metric_key: answer_check, aggregation: avg_score, op: gte, value: 0.9}\n"
        "    - {metric_key: answer_check, aggregation: min, op: gte, value: 0.5}\n"
    )
    text = text[: text.index("gate:")] + gate
    result = convert({**folder("letta-per-turn"), "suite.yaml": text})
    suite = load_suite(result.source, files=result.files)
    (only,) = suite.gates
    assert [(g.metric, g.op, g.value) for g in only.logical_or] == [("avg", ">=", 0.9), ("min", ">=", 0.5)]
    assert not has(result.unmapped, "OR")


def test_letta_custom_graders_of_one_module_name_in_two_folders_each_run_their_own():
    from engine.imports import convert_all

    suite = (
        "name: two\ndataset: dataset.jsonl\ntarget: {kind: letta_agent, agent_file: a.af}\ngraders:\n"
        "  first: {kind: tool, function: 'a/grade.py:first', extractor: last_assistant}\n"
        "  second: {kind: tool, function: 'b/grade.py:second', extractor: last_assistant}\n"
    )
    first = (
        "from letta_evals.decorators import grader\n@grader\ndef first(sample, submission):\n    return 1\n"
    )
    second = first.replace("first", "second")
    files = {
        "suite.yaml": suite,
        "dataset.jsonl": '{"input": "hi", "ground_truth": "hi"}\n',
        "a/grade.py": first,
        "b/grade.py": second,
    }
    result = convert_all(files).results[0]
    assert {name: text for name, text in result.files.items() if name.endswith(".py")} == {
        "grade.py": first,
        "grade_2.py": second,
    }
    graders = load_suite(result.source, files=result.files).graders
    assert graders["first"].check.code.function == "grade:first"
    assert graders["second"].check.code.function == "grade_2:second"
