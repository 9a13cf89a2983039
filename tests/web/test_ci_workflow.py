"""examples/ci/github-actions.yml works as written: its shell steps, read out of the workflow file,
run against a live `manage.py evalserve` (web server and Celery workers, embedded defaults, as `make run`
starts them) with a token made by `evalsite token create` on the server's database. First with no
baseline (passes), then on a pull request that breaks an eval, against the first run as baseline (fails
the job), each time writing the summary the job page shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.web.test_evalserve import children, free_port, var_env  # noqa: F401  (a fixture)

WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
EVALSITE = str(Path(sys.executable).with_name("evalsite"))

SUITE = """\
name: pr-evals
model: mock
mock:
  rules:
    - {when: "*refund*", reply: "Refunds take 5 days."}
    - {when: "*hours*", reply: "We are open 9 to 5."}
evals:
  - {id: refunds, prompt: How long do refunds take?, checks: [{contains: "5 days"}]}
  - {id: hours, prompt: What are your hours?, checks: [{contains: "9 to 5"}]}
"""


def step(name: str) -> str:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["evals"]["steps"]
    (found,) = [item for item in steps if item.get("name") == name]
    assert "${{" not in found["run"], "a step run here must take its inputs from env, not expressions"
    return found["run"]


def test_the_workflow_file_is_complete():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow[True] == {"pull_request": None}  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["evals"]["steps"]
    uses = [item["uses"].split("@")[0] for item in steps if "uses" in item]
    assert uses == ["actions/checkout", "actions/setup-python", "actions/upload-artifact"]
    comment = next(item for item in steps if item.get("name") == "Comment the summary on the pull request")
    assert "gh pr comment" in comment["run"] and "--body-file evalsite-summary.md" in comment["run"]
    run = step("Run the evals on evalsite")
    assert "--fail-on-regression" in run and "--junit" in run and "--markdown evalsite-summary.md" in run


@pytest.mark.timeout(240)
def test_the_workflow_steps_run_against_a_live_evalserve(var_env, tmp_path):  # noqa: F811
    port = free_port()
    log = (tmp_path / "evalserve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "manage.py", "evalserve", f"127.0.0.1:{port}", "--processes", "1", "--workers", "4"],
        cwd=ROOT, env=var_env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/accounts/login/", timeout=2):
                    break
            except urllib.error.HTTPError:
                raise
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, (tmp_path / "evalserve.log").read_text()[-3000:]  # fmt: skip
                time.sleep(0.2)
        made = subprocess.run([EVALSITE, "token", "create", "--user", "admin", "--name", "ci"], cwd=ROOT,
                              env=var_env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()

        repo = tmp_path / "repo"
        (repo / "evals").mkdir(parents=True)
        (repo / "evals" / "suite.yaml").write_text(SUITE)
        job = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
        }
        job.update(EVALSITE_SERVER=url, EVALSITE_TOKEN=token, BASELINE="",
                   GITHUB_STEP_SUMMARY=str(tmp_path / "summary"), PATH=f"{Path(EVALSITE).parent}:{job['PATH']}")  # fmt: skip

        def run_step(name: str) -> subprocess.CompletedProcess:
            return subprocess.run(["bash", "-e", "-c", step(name)], cwd=repo, env=job, capture_output=True,
                                  text=True, timeout=120)  # fmt: skip

        first = run_step("Run the evals on evalsite")
        assert first.returncode == 0, first.stderr + first.stdout
        baseline = re.search(r"Run ([0-9a-f-]{36}) of pr-evals v1", first.stderr).group(1)
        assert (repo / "evalsite-junit.xml").exists() and (repo / "evalsite.turns.csv").exists()
        assert run_step("Summary on the job page").returncode == 0
        assert (tmp_path / "summary").read_text().startswith("### ✅ evalsite: pr-evals passed")

        # The pull request breaks the hours; the baseline is the first run.
        (repo / "evals" / "suite.yaml").write_text(SUITE.replace("We are open 9 to 5.", "Always open."))
        job["BASELINE"] = baseline
        second = run_step("Run the evals on evalsite")
        assert second.returncode == 1, second.stderr + second.stdout  # the job fails on the regression
        assert "1 regressed" in second.stdout
        summary = (repo / "evalsite-summary.md").read_text()
        assert "**1** regressed" in summary and "| hours | passed | failed |" in summary
        assert f"{url}/runs/{baseline}/" in summary  # the baseline is linked
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        for pid, command in children(server.pid):
            if "celery" in command:
                os.kill(pid, 9)
        log.close()
