"""Importing a project as the tools lay it out: every suite among files and folders (engine.imports.convert_all,
engine.imports.tree), each with the files it refers to as its tool resolves them; losses located at
file:line key; `evalsite import PATH... --out DIR` and its exit codes."""

from __future__ import annotations

import io
import shutil
import stat
import zipfile
from pathlib import Path

import pytest
import yaml

from engine.attached import MAX_FILE_BYTES, MAX_TOTAL_BYTES
from engine.imports import ImportProblem, convert, convert_all
from engine.imports.common import find_file
from engine.imports.locate import line_of, locate
from engine.imports.tree import read_paths, read_zip
from tests.engine.standalone import IMPORTS, evalsite

BAD_VIBECHECK = "evals:\n  - prompt: hi\n    checks:\n      - max_tokens: .nan\n      - match: '*hi*'\n"


def project(root: Path) -> Path:
    """A project with suites of three tools, laid out as each tool reads them, and what no suite is."""
    evals = root / "evals"
    for name, under in (
        ("support-bot.eval.yaml", ""),
        ("support.instructions.md", "prompts"),
        ("refund-judge.md", "graders"),
        ("policy-judge.md", "graders"),
        ("check-policy.ts", "graders"),
        ("order.txt", "data"),
    ):
        (evals / under).mkdir(parents=True, exist_ok=True)
        shutil.copy(IMPORTS / "agentv-today" / name, evals / under / name)
    (evals / "refund-judge.md").write_text("NOT the judge: the suite names ./graders/refund-judge.md\n")
    shutil.copytree(IMPORTS / "letta-per-turn", root / "letta" / "per-turn")
    shutil.copytree(IMPORTS / "letta-rubric", root / "letta" / "rubric")
    shutil.copy(IMPORTS / "vibecheck" / "multi-turn.yaml", root / "multi-turn.yaml")
    # Never read: version control, installed packages, hidden folders, binaries.
    for hidden in (".git", "node_modules/pkg", ".agentv"):
        (root / hidden).mkdir(parents=True)
        shutil.copy(IMPORTS / "vibecheck" / "every-check.yaml", root / hidden / "every-check.yaml")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (root / "README.md").write_text("# the project\n")
    return root


# --- finding the files a suite refers to ---------------------------------------------------------------


def test_a_reference_is_found_from_the_suite_folder_before_any_file_of_the_same_name():
    files = {"judge.md": "near", "graders/judge.md": "named", "../graders/judge.md": "above"}
    assert find_file(files, "./graders/judge.md") == ("graders/judge.md", "named")
    assert find_file(files, "graders\\judge.md") == ("graders/judge.md", "named")
    # AgentV searches the folders above the eval file, up to the repository's root (`/` starts there).
    assert find_file({"../../prompts/p.md": "root"}, "/prompts/p.md") == ("../../prompts/p.md", "root")
    assert find_file({"../shared/x.md": "x"}, "../shared/x.md") == ("../shared/x.md", "x")
    # A flat upload (base names only) still finds a file named with folders.
    assert find_file({"Judge.md": "flat"}, "prompts/judge.md") == ("Judge.md", "flat")
    assert find_file({"a/j.md": "deep", "j.md": "near"}, "other/j.md") == ("j.md", "near")
    assert find_file(files, "./") is None


