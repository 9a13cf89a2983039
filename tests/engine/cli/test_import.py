"""`evalsite import` and `evalsite validate`: what is written, said and refused, and the exit codes.

Every command runs in a subprocess with the venv's `evalsite` script and a fresh shell's environment."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.engine.standalone import (
    IMPORTS,
    assert_one_line_error,
    evalsite,
    fresh_env,
)


def test_import_writes_the_suite_beside_its_files_and_says_what_was_mapped(tmp_path):
    given = sorted(str(path) for path in (IMPORTS / "letta-per-turn").iterdir())
    result = evalsite("import", *given, "--out", "out/suite.yaml", cwd=tmp_path)
    # Written, with exit 1: one grader reads the Letta agent's memory, which a chat model has not got.
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("lost: suite.yaml:17 graders.remembers_name: (tool exact_match)")
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["dataset.jsonl", "suite.yaml"]
    lines = result.stdout.splitlines()
    assert lines[0] == "Converted Letta Evals → out/suite.yaml, with dataset.jsonl beside it"
    assert "  - num_runs: 3 → iterations: 3 (every eval run 3 times, with statistics)" in lines
    assert lines.index("Mapped:") < lines.index("Not converted:")
    assert any(line.startswith("  - max_concurrent: 8") for line in lines)
    assert lines[-2].startswith("out/suite.yaml: ok — suite 'multiturn-per-turn-grading-test', 4 evals")
    assert lines[-1] == "1 suite imported; 1 loss listed on stderr"
    assert evalsite("validate", "out/suite.yaml", cwd=tmp_path).returncode == 0


def test_import_exit_2_with_the_import_page_message_and_nothing_written(tmp_path):
    from engine.imports import ImportProblem, convert

    suite_file = IMPORTS / "letta-per-turn" / "suite.yaml"
    with pytest.raises(ImportProblem) as page:  # what the Import page shows for the same upload
        convert({"suite.yaml": suite_file.read_text()})
    result = evalsite("import", str(suite_file), "--out", "suite.yaml", cwd=tmp_path)
    assert assert_one_line_error(result, 2) == f"evalsite: {page.value}"
    assert list(tmp_path.iterdir()) == []
    missing = evalsite("import", "nope.yaml", "--out", "suite.yaml", cwd=tmp_path)
    assert_one_line_error(missing, 2, "nope.yaml: no such file")


def test_validate_refuses_an_eval_that_ends_on_the_assistants_turn(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nmodel: mock\nevals:\n  - messages:\n      - {role: user, content: Hi}\n"
        "      - {role: assistant, content: Hello}\n    checks: [{contains: hello}]\n",
        encoding="utf-8",
    )
    result = evalsite("validate", "s.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "s.yaml:6:" in result.stdout + result.stderr
    assert (
        "evals[0].messages[1].role: this history ends on the assistant's turn"
        in result.stdout + result.stderr
    )


def test_import_exit_1_when_a_referenced_file_was_not_given(tmp_path):
    result = evalsite(
        "import", str(IMPORTS / "agentv" / "code-review.eval.yaml"), "--out", "s.yaml", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "Files it needs that were not given: calculate_total.js, javascript.instructions.md" in result.stdout
    )
    assert (tmp_path / "s.yaml").is_file()
    assert evalsite("validate", "s.yaml", cwd=tmp_path).returncode == 2


def test_import_of_vibecheck_typed_checks_is_whole_and_its_mcp_server_and_variables_are_mapped(tmp_path):
    whole = evalsite("import", str(IMPORTS / "vibecheck" / "typed-checks.yaml"), "--out", "a", cwd=tmp_path)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "(string_contains) → contains" in whole.stdout and whole.stderr == ""
    tools = evalsite(
        "import", str(IMPORTS / "vibecheck" / "tools-and-variables.yaml"), "--out", "b", cwd=tmp_path
    )
    assert tools.returncode == 0 and tools.stderr == "", tools.stdout + tools.stderr
    assert (
        "metadata.mcp_server (tracker) → tools: [{mcp: {url: https://mcp.tracker.example/mcp}}]"
        in tools.stdout
    )
    assert (
        "Bearer {{env:TRACKER_APIKEY}}" in tools.stdout
    )  # the token is read from the environment, never stored
    assert "--var tracker.team=… --var tracker.projectKey=…" in tools.stdout
    assert evalsite("validate", "b/tools-and-variables.yaml", cwd=tmp_path).returncode == 0


def test_import_does_not_overwrite_a_file_unless_forced(tmp_path):
    for path in (IMPORTS / "letta-per-turn").iterdir():
        shutil.copy(path, tmp_path / path.name)
    original = (tmp_path / "dataset.jsonl").read_text()
    args = ("import", "suite.yaml", "dataset.jsonl", "--out", "evalsite.yaml")
    result = evalsite(*args, cwd=tmp_path)
    assert_one_line_error(result, 2, "dataset.jsonl exists (one of the files being imported)", "--force")
    assert (tmp_path / "dataset.jsonl").read_text() == original and not (tmp_path / "evalsite.yaml").exists()
    forced = evalsite(*args, "--force", cwd=tmp_path)
    assert forced.returncode == 1 and "lost:" in forced.stderr, forced.stdout + forced.stderr  # as above
    assert (tmp_path / "dataset.jsonl").read_text() != original  # now evalsite's rows


def test_import_help_documents_its_exit_codes(tmp_path):
    top = evalsite("--help", cwd=tmp_path)
    assert re.search(r"^\s+import\s+convert another tool's suite", top.stdout, re.M)
    help_text = evalsite("import", "--help", cwd=tmp_path).stdout
    assert "--out DIR" in help_text and "--kind" in help_text and "--force" in help_text
    assert "{auto,vibecheck,letta,agentv,calibrate,promptfoo,agtlantis}" in help_text
    described = " ".join(
        re.search(r"^\s+import\s+(convert .*?)\n\s+\w+\s", top.stdout, re.M | re.S).group(1).split()
    )
    for tool in ("vibecheck", "Letta Evals", "AgentV", "promptfoo", "agtlantis", "calibrate (Bolt Foundry)"):
        assert tool in described, described
    assert "PATH" in help_text and "file:line key: message" in help_text
    for code in (
        "0  converted",
        "1  written, but something is to see to",
        "a suite lost",
        "2  nothing was written",
    ):
        assert code in help_text


def test_import_of_a_multi_grader_letta_suite_validates(tmp_path):
    given = sorted(str(path) for path in (IMPORTS / "letta-multi-grader").iterdir())
    result = evalsite("import", *given, "--out", "suite.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # needs named graders (graders-engine)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dataset.jsonl", "quality.md", "suite.yaml"]


def test_import_of_hostile_values_lists_the_loss_or_says_where_never_a_traceback(tmp_path):
    nan = tmp_path / "nan.yaml"
    nan.write_text("evals:\n  - prompt: hi\n    checks: [{max_tokens: .nan}, {match: '*hi*'}]\n")
    result = evalsite("import", str(nan), "--out", "out/suite.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # a check was lost
    assert result.stderr.splitlines() == [
        "lost: nan.yaml:3 evals[0].checks[0].max_tokens: expected a whole number of tokens, got NaN; left out"
    ]
    given = tmp_path / "letta"
    shutil.copytree(IMPORTS / "letta-per-turn", given)
    suite = given / "suite.yaml"
    suite.write_text(
        suite.read_text().replace("function: contains", "function: [contains]").replace("memory_block", "{}")
    )
    result = evalsite("import", str(suite), str(given / "dataset.jsonl"), "--out", "s.yaml", cwd=tmp_path)
    assert assert_one_line_error(result, 2).startswith(
        "evalsite: suite.yaml: no grader of this suite has an evalsite equivalent — graders.answer_check"
    )


def test_import_with_kind_exits_1_and_lists_the_losses_as_the_folder_path_does(tmp_path):
    given = str(IMPORTS / "vibecheck" / "conditionals.yaml")
    auto = evalsite("import", given, "--out", "auto", cwd=tmp_path)
    kind = evalsite("import", "--kind", "vibecheck", given, "--out", "kind/s.yaml", cwd=tmp_path)
    assert (auto.returncode, kind.returncode) == (1, 1), kind.stdout + kind.stderr
    assert kind.stderr == auto.stderr
    assert kind.stderr.startswith("lost: conditionals.yaml:34 evals[1].conditionals[3]: check type sentiment")
    assert "Lost (it graded or drove the conversation): 1 item, on stderr" in kind.stdout
    assert "check type sentiment" not in kind.stdout  # a loss is on stderr, not among "Not converted"


def test_import_refusal_under_python_m_is_one_line_not_a_crash(tmp_path):
    (tmp_path / "x.yaml").write_text("foo: 1\n", encoding="utf-8")
    for args in (["x.yaml"], ["--kind", "agtlantis", "x.yaml", "--out", "s.yaml"]):
        result = subprocess.run(
            [sys.executable, "-m", "evalsite.cli", "import", *args],
            cwd=tmp_path, env=fresh_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert_one_line_error(result, 2, "evalsite: x.yaml")
        assert "crashed" not in result.stderr


def test_import_with_kind_names_files_from_the_folder_they_share_not_their_absolute_path(tmp_path):
    given = sorted(str(path) for path in (IMPORTS / "boltfoundry").rglob("*") if path.is_file())
    result = evalsite("import", "--kind", "calibrate", *given, "--out", "o/set.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  - decks/support-tone.deck.md: the deck, assembled as aibff renders it" in result.stdout
    assert str(IMPORTS).lstrip("/") not in result.stdout
