"""Exports for CI and pull requests: JUnit XML checked against the schema CI readers validate and
read back by junitparser (a well-kept JUnit reader), and the Markdown summary, from a run played against the
real fake endpoint: a pass, a follow-up that fixes a failure, a failure, an error, hostile replies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped

from engine.clients import EndpointConfig, EndpointRegistry
from engine.compare import compare_runs
from engine.exports import evals_csv, junit_xml, markdown_summary, role_transcript, turns_csv
from engine.loader import load_suite
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

SCHEMA = xmlschema.XMLSchema(Path(__file__).parent.parent / "fixtures" / "junit" / "junit.xsd")

SUITE = """
name: exports
model: m
system: Be brief.
gates:
  - {metric: accuracy, op: ">=", value: 0.9}
evals:
  - id: add
    prompt: What is 2+2?
    checks: [{contains: "4"}]
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - contains: "105"
        prompt: Recalculate.
        checks: [{contains: "105"}]
  - id: hostile
    prompt: Say something odd.
    checks: [{contains: "never"}]
  - id: down
    prompt: Are you there?
    checks: [{contains: "yes"}]
"""

HOSTILE = "bell \x07 nul \x00 esc \x1b[31m | ]]> </system-out> [link](http://evil) <script>x</script>"


def _report(fake):
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    fake.script("What is 2+2?", ["4"])
    fake.script("What is 15 * 7?", ["100", "105"])
    fake.script("Say something odd.", [HOSTILE])
    fake.fail_next(1, status=500, first_user="Are you there?")
    return run_suite(load_suite(SUITE), EndpointRegistry(config), concurrency=1)


@pytest.fixture
def report(fake_openai):
    return _report(fake_openai)


def test_junit_validates_and_reads_back_as_ci_sees_it(report, tmp_path):
    text = junit_xml(report)
    SCHEMA.validate(text)  # raises on any element or attribute CI readers do not know
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    assert suite.name == "exports"
    # 4 evals + 1 gate: the hostile reply fails its check, "down" errors, and the accuracy gate (2/3) fails.
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (5, 2, 1, 0)
    cases = {case.name: case for case in suite}
    assert set(cases) == {"add", "multiply", "hostile", "down", "gate accuracy >= 0.9"}
    assert cases["add"].is_passed and cases["multiply"].is_passed
    (failure,) = cases["hostile"].result
    assert isinstance(failure, Failure) and failure.message.startswith("failed after 1 turn")
    assert "contains" in failure.text and "substring not found" in failure.text
    (error,) = cases["down"].result
    assert isinstance(error, Error) and "500" in error.message
    (gate,) = cases["gate accuracy >= 0.9"].result
    assert isinstance(gate, Failure) and "actual 0.667" in gate.message
    assert {p.name: p.value for p in suite.properties()} == {
        "model": "m",
        "endpoint": "default",
        "status": "error",
    }


def test_junit_system_out_is_the_role_transcript(report):
    multiply = next(result for result in report.evals if result.id == "multiply")
    assert role_transcript(multiply, "Be brief.") == (
        "[System]:\nBe brief.\n\n[User]:\nWhat is 15 * 7?\n\n[Assistant]:\n100\n\n"
        "[User]:\nRecalculate.\n\n[Assistant]:\n105"
    )
    xml = JUnitXml.fromstring(junit_xml(report, system="Be brief.").encode())
    (suite,) = list(xml)
    case = next(case for case in suite if case.name == "multiply")
    assert case.system_out == role_transcript(multiply, "Be brief.")


def test_characters_xml_forbids_are_replaced_not_fatal(report):
    text = junit_xml(report)
    assert "\x00" not in text and "\x07" not in text and "\x1b" not in text
    SCHEMA.validate(text)
    (suite,) = list(JUnitXml.fromstring(text.encode()))
    out = next(case for case in suite if case.name == "hostile").system_out
    # Escaped by the XML writer and read back as written, but for the three forbidden characters.
    assert "bell \ufffd nul \ufffd esc \ufffd[31m | ]]> </system-out> [link](http://evil) <script>" in out


def test_iterated_evals_are_one_testcase_per_iteration(fake_openai):
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV)
    fake_openai.default_reply = "4"
    source = "name: it\nmodel: m\niterations: 3\nevals:\n  - {id: add, prompt: '2+2?', checks: [{contains: '4'}]}\n"
    report = run_suite(load_suite(source), EndpointRegistry(config), concurrency=1)
    (suite,) = list(JUnitXml.fromstring(junit_xml(report).encode()))
    assert [case.name for case in suite] == ["add (iteration 1)", "add (iteration 2)", "add (iteration 3)"]


def test_a_cancelled_eval_is_skipped():
    from engine.results import EvalResult, RunReport, RunTotals, SuiteRef

    cancelled = EvalResult(
        index=0,
        id="slow",
        kind="single-turn",
        prompt="p",
        status="cancelled",
        verdict="cancelled after 0 turns",
    )
    report = RunReport(suite=SuiteRef(name="s"), model="m", endpoint="e", status="cancelled", evals=[cancelled],
                       totals=RunTotals.of([cancelled]))  # fmt: skip
    text = junit_xml(report)
    SCHEMA.validate(text)
    (suite,) = list(JUnitXml.fromstring(text.encode()))
    (case,) = list(suite)
    assert isinstance(case.result[0], Skipped) and suite.skipped == 1


def test_markdown_summary_counts_gates_and_failures(report):
    text = markdown_summary(report, run_url="https://evals.example/runs/1/")
    assert text.startswith("### ⚠️ evalsite: exports error\n")  # an errored eval makes the run an error
    assert "**2** passed · **1** failed · **1** errored of 4 evals on `m`" in text
    assert "[Open the run](https://evals.example/runs/1/)" in text
    assert r"| accuracy \>= 0.9 | 0.667 | ❌ |" in text  # escaped, rendered as written
    assert "| eval | why | transcript |" in text  # no baseline: no kind column
    assert (
        '| hostile | ❌ turn 1: contains "never": substring not found | [open](https://evals.example/runs/1/c/2/) |'
        in text
    )
    assert (
        "| down | ⚠️ HTTP 500 from default: " in text and "[open](https://evals.example/runs/1/c/3/)" in text
    )


def test_markdown_summary_names_regressions_against_a_baseline(fake_openai, report):
    fake_openai.reset()
    baseline = _report(fake_openai)
    # The baseline passed "hostile" (its reply then said "never"); this run fails it: one regression.
    fake_openai.reset()
    fixed = baseline.model_copy(deep=True)
    hostile = next(result for result in fixed.evals if result.id == "hostile")
    hostile.status, hostile.score = "passed", 1.0
    comparison = compare_runs(fixed.evals, report.evals)
    text = markdown_summary(report, comparison=comparison, baseline_url="https://evals.example/runs/0/")
    assert "Against [baseline](https://evals.example/runs/0/): **1** regressed · **0** fixed" in text
    lines = text.splitlines()
    rows = [
        line for line in lines[lines.index("| | eval | why | transcript |") + 2 :] if line.startswith("|")
    ]
    assert rows[0].startswith('| regressed | hostile | ❌ turn 1: contains "never"')
    assert rows[1].startswith("| failing | down | ⚠️ HTTP 500")  # errored in the baseline too


def test_markdown_lists_regressions_then_new_failures_then_the_rest_then_the_fixed(fake_openai, report):
    fake_openai.reset()
    baseline = _report(fake_openai).model_copy(deep=True)
    by_id = {result.id: result for result in baseline.evals}
    by_id["hostile"].status = "passed"  # passes in the baseline, fails now: a regression
    by_id["add"].status = "failed"  # fails in the baseline, passes now: fixed
    baseline.evals = [by_id["hostile"], by_id["add"], by_id["multiply"]]  # `down` is new
    text = markdown_summary(report, comparison=compare_runs(baseline.evals, report.evals))
    rows = [line for line in text.splitlines() if line.startswith(("| regressed", "| new", "| failing"))]
    assert [row.split(" | ")[:2] for row in rows] == [["| regressed", "hostile"], ["| new", "down"]]
    assert "Fixed since the baseline: `add`" in text


def test_markdown_cells_cannot_break_the_table_or_inject_links(report):
    hostile = next(result for result in report.evals if result.id == "hostile")
    hostile.turns[0].checks[0].reason = "a | b [x](http://evil) <img src=x> `code`\nnext line"
    text = markdown_summary(report)
    row = next(line for line in text.splitlines() if line.startswith("| hostile"))
    assert (
        row
        == r'| hostile | ❌ turn 1: contains "never": a \| b \[x\]\(http://evil\) \<img src=x\> \`code\` next line | |'
    )


# --- CSV ------------------------------------------------------------------------------------------------------


def _csv(text: str) -> list[dict]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def test_evals_csv_has_a_row_per_eval_and_neutralises_formulas(report):
    hostile = next(result for result in report.evals if result.id == "hostile")
    hostile.verdict = '=HYPERLINK("http://evil")'
    rows = _csv(evals_csv(report))
    assert [row["eval_id"] for row in rows] == ["add", "multiply", "hostile", "down"]
    multiply = rows[1]
    assert (multiply["status"], multiply["score"], multiply["passed_on_turn"], multiply["turns"]) == (
        "passed", "1", "2", "2",
    )  # fmt: skip
    assert rows[2]["verdict"] == '\'=HYPERLINK("http://evil")'  # a spreadsheet shows it, never runs it
    assert rows[3]["status"] == "error" and "500" in rows[3]["error"] and rows[3]["score"] == ""


def test_evals_csv_has_a_score_and_pass_column_per_named_grader(report):
    from engine.results import GraderResult

    for result in report.evals:
        result.graders = [
            GraderResult(name="quality", kind="llm_judge", score=0.75, passed=True, threshold=0.7)
        ]
    report.evals[0].graders.append(
        GraderResult(name="ascii_only", kind="check", score=0.0, passed=False, threshold=1.0)
    )
    rows = _csv(evals_csv(report))
    assert list(rows[0])[-4:] == ["quality", "quality_passed", "ascii_only", "ascii_only_passed"]
    assert (rows[0]["quality"], rows[0]["quality_passed"], rows[0]["ascii_only_passed"]) == (
        "0.75",
        "true",
        "false",
    )
    assert rows[1]["ascii_only"] == "" and rows[1]["quality"] == "0.75"


def test_turns_csv_has_a_row_per_turn(report):
    rows = _csv(turns_csv(report))
    assert [(row["eval_id"], row["turn"]) for row in rows] == [
        ("add", "1"), ("multiply", "1"), ("multiply", "2"), ("hostile", "1"),
    ]  # fmt: skip
    assert rows[1]["response"] == "100" and rows[1]["passed"] == "false"
    assert rows[1]["checks"] == 'contains "105": fail' and rows[2]["prompt"] == "Recalculate."
    assert "\x00" in rows[3]["response"]  # CSV carries any character; only formulas are neutralised
