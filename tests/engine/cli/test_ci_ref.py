"""The ref a CI launch is kept under, read from the CI's environment (or --ref): the suite a job sends is
then never the suite's latest version on the server. Outside CI there is none."""

from __future__ import annotations

import subprocess

import pytest

from evalsite.cli.ci import ci_ref


def test_github_actions_gives_the_pull_requests_branch_else_the_pushed_ref(tmp_path):
    pull = {"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_HEAD_REF": "fix-tone", "GITHUB_REF_NAME": "12/merge",
            "GITHUB_SHA": "a" * 40}  # fmt: skip
    assert ci_ref(None, pull, tmp_path) == ("fix-tone", "a" * 40)
    push = {**pull, "GITHUB_HEAD_REF": ""}
    assert ci_ref(None, push, tmp_path) == ("12/merge", "a" * 40)


def test_gitlab_ci_gives_its_ref_and_commit(tmp_path):
    env = {"GITLAB_CI": "true", "CI": "true", "CI_COMMIT_REF_NAME": "main", "CI_COMMIT_SHA": "b" * 40}
    assert ci_ref(None, env, tmp_path) == ("main", "b" * 40)


def test_another_ci_reads_git_and_never_goes_without_a_ref(tmp_path):
    assert ci_ref(None, {"CI": "true"}, tmp_path) == ("ci", "")  # no git repository here
    subprocess.run(["git", "init", "-q", "-b", "topic"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=tmp_path, check=True)  # fmt: skip
    ref, commit = ci_ref(None, {"CI": "1"}, tmp_path)
    assert ref == "topic" and len(commit) == 40


def test_outside_ci_there_is_no_ref_unless_given(tmp_path):
    assert ci_ref(None, {"CI": "false"}, tmp_path) == ("", "")
    assert ci_ref("release-2", {}, tmp_path) == ("release-2", "")
    github = {"GITHUB_ACTIONS": "true", "GITHUB_HEAD_REF": "x", "GITHUB_SHA": "c" * 40}
    assert ci_ref(" mine ", github, tmp_path) == ("mine", "c" * 40)


@pytest.mark.parametrize(
    "environ",
    [{"JENKINS_URL": "http://jenkins/"}, {"TF_BUILD": "True"}, {"TEAMCITY_VERSION": "2025.1"}],
)
def test_a_ci_that_does_not_set_ci_is_a_ci_all_the_same(tmp_path, environ):
    assert ci_ref(None, environ, tmp_path) == ("ci", "")


def test_with_no_terminal_attached_a_launch_is_a_jobs(tmp_path):
    assert ci_ref(None, {}, tmp_path, attended=False) == ("ci", "")
    assert ci_ref(None, {}, tmp_path, attended=True) == ("", "")
