"""Calibration sets in the web: validation lists the samples a set skips, and a calibration page compares with
an earlier run of the set."""

from __future__ import annotations

import pytest

from tests.engine.test_calibration import SET


@pytest.mark.django_db
def test_validating_a_set_in_the_web_lists_the_samples_it_skips(logged_in):
    from django.urls import reverse

    source = SET.replace("judge: {criteria", "judge: {model: mock, criteria") + "  - {messages: []}\n"
    body = logged_in.post(reverse("api:validate"), {"source": source}, content_type="application/json").json()
    assert body["valid"] is True
    (warning,) = [w for w in body["warnings"] if "skipped" in w["message"]]
    assert (warning["line"], warning["column"], warning["path"]) == (16, 6, "samples[2].messages")
    assert "the `messages` array cannot be empty" in warning["message"]


@pytest.mark.django_db(transaction=True)
def test_a_calibration_page_compares_with_an_earlier_run_of_the_set(client, user, fake_endpoint, fake_openai):
    from django.urls import reverse

    from runs.services import create_run
    from runs.worker.pump import execute
    from suites.services import create_suite

    source = SET.replace("judge: {criteria", "judge: {model: fake/judge, criteria")
    version = create_suite(owner=user, source=source).latest_version

    def calibrate(polite: int, rude: int):
        fake_openai.reset()
        fake_openai.rule("The answer is 4", f'{{"score": {polite}, "reason": "p"}}', where="any")
        fake_openai.rule("Figure it out", f'{{"score": {rude}, "reason": "r"}}', where="any")
        run = create_run(version=version, user=user)
        for conversation in run.conversations.all():
            execute(conversation.pk)
        return run

    first = calibrate(polite=1, rude=1)
    second = calibrate(polite=3, rude=2)
    client.force_login(user)
    url = reverse("runs:calibration", args=[second.pk])
    page = client.get(url).content.decode()
    assert f'value="{first.pk}"' in page  # offered for comparison
    compared = client.get(url, {"against": str(first.pk)}).content.decode()
    assert '1 sample nearer the label</span> <span class="mono">samples[0]</span>' in compared
    assert '1 further</span> <span class="mono">samples[1]</span>' in compared


@pytest.mark.django_db(transaction=True)
def test_a_calibration_page_computes_kappa_and_spearman_without_scipy_or_scikit_learn(
    client, user, fake_endpoint, fake_openai, monkeypatch
):
    """Importing either library takes seconds, which the first view of the figures in each web process would
    wait for: the page must show the figures with neither importable."""
    import sys

    from django.urls import reverse

    from runs.services import create_run
    from runs.worker.pump import execute
    from suites.services import create_suite

    source = SET.replace("judge: {criteria", "judge: {model: fake/judge, criteria")
    version = create_suite(owner=user, source=source).latest_version
    fake_openai.rule("The answer is 4", '{"score": 3, "reason": "p"}', where="any")
    fake_openai.rule("Figure it out", '{"score": -1, "reason": "r"}', where="any")
    run = create_run(version=version, user=user)
    for conversation in run.conversations.all():
        execute(conversation.pk)
    for name in [name for name in sys.modules if name.split(".")[0] in ("scipy", "sklearn")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "scipy", None)  # an import of it raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn", None)
    client.force_login(user)
    page = client.get(reverse("runs:calibration", args=[run.pk])).content.decode()
    # Expected 3 and -2, judged 3 and -1: quadratic-weighted kappa 20/21, the same ranking.
    assert "<dt>Weighted kappa</dt><dd>0.95</dd>" in page
    assert "<dt>Spearman</dt><dd>1.00</dd>" in page


@pytest.mark.django_db(transaction=True)
def test_a_calibration_runs_headline_is_the_judges_agreement_not_the_replies_it_failed(
    client, user, fake_endpoint, fake_openai
):
    import re

    from django.urls import reverse

    from runs.models import Status
    from runs.services import create_run
    from runs.worker.pump import execute
    from suites.services import create_suite

    source = SET.replace("judge: {criteria", "judge: {model: fake/judge, criteria")
    version = create_suite(owner=user, source=source).latest_version
    # The judge scores both samples as labelled: the rude reply fails, rightly.
    fake_openai.rule("The answer is 4", '{"score": 3, "reason": "p"}', where="any")
    fake_openai.rule("Figure it out", '{"score": -2, "reason": "r"}', where="any")
    run = create_run(version=version, user=user)
    for conversation in run.conversations.all():
        execute(conversation.pk)
    run.refresh_from_db()
    assert run.conversations.filter(status=Status.FAILED).count() == 1
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    header = re.search(r'<header id="run-header".*?</h1>', page, flags=re.S).group()
    assert 'class="badge badge-lg badge-passed"' in header
    assert "the judge agrees with the labels on 2 of 2 judgements" in header
    assert "evals failed" not in header
    # The stored status is the calibration's too, so the runs list and the API say passed as the page does.
    assert run.status == Status.PASSED
    listing = client.get(reverse("runs:list")).content.decode()
    row = re.search(
        rf"<tr[^>]*>(?:(?!</tr>).)*?/runs/{run.pk}/(?:(?!</tr>).)*</tr>", listing, flags=re.S
    ).group()
    assert "badge-passed" in row and "badge-failed" not in row


@pytest.mark.django_db(transaction=True)
def test_a_calibration_run_whose_judge_misses_a_gate_is_stored_as_failed(
    client, user, fake_endpoint, fake_openai
):
    from runs.models import Status
    from runs.services import create_run
    from runs.worker.pump import execute
    from suites.services import create_suite

    source = SET.replace(
        "judge: {criteria", "gates: {min_agreement: 0.9}\njudge: {model: fake/judge, criteria"
    )
    version = create_suite(owner=user, source=source).latest_version
    # The judge passes the rude reply the labels fail: every reply passes, and the judge agrees on one of two.
    fake_openai.rule("The answer is 4", '{"score": 3, "reason": "p"}', where="any")
    fake_openai.rule("Figure it out", '{"score": 3, "reason": "fine"}', where="any")
    run = create_run(version=version, user=user)
    for conversation in run.conversations.all():
        execute(conversation.pk)
    run.refresh_from_db()
    assert run.conversations.filter(status=Status.FAILED).count() == 0
    assert run.status == Status.FAILED