def test_convert_all_finds_every_suite_each_with_its_own_files(tmp_path):
    tree = read_paths([project(tmp_path / "proj")])
    assert "logo.png: binary, not read" in tree.left_out
    # Version control and installed packages are not read; a hidden folder is, but never for suites.
    assert [path for path in tree.files if "every-check" in path] == [".agentv/every-check.yaml"]
    assert tree.hidden == {".agentv/every-check.yaml"}
    imported = convert_all(tree.files, tree.hidden)
    assert imported.problems == []
    assert [result.origin for result in imported.results] == [
        "multi-turn.yaml",
        "evals/support-bot.eval.yaml",
        "letta/per-turn/suite.yaml",
        "letta/rubric/suite.yaml",
    ]
    agentv, per_turn, rubric = imported.results[1:]
    assert "NOT the judge" not in agentv.files["refund-judge.md"]  # ./graders/, not the nearer namesake
    assert agentv.files["refund-judge.md"].startswith("You grade a")
    assert agentv.files["order.txt"] == (IMPORTS / "agentv-today" / "order.txt").read_text()
    assert agentv.needs_files == []
    # Both Letta suites name `dataset.jsonl`: each reads the one in its own folder.
    assert len(per_turn.files["dataset.jsonl"].splitlines()) == 4
    assert "rubric.txt" in rubric.files and "dataset.jsonl" not in per_turn.unmapped
    rubric_rows = yaml.safe_load(rubric.source)["evals"]
    assert len(rubric_rows) == 3  # max_samples of its own 5 rows, not the other suite's 4
    assert imported.ignored == ["README.md", "evals/refund-judge.md"]


def test_a_file_in_a_hidden_folder_is_read_when_a_suite_names_it(tmp_path):
    root = tmp_path / "repo"
    (root / ".github" / "prompts").mkdir(parents=True)
    (root / ".github" / "prompts" / "order.txt").write_text("the order, from a hidden folder\n")
    (root / ".github" / "every-check.yaml").write_text(
        (IMPORTS / "vibecheck" / "every-check.yaml").read_text()
    )
    (root / ".env").write_text("OPENAI_API_KEY=secret\n")
    (root / "evals").mkdir()
    suite = (IMPORTS / "agentv-today" / "support-bot.eval.yaml").read_text()
    (root / "evals" / "bot.eval.yaml").write_text(
        suite.replace("./data/order.txt", "../.github/prompts/order.txt")
    )
    tree = read_paths([root])
    assert ".env" not in tree.files  # a hidden file is never read
    imported = convert_all(tree.files, tree.hidden)
    assert [result.origin for result in imported.results] == ["evals/bot.eval.yaml"]
    assert imported.results[0].files["order.txt"] == "the order, from a hidden folder\n"
    assert ".github/every-check.yaml" not in imported.ignored


def test_convert_of_base_names_still_converts_one_suite_and_refuses_several():
    files = {path.name: path.read_text() for path in (IMPORTS / "letta-per-turn").iterdir()}
    assert convert(files).kind == "letta"
    files["multi-turn.yaml"] = (IMPORTS / "vibecheck" / "multi-turn.yaml").read_text()
    with pytest.raises(ImportProblem, match="import one suite at a time"):
        convert(files)
    assert len(convert_all(files).results) == 2


def test_a_suite_file_another_suite_reads_is_not_a_suite_of_its_own():
    files = {path.name: path.read_text() for path in (IMPORTS / "agentv-today").iterdir()}
    files["support-bot.eval.yaml"] = files["support-bot.eval.yaml"].replace("order.txt", "order.yaml")
    files["data/order.yaml"] = BAD_VIBECHECK  # an attached file that happens to look like a vibecheck suite
    imported = convert_all(files)
    assert [result.origin for result in imported.results] == ["support-bot.eval.yaml"]
    assert imported.results[0].files["order.yaml"] == BAD_VIBECHECK


def test_convert_all_says_why_when_nothing_is_a_suite():
    with pytest.raises(ImportProblem, match="not a format Import knows"):
        convert_all({"docs/config.yaml": "port: 80\n", "README.md": "hi"})
    with pytest.raises(ImportProblem, match="not a path inside"):
        convert_all({"../x.yaml": BAD_VIBECHECK})


