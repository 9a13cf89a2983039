"""The `evalsite` command stands alone: a fresh checkout with the project installed and nothing else.

No SECRET_KEY, no EVALSITE_DEV, no DATABASE_URL, no migrated database, no server. Every command runs in a
subprocess, as a user or a CI job runs it, with the venv's `evalsite` script or `python manage.py`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FAKE_KEY, ROOT
from tests.fakeopenai import FakeOpenAI, Reply

BIN = Path(sys.executable).parent
EVALSITE = BIN / "evalsite"
# What the test process has that a fresh shell does not (tests/settings.py sets some of them).
NOT_IN_A_FRESH_SHELL = (
    "SECRET_KEY", "EVALSITE_DEV", "DEBUG", "DATABASE_URL", "CELERY_BROKER_URL", "EVALSITE_VAR_DIR",
    "DJANGO_SETTINGS_MODULE", "OPENAI_BASE_URL", "OPENAI_API_KEY", "PYTHONPATH", "VIRTUAL_ENV",
)  # fmt: skip

SUITE = """\
name: standalone
model: gpt-test
evals:
  - prompt: What is 15 * 7?
    checks:
      - match: "*105*"
  - prompt: What is 2 + 2?
    checks:
      - match: "*4*"
"""


def fresh_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in NOT_IN_A_FRESH_SHELL}
    return {**env, **extra}


@pytest.fixture(scope="module", autouse=True)
def installed():
    if sys.prefix == sys.base_prefix:
        pytest.fail("run the tests with the project's venv (.venv/bin/python -m pytest)")
    assert EVALSITE.is_file(), f"{EVALSITE} is missing: reinstall the project (pip install -e '.[dev]')"


def evalsite(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(EVALSITE), *args], cwd=cwd, env=fresh_env(**env), capture_output=True, text=True, timeout=120
    )


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """A user error: the exit code, no traceback, and one line on stderr holding every fragment."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def copy_repo(target: Path) -> Path:
    """The repository's files, as a fresh clone has them, with the venv where `make setup` puts it.

    The venv's install of the project points at this worktree (pip install -e); a clone's own `make setup`
    points at the clone. PYTHONPATH (in `clone_env`) makes the copy's code the code that runs.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(sys.prefix)
    return target


def clone_env(clone: Path, **extra: str) -> dict[str, str]:
    return fresh_env(PYTHONPATH=str(clone), **extra)


def in_clone(clone: Path, command: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], cwd=clone, env=clone_env(clone, **env), capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip


def readme_commands() -> tuple[list[str], list[tuple[str, int]]]:
    """The README's "Use the terminal" block: (lines that set up the shell, [(command, exit code)]).

    A command's exit code is 0 unless its comment says `exit N`.
    """
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("**Use the terminal**") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: no ```sh block after **Use the terminal**"
    setup, commands = [], []
    for line in block[1].splitlines():
        command, _, comment = line.strip().partition("  #")
        command = command.strip()
        if not command:
            continue
        if command.startswith((". ", "source ")):
            setup.append(command)
            continue
        code = re.search(r"\bexit (\d)\b", comment)
        commands.append((command, int(code[1]) if code else 0))
    assert setup and len(commands) >= 3, block[1]
    return setup, commands


def make_setup_steps() -> list[str]:
    """The Makefile's `setup` recipe, minus the install (the venv is there already)."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^setup:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "Makefile: no setup target"
    steps = [line.strip().replace("$(PY)", ".venv/bin/python") for line in recipe[1].splitlines()]
    assert all("$(" not in step for step in steps), steps
    return [step for step in steps if "manage.py" in step]


@pytest.fixture(scope="module")
def bare_clone(tmp_path_factory):
    return copy_repo(tmp_path_factory.mktemp("bare-clone"))


@pytest.fixture(scope="module")
def set_up_clone(tmp_path_factory):
    clone = copy_repo(tmp_path_factory.mktemp("set-up-clone"))
    for step in make_setup_steps():
        result = in_clone(clone, step)
        assert result.returncode == 0, f"{step}\n{result.stdout}{result.stderr}"
    assert (clone / "var" / "evalsite.sqlite3").is_file()
    return clone


def run_readme(clone: Path) -> None:
    setup, commands = readme_commands()
    for command, code in commands:
        result = in_clone(clone, " && ".join([*setup, command]))
        assert result.returncode == code, f"README: {command}\n{result.stdout}{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stdout.strip(), f"README: {command} printed nothing"
        for out in re.findall(r"--json (\S+)", command):
            data = json.loads((clone / out).read_text())
            assert data["format"] == "evalsite.results/1", out


