"""Every YAML block of the docs passes `manage.py evalvalidate`, which reads named endpoints from the database."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tests.engine.doc_blocks import _as_suite, _attached, _yaml_blocks


@pytest.mark.django_db  # evalvalidate may read named endpoints when a database exists
@pytest.mark.parametrize("block", _yaml_blocks())
def test_documented_yaml_passes_evalvalidate(block, tmp_path):
    text, rule = _as_suite(block)
    assert rule != "unknown", (
        f"{block.where}: this YAML is not a suite, nor one eval, nor a list of evals or checks; fix it, or "
        "mark it <!-- not-suite --> if it is no part of a suite"
    )
    if text is None:
        pytest.skip(f"{block.where}: {rule}")
    suite = tmp_path / "suite.yaml"
    suite.write_text(text, encoding="utf-8")
    for name, content in _attached(block, text).items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("evalvalidate", str(suite), stdout=out, stderr=err)
    except (CommandError, SystemExit):
        shown = f"\nvalidated as {rule}:\n{text}" if text != block.body else ""
        pytest.fail(f"{block.where} is not a valid suite:\n{err.getvalue()}{shown}")
