"""A catastrophic regex in a real worker fails its own check and the run finishes.

Before the time limit, `(a+)+$` against 40 a's and a "!" pinned the worker at 100% CPU; its lease lapsed,
the next worker took the conversation over and froze too, and the run never finished.
"""

from __future__ import annotations

import pytest

from runs import services
from runs.models import Status, Turn
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

EVIL = "a" * 40 + "!"

SUITE = """
name: hostile-regex
model: fake/test-model
evals:
  - id: issue
    prompt: Say a lot of a.
    checks:
      - regex: '(a+)+$'
  - id: catastrophic
    prompt: Say a lot of a, again.
    checks:
      - regex: '(a|a)*$'
  - id: calm
    prompt: What is 2 + 2?
    checks:
      - regex: '^\\d$'
  - id: calm-too
    prompt: What is 3 + 3?
    checks:
      - match: "*6*"
"""


@pytest.mark.timeout(120)
def test_catastrophic_regexes_fail_their_conversation_and_the_run_finishes(
    user, fake_endpoint, fake_openai, start_worker
):
    fake_openai.script("Say a lot of a.", [EVIL])
    fake_openai.script("Say a lot of a, again.", [EVIL])
    fake_openai.script("What is 2 + 2?", ["4"])
    fake_openai.script("What is 3 + 3?", ["6"])
    start_worker(concurrency=2, EVALSITE_REGEX_TIMEOUT_SECONDS="0.5")
    suite = create_suite(owner=user, source=SUITE)
    run = wait_for_run(services.create_run(version=suite.latest_version, user=user), timeout=90)

    assert run.status == Status.FAILED
    outcomes = {c.eval_id: (c.status, c.turn_count, c.error) for c in run.conversations.all()}
    assert outcomes == {
        "issue": ("failed", 1, ""),
        "catastrophic": ("failed", 1, ""),
        "calm": ("passed", 1, ""),
        "calm-too": ("passed", 1, ""),
    }
    (check,) = Turn.objects.get(conversation__run=run, conversation__eval_id="catastrophic").record["checks"]
    assert check["passed"] is False
    assert check["reason"] == "regex took too long: /(a|a)*$/ ran over 0.5 s on 41 characters"
    (check,) = Turn.objects.get(conversation__run=run, conversation__eval_id="issue").record["checks"]
    assert check["passed"] is False
    # Each conversation was asked once: nobody froze, so nobody took one over and asked again.
    assert len(fake_openai.chat_requests(first_user="Say a lot of a, again.")) == 1
