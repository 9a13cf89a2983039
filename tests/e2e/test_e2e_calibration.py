"""End-to-end calibration: a calibration set saved like a suite, launched, played by a real Celery worker
whose judge calls go to the fake OpenAI server, and the result page's figures checked by hand.

Two judges (two judge models) grade four samples on -3..3, twice each. The fake answers by judge model and by
the reply under judgement, so every figure below can be worked out on paper.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs import selectors, services
from runs.models import Status
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

SET = """\
name: tutor-politeness
judges:
  - {name: careful, model: fake/careful, criteria: Polite and correct, scale: -3..3}
  - {name: sloppy, model: fake/sloppy, criteria: Polite and correct, scale: -3..3}
repeats: 2
gates: {min_kappa: 0.5}
samples:
  - messages:
      - {role: user, content: "What is 2+2?"}
      - {role: assistant, content: "The answer is 4."}
    expected: {score: 3, reason: Correct and kind}
    tags: [math]
  - messages:
      - {role: user, content: "What is 2+2?"}
      - {role: assistant, content: "Figure it out yourself."}
    expected: {score: -2, reason: Rude}
    tags: [math, tone]
  - messages:
      - {role: system, content: You are a patient tutor.}
      - {role: user, content: "Explain fractions"}
      - {role: assistant, content: "A fraction is a part of a whole, like 1/2 of a pizza."}
    expected: {score: 2, reason: Clear}
  - messages:
      - {role: user, content: "Thanks!"}
      - {role: assistant, content: "Whatever."}
    expected: {score: -1, reason: Curt}
    tags: [tone]
  - messages: []
    expected: {score: 1}
"""

# What each judge answers, by the reply it is shown: careful agrees exactly but for "Whatever." (-2 for -1);
# sloppy grades everything 3 except the rude reply, which it grades 0.
ANSWERS = {
    "careful": {"The answer is 4.": 3, "Figure it out yourself.": -2, "part of a whole": 2, "Whatever.": -2},
    "sloppy": {"The answer is 4.": 3, "Figure it out yourself.": 0, "part of a whole": 3, "Whatever.": 3},
}


def test_two_judges_calibrated_through_a_worker(user, fake_endpoint, fake_openai, start_worker, client):
    for model, answers in ANSWERS.items():
        for reply, score in answers.items():
            fake_openai.rule(
                reply, f'{{"score": {score}, "reason": "{model} says {score}"}}', where="any", model=model
            )
    start_worker()
    suite = create_suite(owner=user, source=SET)
    run = wait_for_run(services.create_run(version=suite.latest_version, user=user))
    assert run.status in (Status.PASSED, Status.FAILED)

    requests = fake_openai.chat_requests()
    assert len(requests) == 2 * 4 * 2  # judges × samples × repeats; the skipped sample is not judged
    assert {r["model"] for r in requests} == {"careful", "sloppy"}  # no agent model is called
    asked = next(r for r in requests if "part of a whole" in str(r))["messages"][1]["content"]
    assert (
        "[System]:\nYou are a patient tutor.\n\n[User]:\nExplain fractions\n\n[Assistant]:\nA fraction"
        in asked
    )

    report = selectors.calibration_report(run, selectors.calibration_suite(run))
    careful, sloppy = report.judges
    # careful: 6 of 8 judgements exact (Whatever. twice off by one); every one within one level.
    assert careful.metrics.judgements == 8 and careful.metrics.exact_agreement == pytest.approx(6 / 8)
    assert careful.metrics.within_one == 1.0
    assert careful.metrics.mae == pytest.approx(2 / 8) and careful.metrics.bias == pytest.approx(-2 / 8)
    assert careful.metrics.consistency == 1.0
    # Pass/fail at the -3..3 default threshold 1: careful fails exactly the two the labels fail.
    assert careful.metrics.pass_fail.agreement == 1.0
    assert (careful.metrics.pass_fail.precision, careful.metrics.pass_fail.recall) == (1.0, 1.0)
    # sloppy: exact on "The answer is 4." only; off by 2, 1 and 4 elsewhere; it passes the rude reply's
    # label -2 as 0 (still a failure at threshold 1) and "Whatever." as a pass: it catches 1 of 2 failures.
    assert sloppy.metrics.exact_agreement == pytest.approx(2 / 8)
    assert sloppy.metrics.mae == pytest.approx((0 + 2 + 1 + 4) * 2 / 8)
    assert sloppy.metrics.bias == pytest.approx((0 + 2 + 1 + 4) * 2 / 8)
    assert (sloppy.metrics.pass_fail.precision, sloppy.metrics.pass_fail.recall) == (1.0, 0.5)
    assert careful.passed and not sloppy.passed and report.status == "failed"
    assert [row.label for row in sloppy.samples][0] == "samples[3]"  # "Whatever.": off by 4
    assert sloppy.samples[0].judge_reason == "sloppy says 3"
    assert report.warnings and "samples[4] skipped" in report.warnings[0]

    client.force_login(user)
    detail = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    page_url = reverse("runs:calibration", args=[run.pk])
    assert page_url in detail
    page = client.get(page_url).content.decode()
    assert "careful" in page and "sloppy" in page and "75%" in page  # careful's exact agreement
    assert "sloppy says 3" in page and "Curt" in page
    only = client.get(page_url, {"only": "disagreements", "tag": "math"}).content.decode()
    assert "Figure it out yourself." in only and "The answer is 4." not in only
