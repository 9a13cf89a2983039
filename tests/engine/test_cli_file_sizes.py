"""The command measures a file before it reads it: a suite naming a 1.5 GB file (sparse, made with
truncate: it costs no disk) is refused at once, with the file's name, exit code 2, and without the memory
reading it would take. The same rules as the web app's: names, sizes, how many files."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.attached import MAX_FILE_BYTES, MAX_FILES, NAME_RULE, read_suite_files
from engine.source import SuiteError
from tests.engine.standalone import EVALSITE, fresh_env

HUGE = 1_500_000_000  # bytes, as sparse files

RUBRIC = """\
name: huge-rubric
model: mock
mock: {rules: [{when: "*", reply: "fine"}]}
graders:
  quality: {kind: llm_judge, rubric_file: rubric.md, model: mock}
evals:
  - {id: one, input: Say something.}
"""
MESSAGE = """\
name: huge-message
model: mock
mock: {rules: [{when: "*", reply: "fine"}]}
evals:
  - id: one
    messages:
      - role: user
        content:
          - {type: file, value: notes.md}
    checks:
      - match: "*"
"""
DATASET = """\
name: huge-dataset
model: mock
mock: {rules: [{when: "*", reply: "fine"}]}
dataset: rows.jsonl
grader: contains
"""
CASES = {
    "rubric_file": (RUBRIC, "rubric.md"),
    "message file": (MESSAGE, "notes.md"),
    "dataset": (DATASET, "rows.jsonl"),
}


def sparse(path: Path, size: int) -> Path:
    subprocess.run(["truncate", "-s", str(size), str(path)], check=True)
    return path


# A small process between this one and the command: a child's peak memory counts what it held before exec,
# and a child of pytest holds pytest's own memory until then.
PEAK_OF_CHILD = """\
import os, resource, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status = os.waitpid(pid, 0)
with open(os.environ["PEAK_FILE"], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measured(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float, int]:
    """The command's result, its wall time, and its own peak resident memory in MB."""
    peak_file = cwd / "peak.txt"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-S", "-c", PEAK_OF_CHILD, str(EVALSITE), *args],
        cwd=cwd, env={**fresh_env(), "PEAK_FILE": str(peak_file)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    return result, elapsed, int(peak_file.read_text()) // 1024


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_huge_attached_file_is_refused_at_once_with_exit_2(case, command, tmp_path):
    source, name = CASES[case]
    (tmp_path / "suite.yaml").write_text(source)
    sparse(tmp_path / name, HUGE)
    result, elapsed, peak = measured(command, "suite.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{name}: larger than 20 MB" in result.stderr
    assert "Traceback" not in result.stderr and "crashed" not in result.stderr
    assert elapsed < 20, f"{command} took {elapsed:.1f} s"
    assert 0 < peak < 300, f"{command} peaked at {peak} MB"


def test_a_dataset_just_over_the_limit_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "suite.yaml").write_text(DATASET)
    sparse(tmp_path / "rows.jsonl", MAX_FILE_BYTES + 1)
    result, _, peak = measured("validate", "suite.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "rows.jsonl: larger than 20 MB" in result.stderr, result.stderr
    assert peak < MAX_FILE_BYTES // 1_000_000 + 150  # less than the file and the interpreter together


def test_a_huge_suite_file_is_refused_before_it_is_read(tmp_path):
    sparse(tmp_path / "suite.yaml", HUGE)
    for command in ("validate", "run"):
        result, elapsed, peak = measured(command, "suite.yaml", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "suite.yaml: larger than 1 MB (1,500.0 MB); nothing was read" in result.stderr
        assert elapsed < 20 and peak < 300


def test_read_suite_files_stats_every_file_before_reading_any(tmp_path, monkeypatch):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        MESSAGE.replace(
            "- {type: file, value: notes.md}",
            "- {type: file, value: notes.md}\n          - {type: file, value: small.md}",
        )
    )
    (tmp_path / "small.md").write_text("small")
    sparse(tmp_path / "notes.md", HUGE)
    opened = []
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k)
    )
    with pytest.raises(SuiteError) as info:
        read_suite_files(suite, suite.read_text())
    assert [str(problem) for problem in info.value.problems] == ["notes.md: larger than 20 MB"]
    assert opened == []  # not even the small one: the suite is refused as a whole


@pytest.mark.parametrize(
    "name",
    [
        "my rubric.md",
        "../rubric.md",
        "sub/rubric.md",
        ".hidden.md",
        "-dash.md",
        "r\u00e9sum\u00e9.md",
        "x" * 201,
    ],
)
def test_a_name_the_web_app_refuses_is_refused_here_too(name, tmp_path):
    (tmp_path / "suite.yaml").write_text(RUBRIC.replace("rubric_file: rubric.md", f"rubric_file: {name!r}"))
    result = subprocess.run(
        [str(EVALSITE), "validate", "suite.yaml"],
        cwd=tmp_path,
        env=fresh_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert f"{name}: {NAME_RULE}" in result.stderr


def test_more_files_than_a_suite_may_have_are_refused(tmp_path):
    parts = "\n".join(f"          - {{type: file, value: part{n}.md}}" for n in range(MAX_FILES + 1))
    (tmp_path / "suite.yaml").write_text(MESSAGE.replace("          - {type: file, value: notes.md}", parts))
    for n in range(MAX_FILES + 1):
        (tmp_path / f"part{n}.md").write_text("x")
    with pytest.raises(SuiteError, match=f"{MAX_FILES + 1} attached files; a suite has at most {MAX_FILES}"):
        read_suite_files(tmp_path / "suite.yaml", (tmp_path / "suite.yaml").read_text())
