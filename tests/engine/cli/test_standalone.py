"""The `evalsite` command stands alone: a fresh checkout with the project installed and nothing else.

No SECRET_KEY, no EVALSITE_DEV, no DATABASE_URL, no migrated database, no server. Every command runs in a
subprocess, as a user or a CI job runs it, with the venv's `evalsite` script or `python manage.py`.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAKE_KEY, ROOT
from tests.engine.standalone import (
    SUITE,
    assert_one_line_error,
    evalsite,
    fresh_env,
)
from tests.fakeopenai import FakeOpenAI


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
        assert "`default/fake/x`" in line and "there is no database at" in line
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
        assert_one_line_error(
            typo, 2, "no endpoint named `faek`", "did you mean `fake`?", "`default/faek/gpt-test`"
        )


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
    assert "\nOverall: ✅ PASS\n" in result.stdout
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
