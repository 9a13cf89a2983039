"""Fixtures of the `evalsite` command's tests: the installed script, a fake endpoint, a suite and a folder of suites."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import FAKE_KEY
from tests.engine.standalone import EVALSITE, SUITE
from tests.fakeopenai import FakeOpenAI


@pytest.fixture(scope="module", autouse=True)
def installed():
    if sys.prefix == sys.base_prefix:
        pytest.fail("run the tests with the project's venv (.venv/bin/python -m pytest)")
    assert EVALSITE.is_file(), (
        f"{EVALSITE} is missing: reinstall the project (pip install -e '.[server,dev]')"
    )


@pytest.fixture
def fake():
    with FakeOpenAI(api_key=FAKE_KEY) as server:
        yield server


@pytest.fixture
def suite(tmp_path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    return path


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