def test_a_file_that_does_not_parse_is_listed_not_passed_over_in_silence(tmp_path):
    imported = convert_all({"a.yaml": BAD_VIBECHECK, "broken/x.eval.yaml": "tests: [\n"})
    assert [result.origin for result in imported.results] == ["a.yaml"]
    assert len(imported.unreadable) == 1
    assert imported.unreadable[0].startswith("broken/x.eval.yaml is not valid YAML (line 2")
    files = {f"notes/{n}.md": "hi" for n in range(11)} | {"c.yaml": "port: 1\n", "d.toml": "= x"}
    with pytest.raises(ImportProblem) as nothing:
        convert_all(files)
    assert str(nothing.value) == (
        "no suite of a tool Import knows among 13 files; 1 YAML or TOML files (c.yaml) are not suites; "
        "not valid: d.toml is not valid TOML: Invalid statement (at line 1, column 1)"
    )
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.yaml").write_text(BAD_VIBECHECK)
    (tmp_path / "p" / "x.eval.yaml").write_text("tests: [\n")
    result = evalsite("import", "p", "--out", "out", cwd=tmp_path)
    assert "Not searched for a suite (it does not parse): x.eval.yaml is not valid YAML" in result.stdout


# --- losses, located ----------------------------------------------------------------------------------


def test_a_loss_is_located_at_its_file_line_and_key():
    suite = "name: s\ntests:\n  - id: first\n    assert:\n      - contains: a\n  - id: second\n    assert:\n      - type: code-grader\n        command: [x]\n"
    files = {"s.yaml": suite, "data/rows.jsonl": '{"a": 1}\n{"a": 2}\n{"a": 3}\n'}
    assert str(locate("tests[1].assert[0]: code-grader left out", "s.yaml", files)) == (
        "s.yaml:8 tests[1].assert[0]: code-grader left out"
    )
    # A key found only in part: the deepest part found.
    assert locate("tests[1].assert[0].weight: dropped", "s.yaml", files).line == 8
    # A repeat reported once ends with where it occurs: case ids or key paths.
    assert locate("a check left out (second, first)", "s.yaml", files).line == 6
    assert locate("a check left out (tests[0].assert[0])", "s.yaml", files).line == 5
    # Another file, named first; a JSONL row by its line.
    row = locate("data/rows.jsonl line 3: input: not text", "s.yaml", files)
    assert (row.file, row.line, str(row)) == ("data/rows.jsonl", 3, "data/rows.jsonl:3: input: not text")
    # A file that is a list (promptfoo's `tests: file://tests.yaml`), its items by index.
    listed = {
        "s.yaml": suite,
        "tests.yaml": "- vars: {a: 1}\n- vars: {a: 2}\n  assert:\n    - type: python\n",
    }
    assert str(locate("tests.yaml[1].assert[0]: python left out", "s.yaml", listed)) == (
        "tests.yaml:4 [1].assert[0]: python left out"
    )
    # A file nested past Python's stack: no line, but still listed, never an exception.
    deep = {"s.yaml": "a: " + "[" * 5000 + "]" * 5000}
    assert str(locate("a[0]: x", "s.yaml", deep)) == "s.yaml: a[0]: x"
    # No key: still listed, at its file.
    assert str(locate("the grader: left out", "s.yaml", files)) == "s.yaml: the grader: left out"


def test_toml_keys_are_located_by_their_tables():
    text = (
        'name = "x"\n\n[[samples]]\nid = "a"\n\n[[samples]]\nid = "b"\nscore = 3\n\n'
        '[samples2.keyed]\nscore = 1\n[contexts."a.b"]\nx = 1\n'
    )
    assert line_of("s.toml", text, ["samples", 1, "score"]) == 8
    assert line_of("s.toml", text, ["samples", 1]) == 6
    assert line_of("s.toml", text, ["samples2", "keyed", "score"]) == 11
    assert line_of("s.toml", text, ["contexts", "a.b", "x"]) == 13
    assert line_of("s.toml", text, ["name"]) == 1
    assert line_of("s.toml", text, ["nothing"]) == 0


def test_losses_carry_the_path_of_the_suite_file_in_the_project():
    imported = convert_all({"sub/bad.yaml": BAD_VIBECHECK})
    [result] = imported.results
    assert [str(loss) for loss in result.losses] == [
        "sub/bad.yaml:4 evals[0].checks[0].max_tokens: expected a whole number of tokens, got NaN; left out"
    ]


