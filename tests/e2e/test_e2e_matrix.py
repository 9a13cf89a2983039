"""`evalsite run --model a,b --server URL`: a real `evalsite` process launches a matrix on the live server
with an API token, a real Celery worker plays both runs, and the grid and the matrix's files come back."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import pytest

from runs.models import RunMatrix
from runs.tokens import create_token
from tests.e2e.test_e2e_ci import evalsite
from tests.factories import MOCK_CI_SUITE

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
    assert "2/2 conversations done · 2 passed" in result.stderr
    assert "add      pass  pass" in result.stdout and f"/matrices/{matrix.pk}/" in result.stdout
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["matrix-loop [mock]", "matrix-loop [mock seed=7]"]
    rows = list(csv.reader((tmp_path / "grid.csv").open()))
    assert [row[0] for row in rows[1:]] == ["add", "capital"]
