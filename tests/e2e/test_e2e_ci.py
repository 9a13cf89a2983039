"""The CI loop end to end: `evalsite run suite.yaml --server URL` as a CI job runs it, a real
`evalsite` process talking to the live server over HTTP with an API token, a real Celery worker playing the
run on the mock model; then the exports, the baseline comparison and each exit code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import pytest

from runs.models import Run
from runs.services import pin_baseline
from runs.tokens import create_token
from suites import services as suite_services
from tests.factories import MOCK_CI_SUITE

pytestmark = [pytest.mark.e2e]


EVALSITE = str(Path(sys.executable).with_name("evalsite"))

SUITE = MOCK_CI_SUITE.format(name="ci-loop")


CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI")  # the CLI reads its ref from these: this test sets them


def evalsite(*args: str, token: str, cwd: Path, **ci: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", *CI_VARIABLES)
    }
    env.update(ci, EVALSITE_TOKEN=token)
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
    # No terminal and no known CI: a job all the same, kept under `ci`; a suite new to the server starts there.
    assert f"Run {baseline.pk} of ci-loop v1 from ci on mock" in first.stderr
    assert "2/2 conversations done · 2 passed · 0 failed · 0 errored" in first.stderr
    assert "Eval 2" in first.stdout and f"/runs/{baseline.pk}/" in first.stdout
    suite_xml = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (suite_xml.get("tests"), suite_xml.get("failures")) == ("2", "0")
    assert (tmp_path / "out.csv").read_text().count("\n") == 3  # header + 2 evals
    assert (tmp_path / "out.turns.csv").exists()
    assert (tmp_path / "summary.md").read_text().startswith("### ✅ evalsite: ci-loop passed")

    # A pull request breaks the capital: one regression against the baseline, pinned on its run page. It
    # runs in GitHub Actions, so its suite is kept under the branch and never becomes the suite's latest.
    pin_baseline(baseline)
    suite.write_text(SUITE.replace('reply: "Paris"', 'reply: "Lyon"'))
    github = {"GITHUB_ACTIONS": "true", "GITHUB_HEAD_REF": "fix-lyon", "GITHUB_SHA": "f00d" * 10}
    second = evalsite(str(suite), "--server", live_server.url, "--baseline", "pinned",
                      "--fail-on-regression", "--markdown", "summary.md", token=token, cwd=tmp_path,
                      **github)  # fmt: skip
    assert second.returncode == 1, second.stderr
    assert f"Baseline: run {baseline.pk}, pinned for 'ci-loop'" in second.stderr
    assert f"Against run {baseline.pk}: 1 regressed, 0 fixed" in second.stdout
    assert "regressed: capital (passed → failed)" in second.stdout
    assert 'regressed: capital: turn 1: contains "Paris": substring not found' in second.stderr
    assert "Gate failed: 1 regression (--fail-on-regression)" in second.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "**1** regressed" in summary and '| regressed | capital | ❌ turn 1: contains "Paris"' in summary
    ran = Run.objects.latest("created_at")
    assert ran.ref == "fix-lyon" and ran.suite_version.number == 2 and ran.suite_version.commit == "f00d" * 10
    assert "v2 from fix-lyon on mock" in second.stderr
    assert baseline.suite_version.suite.latest_version.number == 1  # the editor's line is untouched

    # The next push fixes the capital and adds an eval that fails: no regression, so the regression gate
    # holds and names the new failure with its reason; the new-failures gate fails on it.
    suite.write_text(SUITE + "  - {id: hello, prompt: Say hello, checks: [{contains: hello}]}\n")
    third = evalsite(str(suite), "--server", live_server.url, "--baseline", "pinned", "--fail-on-regression",
                     "--markdown", "summary.md", token=token, cwd=tmp_path, **github)  # fmt: skip
    assert third.returncode == 0, third.stderr
    assert "new failure: hello: turn 1: contains" in third.stderr
    assert (
        "Gate held: no regression (1 new eval failing, not gated without --fail-on-new-failures)"
        in third.stderr
    )
    assert "| new | hello | ❌ turn 1: contains" in (tmp_path / "summary.md").read_text()
    strict = evalsite(str(suite), "--server", live_server.url, "--baseline", "pinned", "--fail-on-regression",
                      "--fail-on-new-failures", token=token, cwd=tmp_path, **github)  # fmt: skip
    assert (
        strict.returncode == 1 and "Gate failed: 1 new eval failing (--fail-on-new-failures)" in strict.stderr
    )
    assert (
        "v3 from fix-lyon on mock" in strict.stderr
        and Run.objects.latest("created_at").suite_version.number == 3
    )


def test_a_job_of_a_ci_it_does_not_know_never_replaces_the_suite_people_edit(
    live_server, user, start_worker, tmp_path
):
    """Jenkins and Azure Pipelines set no CI variable: with no terminal attached the job keeps its suite
    under a ref all the same, and only --as-latest makes its text the suite's latest."""
    start_worker()
    _, token = create_token(user, "ci")
    suite = suite_services.create_suite(owner=user, source=SUITE)
    edited = SUITE.replace("What is 2+2?", "What is 2+2 then?")
    suite_services.save_version(suite=suite, source=edited, user=user)  # saved in the editor: v2, the latest
    sent = tmp_path / "suite.yaml"
    sent.write_text(SUITE.replace('reply: "Paris"', 'reply: "Lyon"'))

    jenkins = evalsite(str(sent), "--server", live_server.url, token=token, cwd=tmp_path,
                       JENKINS_URL="http://jenkins.example/", BUILD_ID="7")  # fmt: skip
    assert jenkins.returncode == 1, jenkins.stderr  # the capital is wrong: the run fails, as it should
    assert "v3 from ci on mock" in jenkins.stderr
    suite.refresh_from_db()
    assert suite.latest_version.number == 2 and suite.latest_version.source == edited

    chosen = evalsite(str(sent), "--server", live_server.url, "--as-latest", token=token, cwd=tmp_path)
    assert "v4 on mock" in chosen.stderr
    assert "v4 is the suite's latest version: its editor and launch form show it" in chosen.stderr
    suite.refresh_from_db()
    assert suite.latest_version.number == 4
    both = evalsite(str(sent), "--server", live_server.url, "--as-latest", "--ref", "x", token=token,
                    cwd=tmp_path)  # fmt: skip
    assert both.returncode == 2 and "choose one" in both.stderr


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


