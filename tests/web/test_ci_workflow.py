"""examples/ci/github-actions.yml works as written: it compares with the pinned baseline, keeps one
pull-request comment (found by a hidden marker, then edited), and on a pull request from a fork (no secret)
skips the run with a notice. Its shell steps, read out of the workflow file, run against a live
`manage.py evalserve` (web server and Celery workers, embedded defaults, as `make run` starts them) with a
token made by `evalsite token create` on the server's database, as GitHub Actions runs them on a pull
request: first with no baseline pinned (passes), then, the first run pinned, on a change that breaks an eval
(fails the job), each time writing the summary the job page and the comment show."""

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


MARKER = "<!-- evalsite-summary: evals/suite.yaml -->"


def named(name: str) -> dict:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["evals"]["steps"]
    (found,) = [item for item in steps if item.get("name") == name]
    return found


def test_the_workflow_file_is_complete():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow[True] == {"pull_request": None}  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["evals"]["steps"]
    uses = [item["uses"].split("@")[0] for item in steps if "uses" in item]
    assert uses == [
        "actions/checkout", "actions/setup-python", "peter-evans/find-comment",
        "peter-evans/create-or-update-comment", "actions/upload-artifact",
    ]  # fmt: skip
    run = step("Run the evals on evalsite")
    assert (
        "--baseline pinned" in run
        and "--fail-on-regression" in run
        and "--markdown evalsite-summary.md" in run
    )
    assert '--baseline "$' not in run and "BASELINE" not in WORKFLOW.read_text()  # no run id to go stale

    # One comment: found by the hidden marker the summary is given, then edited in place.
    assert MARKER in step("Mark the summary for its comment")
    found = named("Find the summary's comment")
    assert found["with"]["body-includes"] == MARKER and found["id"] == "comment"
    assert found["with"]["comment-author"] == "github-actions[bot]"
    edit = named("Comment the summary on the pull request")["with"]
    assert edit["comment-id"] == "${{ steps.comment.outputs.comment-id }}" and edit["edit-mode"] == "replace"
    assert edit["body-path"] == "evalsite-comment.md"
    assert "gh pr comment" not in WORKFLOW.read_text()  # a new comment on every push, no more

    # A fork's pull request has no secret: everything that needs the server waits on the token check.
    assert named("Check for the server's token")["env"]["EVALSITE_TOKEN"] == "${{ secrets.EVALSITE_TOKEN }}"
    for name in ("Run the evals on evalsite", "Summary on the job page"):
        assert "steps.server.outputs.run == 'true'" in named(name)["if"]
    assert "secrets" not in str(named("Validate the suite"))  # validated with no secret


def test_a_fork_without_the_secret_skips_the_run_with_a_notice(tmp_path):
    outputs = tmp_path / "outputs"
    env = {"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(outputs), "EVALSITE_TOKEN": ""}
    check = ["bash", "-e", "-c", step("Check for the server's token")]
    skipped = subprocess.run(check, env=env, capture_output=True, text=True, timeout=30)
    assert skipped.returncode == 0 and skipped.stdout.startswith("::notice title=evals not run::")
    assert outputs.read_text() == "run=false\n"
    outputs.unlink()
    ran = subprocess.run(
        check, env={**env, "EVALSITE_TOKEN": "evs_x"}, capture_output=True, text=True, timeout=30
    )
    assert ran.returncode == 0 and ran.stdout == "" and outputs.read_text() == "run=true\n"


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
            if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "CI", "GITLAB_CI")
        }
        job.update(EVALSITE_SERVER=url, EVALSITE_TOKEN=token, GITHUB_ACTIONS="true", GITHUB_HEAD_REF="pr-7",
                   GITHUB_SHA="d" * 40, GITHUB_STEP_SUMMARY=str(tmp_path / "summary"),
                   PATH=f"{Path(EVALSITE).parent}:{job['PATH']}")  # fmt: skip

        def run_step(name: str) -> subprocess.CompletedProcess:
            return subprocess.run(["bash", "-e", "-c", step(name)], cwd=repo, env=job, capture_output=True,
                                  text=True, timeout=120)  # fmt: skip

        assert run_step("Validate the suite").returncode == 0
        first = run_step("Run the evals on evalsite")
        assert first.returncode == 0, first.stderr + first.stdout
        assert "no run of 'pr-evals' is pinned as its baseline yet" in first.stderr
        baseline = re.search(r"Run ([0-9a-f-]{36}) of pr-evals v1", first.stderr).group(1)
        assert (repo / "evalsite-junit.xml").exists() and (repo / "evalsite.turns.csv").exists()
        assert run_step("Summary on the job page").returncode == 0
        assert (tmp_path / "summary").read_text().startswith("### ✅ evalsite: pr-evals passed")
        assert run_step("Mark the summary for its comment").returncode == 0
        comment = (repo / "evalsite-comment.md").read_text()
        assert comment.startswith(MARKER + "\n### ✅ evalsite: pr-evals passed")

        # The first run is pinned as the baseline on its page; the pull request then breaks the hours.
        pin = f"from runs.models import Run; from runs.services import pin_baseline; pin_baseline(Run.objects.get(pk='{baseline}'))"  # fmt: skip
        pinned = subprocess.run([sys.executable, "manage.py", "shell", "-c", pin], cwd=ROOT, env=var_env,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert pinned.returncode == 0, pinned.stderr
        (repo / "evals" / "suite.yaml").write_text(SUITE.replace("We are open 9 to 5.", "Always open."))
        second = run_step("Run the evals on evalsite")
        assert second.returncode == 1, second.stderr + second.stdout  # the job fails on the regression
        assert (
            f"Baseline: run {baseline}, pinned for 'pr-evals'" in second.stderr
            and "1 regressed" in second.stdout
        )
        assert "v2 from pr-7 on mock" in second.stderr  # not the suite's latest on the server
        summary = (repo / "evalsite-summary.md").read_text()
        assert (
            "**1** regressed" in summary and '| regressed | hours | ❌ turn 1: contains "9 to 5"' in summary
        )
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
