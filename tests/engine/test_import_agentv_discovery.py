"""AgentV suites whose cases are a folder (`tests: ./cases/`: each folder under it one case in its case.yaml,
the folder's name its id, as AgentV's loadCasesFromDirectory reads them), imported from a folder, from the
files in their folders, and from a zip as the Import page reads it; and AgentV's TypeScript evals
(`*.eval.ts`), which Import cannot read, listed as not imported rather than left out in silence."""

from __future__ import annotations

import pytest
import yaml

from engine.imports import ImportProblem, convert, convert_all, looks_like
from engine.imports.tree import read_zip
from tests.engine.promptfoo_play import judged, play, project, verdict
from tests.engine.test_import_folders import zipped

IDS = ["add-greeting", "fix-null-check", "rename-user-field"]  # folders in name order; one names its own id


def suite_of(result) -> dict:
    return yaml.safe_load(result.source)


def test_a_folder_of_cases_is_recognised_as_agentv():
    assert looks_like({"name": "d", "tests": "./cases/"}) == "agentv"
    assert looks_like({"name": "d", "tests": "cases"}) == "agentv"


def test_a_folder_import_reads_every_case_folder_and_lists_what_it_cannot(fake_openai):
    imported = convert_all(project("agentv-directory"))

    (result,) = imported.results
    assert result.origin == "evals/EVAL.yaml" and result.lost == []
    assert [ev["id"] for ev in suite_of(result)["evals"]] == IDS
    assert any("the folder cases/ → 3 cases" in line for line in result.mapped)
    # a folder without a case.yaml is skipped, as AgentV skips it, and a case's workspace is not converted
    assert any("cases/drafts/ has no case.yaml" in line for line in result.unmapped)
    assert any("cases/fix-null-check/workspace/" in line for line in result.unmapped)
    # the TypeScript eval is listed as not imported, with why, and not as a file no suite reads
    (code,) = imported.problems
    assert code.startswith("evals/greeting.eval.ts: an AgentV eval written in TypeScript")
    assert "evals/greeting.eval.ts" not in imported.ignored

    fake_openai.rule("Adds a greeting that shows the user's name", verdict(0.9))
    fake_openai.rule("Fixes the null check in parseToken", verdict(1.0))
    fake_openai.rule("Renames the field everywhere", verdict(0.4, "missed two uses"))
    fake_openai.rule("Add a greeting", "Show `Welcome back, ${user.name}!` in the header.")
    fake_openai.rule("Fix the null check", "if (token === null) return 0;")
    fake_openai.rule("Rename the `usr` field", "Renamed it in session.ts.")

    report = play(fake_openai, result)

    # each case folder is graded as AgentV grades it: the judge on its own criteria, at 0.8
    assert {r.id: r.status for r in report.evals} == {
        "add-greeting": "passed",
        "fix-null-check": "passed",
        "rename-user-field": "failed",
    }
    (greeting,) = judged(fake_openai, "Adds a greeting")
    assert "Welcome back" in greeting


def test_the_files_in_their_folders_import_alike_with_or_without_the_kind():
    files = {path: text for path, text in project("agentv-directory").items() if path.endswith(".yaml")
             or path.endswith(".yml")}  # fmt: skip
    for kind in (None, "agentv"):  # `evalsite import --kind agentv EVAL.yaml cases/*/case.yaml`
        result = convert(files, kind)
        assert [ev["id"] for ev in suite_of(result)["evals"]] == IDS
        assert result.needs_files == [] and result.lost == []


def test_a_zip_of_the_folder_imports_as_the_folder_does():
    entries = {f"proj/{path}": text.encode() for path, text in project("agentv-directory").items()}
    tree = read_zip(zipped(entries))
    imported = convert_all(tree.files, tree.hidden)
    (result,) = imported.results
    assert result.origin == "proj/evals/EVAL.yaml"
    assert [ev["id"] for ev in suite_of(result)["evals"]] == IDS
    assert imported.problems[0].startswith(
        "proj/evals/greeting.eval.ts: an AgentV eval written in TypeScript"
    )
    # with the tool chosen, a zip's files keep their folders too (two case.yaml never clash)
    chosen = convert(tree.files, "agentv")
    assert [ev["id"] for ev in suite_of(chosen)["evals"]] == IDS


def test_the_suite_file_alone_asks_for_its_folder_of_cases():
    eval_file = project("agentv-directory")["evals/EVAL.yaml"]
    with pytest.raises(ImportProblem, match=r"keeps its cases in the folder \./cases/ .*import the folder"):
        convert({"EVAL.yaml": eval_file})
    imported = convert_all({"EVAL.yaml": eval_file})
    (problem,) = imported.problems
    assert "keeps its cases in the folder ./cases/" in problem


def test_a_typescript_eval_alone_says_why_it_is_not_imported():
    code = project("agentv-directory")["evals/greeting.eval.ts"]
    with pytest.raises(ImportProblem, match="greeting.eval.ts: an AgentV eval written in TypeScript"):
        convert({"greeting.eval.ts": code})
    with pytest.raises(ImportProblem, match="evals/greeting.eval.ts: an AgentV eval written in TypeScript"):
        convert_all({"evals/greeting.eval.ts": code, "README.md": "notes"})
    # uploaded beside a suite it is not part of, it is named as not converted, with why
    files = {path: text for path, text in project("agentv-directory").items() if "/cases/" in path
             or path.endswith((".yaml", ".ts"))}  # fmt: skip
    result = convert(files)
    assert any(
        line.startswith("greeting.eval.ts: an AgentV eval written in TypeScript") for line in result.unmapped
    )
