"""`evalsite run --model a,b --server URL`: a real `evalsite` process launches a matrix on the live server
with an API token, a real Celery worker plays both runs, and the grid and the matrix's files come back."""

from __future__ import annotations

import csv
import os
import xml.etree.ElementTree as ET

import pytest

from runs.models import RunMatrix
from runs.tokens import create_token
from tests.e2e.test_e2e_ci import evalsite
from tests.engine.cli.test_terminal import in_a_terminal
from tests.factories import MOCK_CI_SUITE
from tests.fakeopenai import Reply

pytestmark = [pytest.mark.e2e]


def test_a_matrix_launched_from_the_terminal_plays_on_the_server(live_server, user, start_worker, tmp_path):
    start_worker()
    _, token = create_token(user, "ci")
    suite = tmp_path / "suite.yaml"
    suite.write_text(MOCK_CI_SUITE.format(name="matrix-loop"))
    result = evalsite(
        str(suite), "--server", live_server.url, "--model", "mock,mock@seed=7", "--junit", "junit.xml",
        "--csv", "grid.csv", token=token, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    matrix = RunMatrix.objects.get()
    runs = list(matrix.runs.order_by("created_at"))
    assert [run.status for run in runs] == ["passed", "passed"]
    assert runs[1].options == {"model_settings": {"seed": 7}, "label": "mock seed=7"}
    assert f"Matrix {matrix.pk} of matrix-loop v1" in result.stderr
    for name in ("[1/2] mock", "[2/2] mock seed=7"):  # each variant's end, said as it came
        assert f"{name}: 2 passed, 0 failed, 0 errors of 2" in result.stdout
    assert "add      pass  pass" in result.stdout and f"/matrices/{matrix.pk}/" in result.stdout
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["matrix-loop [mock]", "matrix-loop [mock seed=7]"]
    rows = list(csv.reader((tmp_path / "grid.csv").open()))
    assert [row[0] for row in rows[1:]] == ["add", "capital"]


# The variants differ in pace: the slow one's every reply takes seconds, the quick one's none.
PACED = """\
name: paced
model: fake/slow
evals:
  - {id: first, prompt: "Question 1: the capital of Australia?", checks: [{contains: Canberra}]}
  - {id: second, prompt: "Question 2: the capital of Australia?", checks: [{contains: Canberra}]}
"""
SLOW_SECONDS = 4.0


def paced(fake_openai, tmp_path):
    fake_openai.rule("capital of Australia", Reply(text="Canberra.", latency=SLOW_SECONDS), model="slow")
    fake_openai.rule("capital of Australia", "Canberra.", model="quick")
    suite = tmp_path / "paced.yaml"
    suite.write_text(PACED)
    return suite


def test_the_terminal_follows_every_variants_run_at_once(
    live_server, user, fake_endpoint, fake_openai, start_worker, tmp_path
):
    """The workers play the variants together, and so does the terminal follow them: without one, a line
    every few seconds names each variant with its figures, and the quick variant's end is said while the
    slow one still plays, not once the slow one (listed first) has ended."""
    start_worker()
    _, token = create_token(user, "ci")
    suite = paced(fake_openai, tmp_path)
    result = evalsite(
        str(suite), "--server", live_server.url, "--model", "fake/slow,fake/quick", "--progress-every", "0.3",
        "--markdown", "grid.md", token=token, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    ends = [line for line in result.stdout.splitlines() if " passed, 0 failed, 0 errors of 2" in line]
    assert ends == [
        "[2/2] fake/quick: 2 passed, 0 failed, 0 errors of 2",
        "[1/2] fake/slow: 2 passed, 0 failed, 0 errors of 2",
    ], result.stdout
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert progress and all(
        "[1/2] fake/slow: " in line and "; [2/2] fake/quick: " in line for line in progress
    )
    # While the slow variant still played, the quick one had ended: seen in one line.
    assert any(
        "[1/2] fake/slow: 0/2 conversations done" in line
        and "[2/2] fake/quick: 2/2 conversations done · 2 passed · 0 failed · 0 errored · ended: passed"
        in line
        for line in progress
    ), result.stderr
    assert "eval    fake/slow  fake/quick" in result.stdout  # the grid, once both have ended
    assert "| first | pass | pass |  |" in (tmp_path / "grid.md").read_text()


def test_on_a_terminal_a_live_line_per_variant(
    live_server, user, fake_endpoint, fake_openai, start_worker, tmp_path
):
    """In a terminal the display is live: a line per variant, redrawn in place, with each variant's end said
    above it as it comes."""
    start_worker()
    _, token = create_token(user, "ci")
    suite = paced(fake_openai, tmp_path)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["EVALSITE_TOKEN"] = token
    # Wide enough for a whole line: a line wider than the terminal is cut short, as it should be.
    chunks = in_a_terminal(
        suite, "--server", live_server.url, "--model", "fake/slow,fake/quick", env=env, columns=240
    )
    # What the terminal was sent, in order: the live lines are drawn over and over, then cleared, so only the
    # stream has them; the order says when each was drawn.
    whole = "".join(text for _, text in chunks)
    quick, slow = (
        whole.index(f"{name}: 2 passed, 0 failed, 0 errors of 2")
        for name in ("[2/2] fake/quick", "[1/2] fake/slow")
    )
    assert quick < slow, whole
    # Between the two ends, a line per variant: the slow one still playing, the quick one ended.
    between = whole[quick:slow]
    assert "[1/2] fake/slow: 0/2 conversations done · 0 passed · 0 failed · 0 errored\r\n" in between, whole
    assert (
        "[2/2] fake/quick: 2/2 conversations done · 2 passed · 0 failed · 0 errored · ended: passed"
        in between
    )
    assert "progress: " not in whole  # the plain lines are for a log, not a terminal


def test_a_matrix_on_a_server_needs_no_django_here(live_server, user, start_worker, tmp_path):
    """A CI job installs the client alone (`pip install evalsite`, no Django): following a matrix on a server
    through to its grid and each variant's last lines loads nothing of the server's."""
    start_worker()
    _, token = create_token(user, "ci")
    shadow = tmp_path / "client-only" / "django"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("a client install has no Django")\n')
    suite = tmp_path / "suite.yaml"
    suite.write_text(MOCK_CI_SUITE.format(name="client-only"))
    python_path = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    result = evalsite(
        str(suite), "--server", live_server.url, "--model", "mock,mock@seed=7", token=token, cwd=tmp_path,
        PYTHONPATH=python_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[2/2] mock seed=7: 2 passed, 0 failed, 0 errors of 2" in result.stdout
    assert "Matrix page: " in result.stdout