# The server's dependencies, which the client install leaves out (pyproject.toml's `server` extra), and the
# heavy ones neither install needs (the tests' reference statistics).
SERVER_ONLY = {"django", "celery", "psycopg"}
NEITHER = {"scipy", "scikit-learn"}
BLOCKER = """\
import sys

class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"django", "celery", "psycopg", "scipy", "sklearn"}:
            raise ImportError(f"{name}: not in the client install")
        return None

sys.meta_path.insert(0, _Blocked())
"""


def test_the_client_install_leaves_the_server_out():
    import tomllib

    from tests.conftest import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower() for line in project["dependencies"]}
    assert not names & (SERVER_ONLY | NEITHER) and "server" in project["optional-dependencies"]
    assert "orjson" in names  # evalsite/cli/outputs.py writes --json with it, `run --server` included
    served = {re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower() for line in project["optional-dependencies"]["server"]}  # fmt: skip
    assert served >= SERVER_ONLY and not served & NEITHER
    # As installed: what pip reads from the package's metadata.
    required = [line for line in metadata.requires("evalsite") if "extra ==" not in line]
    assert not {re.split(r"[\s\[<>=!~;(]", line, maxsplit=1)[0].lower() for line in required} & (
        SERVER_ONLY | NEITHER
    )


def test_the_client_runs_on_a_server_without_the_servers_dependencies(
    live_server, user, start_worker, tmp_path
):
    start_worker()
    _, token = create_token(user, "ci")
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    client = {"PYTHONPATH": str(blocker)}
    proof = subprocess.run([sys.executable, "-c", "import django"], env={**os.environ, **client},
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proof.returncode == 1 and "not in the client install" in proof.stderr
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    checked = subprocess.run([EVALSITE, "validate", str(suite)], env={**os.environ, **client}, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    ran = evalsite(str(suite), "--server", live_server.url, "--markdown", "summary.md", "--ref", "main",
                   token=token, cwd=tmp_path, **client)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "Wrote the Markdown summary to summary.md" in ran.stdout
    assert Run.objects.get().status == "passed" and Run.objects.get().ref == "main"