# --- zips (the Import page) -------------------------------------------------------------------------------


def zipped(entries: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def test_a_zip_gives_its_files_but_not_hidden_or_binary_ones():
    tree = read_zip(
        zipped(
            {
                "proj/suite.yaml": b"a: 1\n",
                "proj/.git/config": b"x",
                "proj/.github/x.md": b"hidden folder",
                "__MACOSX/proj/._suite.yaml": b"\0\0",
                "proj/img.png": b"\x89PNG\0",
                "proj/.env": b"SECRET=1",
            }
        )
    )
    assert tree.files == {"proj/suite.yaml": "a: 1\n", "proj/.github/x.md": "hidden folder"}
    assert tree.hidden == {"proj/.github/x.md"}
    assert tree.left_out == ["proj/img.png: binary, not read"]


@pytest.mark.parametrize("name", ["../evil.yaml", "/etc/evil.yaml", "a/../../evil.yaml", "C:/evil.yaml"])
def test_a_zip_path_leading_outside_is_refused(name):
    with pytest.raises(ImportProblem, match="leads outside the zip"):
        read_zip(zipped({"ok.yaml": b"a: 1\n", name: b"a: 1\n"}))


def test_a_zip_of_links_or_bombs_is_refused():
    with pytest.raises(ImportProblem, match="is a link"):
        read_zip(zipped({"ok.yaml": b"a: 1\n"}, links=("passwd",)))
    with pytest.raises(ImportProblem, match="not a zip file"):
        read_zip(b"PK\x03\x04 not really")
    # A file that inflates past the per-file limit is read only that far, and left out.
    big = read_zip(zipped({"big.txt": b"a" * (MAX_FILE_BYTES + 10), "ok.yaml": b"a: 1\n"}))
    assert list(big.files) == ["ok.yaml"] and big.left_out[0].startswith("big.txt: larger than")
    # Many files just under it: refused once they pass the total, counted as inflated.
    count = MAX_TOTAL_BYTES // MAX_FILE_BYTES + 1
    with pytest.raises(ImportProblem, match="holds more than"):
        read_zip(zipped({f"f{n}.txt": b"a" * MAX_FILE_BYTES for n in range(count)}))


# --- evalsite import PATH... --out DIR --------------------------------------------------------------------


def test_cli_imports_a_project_folder_one_suite_each_into_out(tmp_path):
    project(tmp_path / "proj")
    result = evalsite("import", "proj", "--out", "out", cwd=tmp_path)
    # The Letta per-turn suite grades one eval on the agent's memory, which a chat model has not got.
    assert result.returncode == 1, result.stdout + result.stderr
    assert [line.split(" graders.")[0] for line in result.stderr.splitlines()] == [
        "lost: letta/per-turn/suite.yaml:17"
    ]
    written = sorted(str(path.relative_to(tmp_path / "out")) for path in (tmp_path / "out").rglob("*"))
    assert written == [
        "multi-turn.yaml",
        "per-turn",
        "per-turn/dataset.jsonl",
        "per-turn/per-turn.yaml",
        "rubric",
        "rubric/rubric.txt",
        "rubric/rubric.yaml",
        "support-bot",
        "support-bot/check-policy.ts",
        "support-bot/order.txt",
        "support-bot/refund-judge.md",
        "support-bot/support-bot.yaml",
        "support-bot/support.instructions.md",
    ]
    assert "Converted AgentV evals/support-bot.eval.yaml → out/support-bot/support-bot.yaml" in result.stdout
    assert "Not read by any suite: README.md, evals/refund-judge.md" in result.stdout
    assert "Left out of the folders: logo.png: binary, not read" in result.stdout
    assert result.stdout.splitlines()[-1] == "4 suites imported; 1 loss listed on stderr"
    suites = [str(path) for path in (tmp_path / "out").rglob("*.yaml")]
    assert evalsite("validate", *suites, cwd=tmp_path).returncode == 0


def test_cli_names_suites_apart_when_their_names_meet(tmp_path):
    for team in ("team-a", "team-b"):
        shutil.copytree(IMPORTS / "letta-per-turn", tmp_path / "proj" / team / "simple")
    result = evalsite("import", "proj", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # the memory grader of each, lost
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["simple", "team-b-simple"]
    assert (tmp_path / "out" / "team-b-simple" / "team-b-simple.yaml").is_file()


def test_cli_exit_1_lists_each_loss_on_stderr_at_file_line_and_key(tmp_path):
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "sub" / "bad.yaml").write_text(BAD_VIBECHECK)
    shutil.copy(IMPORTS / "vibecheck" / "multi-turn.yaml", tmp_path / "proj")
    result = evalsite("import", "proj", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "lost: sub/bad.yaml:4 evals[0].checks[0].max_tokens: expected a whole number of tokens, got NaN; "
        "left out"
    ]
    assert (tmp_path / "out" / "bad.yaml").is_file() and (tmp_path / "out" / "multi-turn.yaml").is_file()
    assert result.stdout.splitlines()[-1] == "2 suites imported; 1 loss listed on stderr"


def test_cli_exit_1_when_one_suite_among_others_cannot_be_converted(tmp_path):
    (tmp_path / "proj" / "letta").mkdir(parents=True)
    shutil.copy(IMPORTS / "letta-per-turn" / "suite.yaml", tmp_path / "proj" / "letta")  # no dataset
    shutil.copy(IMPORTS / "vibecheck" / "multi-turn.yaml", tmp_path / "proj")
    result = evalsite("import", "proj", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("not imported: letta/suite.yaml names the dataset `dataset.jsonl`")
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["multi-turn.yaml"]


def test_cli_exit_2_when_nothing_can_be_imported_and_nothing_is_written(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "config.yaml").write_text("port: 80\n")
    result = evalsite("import", "proj", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "not a format Import knows" in result.stderr
    assert not (tmp_path / "out").exists()
    # Several suites, one file named: said, nothing written.
    shutil.copy(IMPORTS / "vibecheck" / "multi-turn.yaml", tmp_path / "proj")
    shutil.copy(IMPORTS / "vibecheck" / "every-check.yaml", tmp_path / "proj")
    several = evalsite("import", "proj", "--out", "one.yaml", cwd=tmp_path)
    assert (
        several.returncode == 2
        and "2 suites were found" in several.stderr
        and "give a folder" in several.stderr
    )
    assert not (tmp_path / "one.yaml").exists()


def test_cli_overwrites_nothing_and_writes_nothing_when_one_target_exists(tmp_path):
    project(tmp_path / "proj")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "multi-turn.yaml").write_text("mine\n")
    result = evalsite("import", "proj", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "out/multi-turn.yaml exists (a file)" in result.stderr
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["multi-turn.yaml"]
    assert (tmp_path / "out" / "multi-turn.yaml").read_text() == "mine\n"
    forced = evalsite("import", "proj", "--out", "out", "--force", cwd=tmp_path)
    assert forced.returncode == 1 and "lost:" in forced.stderr, forced.stdout + forced.stderr
    assert (tmp_path / "out" / "multi-turn.yaml").read_text() != "mine\n"


def test_an_agtlantis_project_beside_a_letta_suite_reads_its_own_config_and_prompt(tmp_path):
    shutil.copytree(IMPORTS / "agtlantis", tmp_path / "agtlantis")
    shutil.copytree(IMPORTS / "letta-per-turn", tmp_path / "letta")
    tree = read_paths([tmp_path])
    imported = convert_all(tree.files, tree.hidden)
    assert [result.origin for result in imported.results] == [
        "agtlantis/booking.eval.yaml",
        "agtlantis/orders.eval.yaml",
        "agtlantis/support.eval.yaml",
        "letta/suite.yaml",
    ]
    support = imported.results[2]
    assert "You are the support agent of a kitchenware shop." in support.source  # its prompt file, beside it
    assert imported.ignored == []