def test_readme_terminal_commands_work_as_written_after_make_setup(set_up_clone):
    run_readme(set_up_clone)


def test_readme_terminal_commands_work_in_a_bare_clone_and_create_nothing(bare_clone):
    """Without `make setup`: no SECRET_KEY, no database. Nothing is written under var/ either."""
    run_readme(bare_clone)
    assert not (bare_clone / "var").exists()


def test_bare_clone_named_endpoint_needs_setup_or_the_default_endpoint(bare_clone):
    for command in (".venv/bin/evalsite run", ".venv/bin/python manage.py evalrun"):
        result = in_clone(bare_clone, f"{command} examples/demo-mock.yaml --model fake/x")
        line = assert_one_line_error(result, 2, "`fake/x`", "no endpoint named `fake`", "make setup")
        assert "OPENAI_BASE_URL" in line and "there is no database at" in line
        assert result.stdout == ""  # nothing was run
    assert not (bare_clone / "var").exists()


@pytest.mark.parametrize(
    "command",
    [
        ".venv/bin/python -c 'import evalsite.wsgi'",  # the web app
        ".venv/bin/celery -A evalsite worker --pool solo",  # a worker
        ".venv/bin/python manage.py evalserve",
        ".venv/bin/python manage.py migrate",
    ],
)
def test_server_and_workers_still_refuse_to_start_without_secret_key(bare_clone, command, tmp_path):
    """Only the terminal commands go without a SECRET_KEY; nothing that serves or signs does."""
    result = in_clone(bare_clone, command, EVALSITE_VAR_DIR=str(tmp_path))  # they make var/ before refusing
    assert result.returncode != 0
    assert "Set SECRET_KEY (or DEBUG=1 / EVALSITE_DEV=1 for a local setup)." in result.stderr


