"""AgentV's `tests:` globs (`tests: ./cases/*.yaml`, or a glob among the `tests` entries), imported from a
folder and played on the fake OpenAI endpoint (a real HTTP server) as AgentV runs them: every file the glob
matches read as a file of cases, in path order (yaml-parser.ts resolveIncludePaths: fast-glob, sorted), `*`
within one folder and `**` across folders; an eval file among the matches refused, as AgentV refuses it
(loadRawCasesFromShorthand); a glob that matches nothing an error naming it."""

from __future__ import annotations

import pytest
import yaml

from engine.imports import ImportProblem, convert, convert_all
from engine.imports.common import glob_files
from tests.engine.promptfoo_play import play, project


def ids(result) -> list[str]:
    return [ev["id"] for ev in yaml.safe_load(result.source)["evals"]]


def statuses(report) -> dict[str, str]:
    return {result.id: result.status for result in report.evals}


def test_a_tests_glob_reads_every_file_it_matches_in_path_order(fake_openai):
    result = convert(project("agentv-tests-glob"))
    assert result.lost == [] and result.needs_files == []
    # cases/a-refunds.yaml, then cases/b-shipping.yaml; `*` stays in cases/, so archive/old.yaml is not read
    assert ids(result) == ["refund-window", "shipping-time", "shipping-cost"]
    assert any("cases/archive/old.yaml: uploaded, but the suite does not refer to it" in line
               for line in result.unmapped)  # fmt: skip
    fake_openai.script("Can I return my order from 12 days ago?", ["Yes: returns are accepted for 30 days."])
    fake_openai.script("How long does shipping take?", ["Shipping takes 3 to 5 business days."])
    fake_openai.script("Is shipping free?", ["Shipping costs $5 on every order."])

    report = play(fake_openai, result)

    assert statuses(report) == {
        "refund-window": "passed",
        "shipping-time": "passed",
        "shipping-cost": "failed",
    }


def test_a_glob_among_the_tests_reads_its_files_where_it_stands_across_folders(fake_openai):
    result = convert(project("agentv-tests-glob-today"))
    assert result.lost == []
    # the inline test, then the glob's files: cases/billing/invoices.yaml before cases/refunds.yaml
    assert ids(result) == ["greeting", "invoice-copy", "refund-time"]
    fake_openai.script("Hello!", ["Hello there, how can I help?"])
    fake_openai.script("Can I get a copy of my invoice?", ["Download it from the Billing page."])
    fake_openai.script("When will my refund arrive?", ["Refunds take about a week."])

    report = play(fake_openai, result)

    assert statuses(report) == {"greeting": "passed", "invoice-copy": "passed", "refund-time": "failed"}


def test_a_folder_import_takes_the_matched_files_as_cases_not_as_suites_or_leftovers():
    imported = convert_all(project("agentv-tests-glob"))
    (result,) = imported.results
    assert result.origin == "evals/suite.yaml" and imported.problems == []
    assert imported.ignored == ["evals/cases/README.md", "evals/cases/archive/old.yaml"]


EARLIER = "name: desk\ntests: {glob}\n"
TODAY = 'description: desk\nproviders: [llm]\nprompts: ["{{{{ input }}}}"]\ntests: {glob}\n'


@pytest.mark.parametrize("shape", [EARLIER, TODAY], ids=["earlier", "today"])
def test_a_glob_that_matches_nothing_is_an_error_naming_it(shape):
    files = {"evals/suite.yaml": shape.format(glob="./cases/*.yaml"), "evals/cases/a.yml": "- input: hi\n"}
    with pytest.raises(ImportProblem, match=r"the glob \./cases/\*\.yaml names, and none of the files given"):
        convert(files)


@pytest.mark.parametrize("shape", [EARLIER, TODAY], ids=["earlier", "today"])
def test_a_glob_that_matches_an_eval_file_is_refused_as_agentv_refuses_it(shape):
    files = {
        "evals/suite.yaml": shape.format(glob="./**/*.yaml"),
        "evals/cases/a.yaml": "- input: hi\n  criteria: greets\n",
        "evals/more/refunds.eval.yaml": "name: refunds\ntests:\n  - input: hi\n    criteria: greets\n",
    }
    imported = convert_all(files)
    # the eval file is imported as a suite of its own; the suite whose glob reads it is refused, saying why
    assert [result.origin for result in imported.results] == ["evals/more/refunds.eval.yaml"]
    (problem,) = imported.problems
    assert problem.startswith("evals/suite.yaml: tests: the glob ./**/*.yaml matches more/refunds.eval.yaml, "
                              "an AgentV eval file")  # fmt: skip


def test_globs_match_as_fast_glob_does():
    files = dict.fromkeys(
        [
            "suite.yaml",
            "cases/a.yaml",
            "cases/a1.yaml",
            "cases/b.yml",
            "cases/sub/c.yaml",
            "cases/.draft.yaml",
        ],
        "",
    )

    def glob(pattern: str) -> list[str]:
        return glob_files(files, pattern, leave_out={"suite.yaml"})

    assert glob("./cases/*.yaml") == ["cases/a.yaml", "cases/a1.yaml"]  # `*` stays within cases/, skips dots
    assert glob("file://cases/**/*.yaml") == ["cases/a.yaml", "cases/a1.yaml", "cases/sub/c.yaml"]
    assert glob("cases/*.{yaml,yml}") == ["cases/a.yaml", "cases/a1.yaml", "cases/b.yml"]
    assert glob("cases/a?.yaml") == ["cases/a1.yaml"]
    assert glob("cases/[!a].y*") == ["cases/b.yml"]
    assert glob("cases/.*.yaml") == ["cases/.draft.yaml"]  # a dot the pattern writes
    assert glob("**/*.yaml") == [
        "cases/a.yaml",
        "cases/a1.yaml",
        "cases/sub/c.yaml",
    ]  # never the suite itself
    # a flat upload (names alone): by the pattern's last part
    assert glob_files({"a.yaml": "", "b.json": "", "s.yaml": ""}, "./cases/*.yaml", {"s.yaml"}) == ["a.yaml"]
