"""The CI loop end to end: `evalsite run suite.yaml --server URL` as a CI job runs it, a real
`evalsite` process talking to the live server over HTTP with an API token, a real Celery worker playing the
run on the mock model; then the exports, the baseline comparison and each exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from runs.models import Run
from runs.services import pin_baseline
from runs.tokens import create_token
from tests.factories import MOCK_CI_SUITE

pytestmark = [pytest.mark.e2e]


EVALSITE = str(Path(sys.executable).with_name("evalsite"))

SUITE = MOCK_CI_SUITE.format(name="ci-loop")


def evalsite(*args: str, token: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["EVALSITE_TOKEN"] = token
    return subprocess.run(
        [EVALSITE, "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_ci_job_runs_on_the_server_compares_with_a_baseline_and_exits_by_it(
    live_server, user, start_worker, tmp_path
):
    start_worker()
    _, token = create_token(user, "ci")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)

    first = evalsite(str(suite), "--server", live_server.url, "--junit", "junit.xml", "--csv", "out.csv",
                     "--markdown", "summary.md", "--baseline", "pinned", token=token, cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "no run of 'ci-loop' is pinned as its baseline yet" in first.stderr  # the first run goes ahead
    baseline = Run.objects.get()
    assert baseline.status == "passed" and baseline.created_by == user
    assert f"Run {baseline.pk} of ci-loop v1 on mock" in first.stderr
    assert "2/2 conversations done · 2 passed · 0 failed · 0 errored" in first.stderr
    assert "Eval 2" in first.stdout and f"/runs/{baseline.pk}/" in first.stdout
    suite_xml = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (suite_xml.get("tests"), suite_xml.get("failures")) == ("2", "0")
    assert (tmp_path / "out.csv").read_text().count("\n") == 3  # header + 2 evals
    assert (tmp_path / "out.turns.csv").exists()
    assert (tmp_path / "summary.md").read_text().startswith("### ✅ evalsite: ci-loop passed")

    # The pull request breaks the capital: one regression against the baseline, pinned on its run page.
    pin_baseline(baseline)
    suite.write_text(SUITE.replace('reply: "Paris"', 'reply: "Lyon"'))
    second = evalsite(str(suite), "--server", live_server.url, "--baseline", "pinned",
                      "--fail-on-regression", "--markdown", "summary.md", token=token, cwd=tmp_path)  # fmt: skip
    assert second.returncode == 1, second.stderr
    assert f"Baseline: run {baseline.pk}, pinned for 'ci-loop'" in second.stderr
    assert f"Against run {baseline.pk}: 1 regressed, 0 fixed" in second.stdout
    assert "regressed: capital (passed → failed)" in second.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert "**1** regressed" in summary and "| capital | passed | failed |" in summary
    assert Run.objects.count() == 2 and Run.objects.latest("created_at").suite_version.number == 2


def test_exit_codes_for_what_goes_wrong(live_server, user, tmp_path):
    _, token = create_token(user, "ci")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)

    wrong_token = evalsite(str(suite), "--server", live_server.url, token="evs_wrong", cwd=tmp_path)
    assert wrong_token.returncode == 2 and "refused the token (401)" in wrong_token.stderr

    suite.write_text(SUITE.replace("checks: [{contains: Paris}]", "checks: [{contans: Paris}]"))
    invalid = evalsite(str(suite), "--server", live_server.url, token=token, cwd=tmp_path)
    assert invalid.returncode == 2 and "nothing was sent" in invalid.stderr
    assert "suite.yaml:9:" in invalid.stderr and Run.objects.count() == 0  # found here, before sending

    suite.write_text(SUITE)
    baseline = evalsite(str(suite), "--server", live_server.url, "--baseline", "00000000-0000-0000-0000-000000000000",
                        token=token, cwd=tmp_path)  # fmt: skip
    assert baseline.returncode == 2 and "no such run on the server (404" in baseline.stderr
    assert Run.objects.count() == 0  # a wrong baseline costs no run

    unreachable = evalsite(str(suite), "--server", "http://127.0.0.1:9", token=token, cwd=tmp_path)
    assert unreachable.returncode == 3 and "cannot reach the server" in unreachable.stderr

    no_token = evalsite(str(suite), "--server", live_server.url, token="", cwd=tmp_path)
    assert no_token.returncode == 2 and "needs an API token" in no_token.stderr

    local_baseline = evalsite(str(suite), "--baseline", "x", token=token, cwd=tmp_path)
    assert local_baseline.returncode == 2 and "add --server" in local_baseline.stderr