def test_named_endpoint_is_read_from_the_set_up_database(set_up_clone, tmp_path):
    """After `make setup`, an endpoint added in the admin is used; a typo in its name is caught up front."""
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        fake.script("What is 15 * 7?", ["105"])
        fake.script("What is 2 + 2?", ["4"])
        create = (
            "from endpoints.models import Endpoint; Endpoint.objects.create(name='fake', "
            f"base_url='{fake.base_url}', api_key_env='STANDALONE_FAKE_KEY')"
        )
        added = in_clone(set_up_clone, f'EVALSITE_DEV=1 .venv/bin/python manage.py shell -c "{create}"')
        assert added.returncode == 0, added.stderr
        suite = tmp_path / "suite.yaml"
        suite.write_text(SUITE)

        ran = in_clone(
            set_up_clone,
            f".venv/bin/evalsite run {suite} --model fake/gpt-test",
            STANDALONE_FAKE_KEY=FAKE_KEY,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "model fake/gpt-test\n" in ran.stdout  # named once: the endpoint is its prefix
        assert {body["model"] for body in fake.chat_requests()} == {"gpt-test"}

        typo = in_clone(set_up_clone, f".venv/bin/evalsite run {suite} --model faek/gpt-test")
        assert_one_line_error(typo, 2, "no endpoint named `faek`", "did you mean `fake`?", "OPENAI_BASE_URL")


def test_unmigrated_database_is_not_read_and_not_an_error(bare_clone, tmp_path):
    """An empty, unmigrated database file is not read: mock runs; `fake/x` says to migrate."""
    (tmp_path / "evalsite.sqlite3").touch()
    env = {"EVALSITE_VAR_DIR": str(tmp_path)}
    ran = in_clone(bare_clone, ".venv/bin/evalsite run examples/capitals-per-turn.yaml", **env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    named = in_clone(bare_clone, ".venv/bin/evalsite run examples/demo-mock.yaml --model fake/x", **env)
    assert_one_line_error(named, 2, "the database is not migrated", "make setup")
    with sqlite3.connect(tmp_path / "evalsite.sqlite3") as database:
        assert database.execute("SELECT name FROM sqlite_master").fetchall() == []  # still not migrated


def test_installed_package_works_from_any_folder(tmp_path):
    """As after a non-editable `pip install`: only the packages, no manage.py, run from another folder."""
    site = tmp_path / "site-packages"
    for package in ("evalsite", "engine", "endpoints", "runs", "suites"):
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "ci"
    (work / "suites").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "capitals-per-turn.yaml", work / "suites")
    shutil.copy(ROOT / "examples" / "capitals.jsonl", work / "suites")

    result = evalsite(
        "run", "suites/capitals-per-turn.yaml", "--json", "out.json", cwd=work, PYTHONPATH=str(site)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Overall: ✅ PASS (passed)" in result.stdout
    assert json.loads((work / "out.json").read_text())["status"] == "passed"
    assert sorted(path.name for path in site.iterdir()) == [
        "endpoints",
        "engine",
        "evalsite",
        "runs",
        "suites",
    ]
    assert sorted(path.name for path in work.iterdir()) == ["out.json", "suites"]


def test_help_documents_commands_and_exit_codes(tmp_path):
    top = evalsite("--help", cwd=tmp_path)
    assert top.returncode == 0
    assert re.search(r"^\s+run\s+run a suite", top.stdout, re.M)
    assert re.search(r"^\s+validate\s+check suite files", top.stdout, re.M)
    for code in ("0  the run passed", "1  the run did not pass", "2  nothing was run", "3  the endpoint"):
        assert code in top.stdout
    assert "the exit code is 3" in top.stdout  # the precedence of errors over failures
    run = evalsite("run", "--help", cwd=tmp_path)
    assert "--model M" in run.stdout and "--concurrency N" in run.stdout and "3  the endpoint" in run.stdout
    for alias_help in (["evalrun", "--help"], ["help", "evalrun"]):
        alias = subprocess.run(
            [sys.executable, "manage.py", *alias_help], cwd=ROOT, env=fresh_env(), capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
        assert alias.returncode == 0, alias.stderr
        assert alias.stdout.startswith("usage: manage.py evalrun [-h] [--model M]")
        assert "3  the endpoint" in alias.stdout


# --- exit codes --------------------------------------------------------------------------------------------


@pytest.fixture
def fake():
    with FakeOpenAI(api_key=FAKE_KEY) as server:
        yield server


@pytest.fixture
def suite(tmp_path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    return path


def run_on(
    fake: FakeOpenAI, suite: Path, *args: str, key: str = FAKE_KEY, **extra: str
) -> subprocess.CompletedProcess:
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": key, "EVALSITE_MAX_RETRIES": "1", **extra}
    return evalsite("run", str(suite), *args, cwd=suite.parent, EVALSITE_VAR_DIR=str(suite.parent), **env)


def test_exit_0_when_every_eval_passes(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    assert run_on(fake, suite).returncode == 0


def test_exit_1_when_an_eval_fails(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["5"])
    result = run_on(fake, suite)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""


def test_exit_1_when_a_gate_fails_though_every_eval_passed(tmp_path):
    path = tmp_path / "gated.yaml"
    path.write_text(
        SUITE.replace(
            "model: gpt-test",
            "model: mock\nmock: {default: '105 and 4'}\ngates: [{metric: avg, op: '<', value: 1}]",
        )
    )
    result = evalsite("run", str(path), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 passed, 0 failed" in result.stdout and "Gate avg < 1: ❌ FAIL" in result.stdout


def test_a_wait_to_retry_is_said_on_stderr(fake, suite):
    """Calls retry for minutes now: the terminal says what it waits for instead of looking hung."""
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    fake.fail_next(1, status=429, retry_after=1, first_user="What is 2 + 2?")
    result = run_on(fake, suite)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "default: waiting for rate limit, retrying in 1 s" in result.stderr


def test_a_concurrency_over_the_endpoints_limit_is_held_to_it_and_said(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    held = run_on(fake, suite, "--concurrency", "50")
    assert held.returncode == 0, held.stdout + held.stderr
    assert (
        "concurrency 50 held to 10, the default endpoint's limit (EVALSITE_DEFAULT_CONCURRENCY)"
        in held.stderr
    )
    raised = run_on(fake, suite, "--concurrency", "50", EVALSITE_DEFAULT_CONCURRENCY="50")
    assert raised.returncode == 0 and "held to" not in raised.stderr


def test_exit_3_on_a_reply_cut_off_says_so_not_the_key(fake, suite):
    """A reply that did not finish is an error, not a FAIL, and the advice is the suite's rule, not the key."""
    fake.script("What is 15 * 7?", [Reply("15 * 7 is", finish_reason="length")])
    fake.script("What is 2 + 2?", ["4"])
    result = run_on(fake, suite)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "⚠ Not a finished reply: reply cut off at the token limit (finish_reason: length)" in result.stdout
    assert "1 of 2 conversations ended at a reply that did not finish" in result.stderr
    assert "endpoint error" not in result.stderr and "OPENAI_API_KEY" not in result.stderr


def test_exit_3_on_401(fake, suite):
    result = run_on(fake, suite, key="sk-wrong")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "💥 ERROR (HTTP 401 from default" in result.stdout
    assert "Traceback" not in result.stderr
    assert "2 of 2 conversations ended in an endpoint error" in result.stderr
    assert "OPENAI_API_KEY" in result.stderr


def test_exit_3_when_the_endpoint_is_unreachable(tmp_path, suite):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x", "EVALSITE_MAX_RETRIES": "0"}
    result = evalsite("run", str(suite), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path), **env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot reach default at http://127.0.0.1:9/v1" in result.stdout


def test_exit_3_outranks_1_when_evals_fail_and_others_error(fake, suite):
    fake.script("What is 15 * 7?", ["100"])  # fails
    fake.script("What is 2 + 2?", [Reply(status=500, text="overloaded")])  # errors after its retry
    out = suite.parent / "out.json"
    result = run_on(fake, suite, "--json", str(out))
    assert result.returncode == 3, result.stdout + result.stderr
    assert re.search(r"Summary: 0 passed, 1 failed, 1 errors? of 2 evals", result.stdout)
    assert "1 of 2 conversations ended in an endpoint error" in result.stderr
    assert json.loads(out.read_text())["status"] == "error"  # the results are still written


# --- user errors: one line, what to do, exit 2 ------------------------------------------------------------


@pytest.fixture
def folder(tmp_path) -> Path:
    """A folder of suites as a user has them, with a dataset or two."""
    (tmp_path / "good.yaml").write_text(SUITE)
    head = "name: rows\nmodel: mock\ngrader: contains\n"
    (tmp_path / "missing-data.yaml").write_text(head + "dataset: rows.jsonl\n")
    (tmp_path / "bad-data.yaml").write_text(head + "dataset: bad.jsonl\n")
    (tmp_path / "bad.jsonl").write_text('{"input": "hi", "ground_truth": "hi"}\n{"input": "x"\n')
    (tmp_path / "bad-csv.yaml").write_text(head + "dataset: rows.csv\n")
    (tmp_path / "rows.csv").write_text("question,answer\nhi,there\n")
    (tmp_path / "subdir").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["run", "nope.yaml"], ["nope.yaml: no such file", "relative to"]),
        (["validate", "nope.yaml"], ["nope.yaml: no such file"]),
        (["run", "."], [".: is a folder; give a suite file, e.g."]),
        (["run", "good.yaml", "--model", ""], ["--model is empty"]),
        (["run", "good.yaml", "--model", " "], ["--model is empty"]),
        (["run", "good.yaml", "--model", "fake/x"], ["no endpoint named `fake`", "make setup"]),
        (["run", "good.yaml", "--model", "fake/"], ["--model `fake/`: write a model id, `endpoint/model`"]),
        (["run", "good.yaml", "--json", "subdir"], ["--json subdir: is a folder"]),
        (["run", "good.yaml", "--json", "no/such/out.json"], ["there is no folder no/such"]),
    ],
)
def test_user_errors_are_one_line_with_exit_2(folder, args, fragments):
    result = evalsite(*args, cwd=folder, EVALSITE_VAR_DIR=str(folder))
    lines = result.stderr.splitlines()
    if args[0] == "validate":  # the file's own line, then the count
        assert lines[-1] == "evalsite: 1 of 1 file has problems"
        lines = lines[:-1]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert all(fragment in lines[0] for fragment in fragments), lines[0]
    assert result.stdout == ""


def test_every_model_the_suite_names_is_checked_before_anything_runs(fake, tmp_path):
    """A judge or simulated user on an endpoint that is not there is refused up front (none configured);
    with OPENAI_BASE_URL set, it goes whole to the default endpoint, and a note says so."""
    path = tmp_path / "refs.yaml"
    path.write_text(
        "name: refs\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n"
        "      - llm_judge: {criteria: polite, model: faek/judge}\n"
    )
    refused = evalsite("run", str(path), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path))
    assert_one_line_error(
        refused, 2, "evals[0].checks[0].llm_judge.model `faek/judge`: no endpoint named `faek`"
    )
    assert fake.chat_requests() == []

    fake.rule("polite", '{"score": 1, "reason": "polite"}', where="any")
    sent = evalsite(
        "run", str(path), cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path), OPENAI_BASE_URL=fake.base_url,
        OPENAI_API_KEY=FAKE_KEY,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert sent.stderr.startswith("note: evals[0].checks[0].llm_judge.model `faek/judge` goes whole to the")
    assert {body["model"] for body in fake.chat_requests()} == {"faek/judge"}


@pytest.mark.parametrize(
    ("suite", "expected"),
    [
        (
            "missing-data.yaml",
            [
                "missing-data.yaml:4:10 dataset: file `rows.jsonl` is not attached (attached: none)",
                "missing-data.yaml: attached files are read from its folder ({folder}), which has no file "
                "rows.jsonl",
            ],
        ),
        ("bad-data.yaml", ["bad.jsonl:2: not valid JSON: "]),
        ("bad-csv.yaml", ["rows.csv:1: the header has no `input` column (columns: question, answer)"]),
    ],
)
@pytest.mark.parametrize("command", ["run", "validate"])
def test_unreadable_dataset_names_the_file_and_line(folder, suite, expected, command):
    """Problems in an attached file are located in that file (next to the suite), not in the suite."""
    result = evalsite(command, suite, cwd=folder, EVALSITE_VAR_DIR=str(folder))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    for line, wanted in zip(lines, expected, strict=False):
        assert line.startswith(wanted.format(folder=folder)), result.stderr
    assert len(lines) == len(expected) + 1  # and the summary line


def as_from_a_terminal() -> None:
    """In the child, before exec: SIGINT at its default, as a terminal's Ctrl-C finds it. A shell that runs
    the tests as a background job (a CI runner may) starts them with SIGINT ignored, which every child
    inherits, and Python leaves an ignored SIGINT ignored, so the command never saw the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_run_with_one_line(fake, suite):
    """Interrupting a run is the user's choice, not a crash: one line, exit 130, no traceback."""
    fake.script("What is 15 * 7?", [Reply(text="105", latency=30)])
    fake.script("What is 2 + 2?", [Reply(text="4", latency=30)])
    env = {
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": FAKE_KEY,
        "EVALSITE_VAR_DIR": str(suite.parent),
    }
    process = subprocess.Popen(
        [str(EVALSITE), "run", str(suite)], cwd=suite.parent, env=fresh_env(**env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not fake.requests and time.monotonic() < deadline:  # a conversation is in flight
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert time.monotonic() - interrupted < 15  # not after the replies in flight (30 s)
    assert err.strip() == "evalsite: interrupted; no report or results were written"


# --- evalsite import (issue 14) ----------------------------------------------------------------------------

IMPORTS = ROOT / "tests" / "fixtures" / "imports"


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


def test_import_of_vibecheck_typed_checks_is_whole_and_tools_and_variables_are_located_losses(tmp_path):
    whole = evalsite("import", str(IMPORTS / "vibecheck" / "typed-checks.yaml"), "--out", "a", cwd=tmp_path)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "(string_contains) → contains" in whole.stdout and whole.stderr == ""
    lossy = evalsite(
        "import", str(IMPORTS / "vibecheck" / "tools-and-variables.yaml"), "--out", "b", cwd=tmp_path
    )
    assert lossy.returncode == 1, lossy.stdout + lossy.stderr
    lost = lossy.stderr.splitlines()
    assert any(line.startswith("lost: tools-and-variables.yaml:7 metadata.mcp_server:") for line in lost), (
        lost
    )
    assert len(lost) == 1, lost  # the MCP server; the variables are suite variables now
    assert "--var tracker.team=… --var tracker.projectKey=…" in lossy.stdout
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
    given = str(IMPORTS / "vibecheck" / "tools-and-variables.yaml")
    auto = evalsite("import", given, "--out", "auto", cwd=tmp_path)
    kind = evalsite("import", "--kind", "vibecheck", given, "--out", "kind/s.yaml", cwd=tmp_path)
    assert (auto.returncode, kind.returncode) == (1, 1), kind.stdout + kind.stderr
    assert kind.stderr == auto.stderr
    assert kind.stderr.startswith("lost: tools-and-variables.yaml:7 metadata.mcp_server:")
    assert "Lost (it graded or drove the conversation): 1 item, on stderr" in kind.stdout  # the MCP server
    assert "metadata.mcp_server" not in kind.stdout  # a loss is on stderr, not among "Not converted"


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
