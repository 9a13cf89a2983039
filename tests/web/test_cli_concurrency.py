"""`evalsite run --concurrency N` on a named endpoint: the admin's max concurrency is the limit, and a
demand above it is refused in one line naming where it is set, before any call; never quietly held."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest

from endpoints.models import Endpoint
from evalsite import terminal
from evalsite.cli import main

pytestmark = pytest.mark.django_db

SUITE = """\
name: capped
model: fake/gpt-test
evals:
  - prompt: Say OK
    checks:
      - match: "*OK*"
"""


def run(tmp_path, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(terminal, "active", terminal.active)  # the command sets it; put it back after
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
        code = main(["run", str(suite), *args])
    return code, out.getvalue(), err.getvalue()


def test_a_concurrency_above_a_named_endpoints_cap_is_refused_and_nothing_runs(
    tmp_path, monkeypatch, fake_endpoint, fake_openai
):
    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=4)
    code, out, err = run(tmp_path, monkeypatch, "--concurrency", "8")
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert "--concurrency 8" in line and "allows 4" in line
    assert "Endpoints → Endpoints → fake → max concurrency" in line
    assert fake_openai.chat_requests() == []


@pytest.mark.parametrize("args", [("--concurrency", "4"), ()])
def test_a_concurrency_within_the_cap_or_none_given_runs(
    tmp_path, monkeypatch, fake_endpoint, fake_openai, args
):
    """The default (10) is no demand: an endpoint capped at 4 plays it 4 at a time, without a word."""
    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=4)
    code, out, err = run(tmp_path, monkeypatch, *args)
    assert code == 0 and err == "", out + err
    assert "Summary: 1 passed" in out
    assert len(fake_openai.chat_requests()) == 1
