"""Running the `evalsite` command in a subprocess as a fresh shell runs it, and cloning the checkout for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import FAKE_KEY, ROOT
from tests.fakeopenai import FakeOpenAI

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


def run_on(
    fake: FakeOpenAI, suite: Path, *args: str, key: str = FAKE_KEY, **extra: str
) -> subprocess.CompletedProcess:
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": key, "EVALSITE_MAX_RETRIES": "1", **extra}
    return evalsite("run", str(suite), *args, cwd=suite.parent, EVALSITE_VAR_DIR=str(suite.parent), **env)


def as_from_a_terminal() -> None:
    """In the child, before exec: SIGINT at its default, as a terminal's Ctrl-C finds it. A shell that runs
    the tests as a background job (a CI runner may) starts them with SIGINT ignored, which every child
    inherits, and Python leaves an ignored SIGINT ignored, so the command never saw the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


IMPORTS = ROOT / "tests" / "fixtures" / "imports"
