"""What a CI job tells the server and asks of the results: the ref it runs from (so the suite it sends is
kept off the suite's line), and the exit code of `--fail-on-regression` and `--fail-on-new-failures`.

The ref is `--ref`, else read from the CI's environment: GitHub Actions (the pull request's branch, else
the pushed branch or tag, and its commit), GitLab CI, or any other CI (git's branch and commit in the suite's
folder, else `ci`). A launch with no terminal attached counts as CI whatever its environment says: a job of a
CI that sets none of the variables known here must not replace the suite people edit. Only from a terminal
outside CI, or with `--as-latest`, is there no ref, and the server saves the suite as its next version.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from engine.compare import Comparison
from engine.failures import Failures, Kind
from engine.text import plural

from .common import FAILED, PASSED

REF_CHARS = 200
SHOWN = 20  # failing evals said on the terminal; the Markdown summary lists them all


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no")


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


# Set by CIs that do not set CI itself (Jenkins, Azure Pipelines, TeamCity, AWS CodeBuild, Bamboo, GoCD).
OTHER_CI_VARIABLES = (
    "JENKINS_URL", "HUDSON_URL", "TF_BUILD", "TEAMCITY_VERSION", "CODEBUILD_BUILD_ID", "bamboo_buildKey",
    "GO_PIPELINE_NAME", "BUILDKITE", "CIRCLECI", "BITBUCKET_BUILD_NUMBER",
)  # fmt: skip


def in_ci(environ: Mapping[str, str]) -> bool:
    return _truthy(environ.get("CI")) or any(environ.get(name) for name in OTHER_CI_VARIABLES)


def ci_ref(
    given: str | None, environ: Mapping[str, str], folder: Path, *, attended: bool = True
) -> tuple[str, str]:
    """(ref, commit) of this launch; ("", "") only from a terminal (`attended`) outside CI, without --ref."""
    if environ.get("GITHUB_ACTIONS") == "true":
        ref = environ.get("GITHUB_HEAD_REF") or environ.get("GITHUB_REF_NAME", "")
        commit = environ.get("GITHUB_SHA", "")
    elif environ.get("GITLAB_CI") == "true":
        ref = environ.get("CI_COMMIT_REF_NAME", "")
        commit = environ.get("CI_COMMIT_SHA", "")
    elif in_ci(environ) or not attended:
        branch = _git(folder, "rev-parse", "--abbrev-ref", "HEAD")
        commit = _git(folder, "rev-parse", "HEAD")
        ref = branch if branch and branch != "HEAD" else commit[:12]
        ref = ref or "ci"  # in CI, never the suite's line, even where git says nothing
    else:
        ref = commit = ""
    if given is not None and given.strip():
        ref = given.strip()
        commit = commit or _git(folder, "rev-parse", "HEAD")
    return ref[:REF_CHARS], commit[:64]


def gated_exit_code(
    found: Failures, comparison: Comparison | None, *, fail_on_regression: bool, fail_on_new: bool
) -> int:
    """With a gate asked for, the run's failing evals decide only through it: 1 when a regression (with
    --fail-on-regression) or a new eval failing (with --fail-on-new-failures) is found, else 0. Every
    failing eval is said on stderr with its reason. Without a baseline nothing regressed, and every
    failing eval is new."""
    regressions = found.of(Kind.REGRESSION)
    new = found.of(Kind.NEW) if comparison is not None else found.failing
    others = found.of(Kind.OTHER) if comparison is not None else []
    for label, items in (("regressed", regressions), ("new failure", new), ("still failing", others)):
        for item in items[:SHOWN]:
            print(f"  {label}: {item.result.id}: {item.reason}", file=sys.stderr)
        if len(items) > SHOWN:
            print(f"  … {len(items) - SHOWN} more {label}", file=sys.stderr)
    failed = []
    if fail_on_regression and regressions:
        failed.append(f"{plural(len(regressions), 'regression')} (--fail-on-regression)")
    if fail_on_new and new:
        failed.append(f"{plural(len(new), 'new eval')} failing (--fail-on-new-failures)")
    if failed:
        print(f"Gate failed: {' and '.join(failed)}", file=sys.stderr)
        return FAILED
    held = []
    if fail_on_regression:
        held.append("no regression")
    if fail_on_new:
        held.append("no new eval failing")
    unchecked = []
    if new and not fail_on_new:
        unchecked.append(f"{plural(len(new), 'new eval')} failing, not gated without --fail-on-new-failures")
    if others:
        unchecked.append(f"{len(others)} failing in the baseline too")
    note = f" ({'; '.join(unchecked)})" if unchecked else ""
    print(f"Gate held: {' and '.join(held)}{note}", file=sys.stderr)
    return PASSED
