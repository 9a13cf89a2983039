"""Transcripts of simulated users and repeated evals: the simulated user's turns marked with their tokens, why the
conversation ended, weighted criteria, the iteration switcher, share links, and the editor's count."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs import selectors
from runs.models import Conversation, Run, ShareLink, Status
from suites import services as suite_services
from tests.web.iterated_runs import (
    CONDITION,
    SUITE,
    add,
    element,
    iteration_rows,
    make_run,
    one_turn,
    run_url,
    text,
    turn,
)

pytestmark = pytest.mark.django_db


# --- Transcripts --------------------------------------------------------------------------------------------


def test_simulated_turns_are_labelled_with_their_tokens(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 0)).content.decode()
    first, second = turn(page, 1), turn(page, 2)
    assert "simulated user" not in text(first) and "msg-simulated" not in first  # the eval's own prompt
    assert '<span class="tag tag-simulated">simulated user</span>' in second
    assert "42 tokens · $0.000500" in text(second)
    assert "&lt;i&gt;at 8pm&lt;/i&gt;, turn 2" in second  # the simulated user's words, escaped
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in second and "<script>alert" not in page
    verdict = text(element(page, "verdict"))
    assert "Agent tokens in / out 300 / 60" in verdict
    assert "Judge tokens 240" in verdict
    assert "Simulated user tokens 84" in verdict
    assert "$0.0060 agent $0.0030 · judge $0.0020 · user $0.0010" in verdict


def test_the_headline_is_the_stored_reason_not_the_verdict_cut_up(logged_in, version, user):
    """The transcript shows what the engine stored as the reason; it does not work it out of the verdict."""
    run = make_run(version, user)
    Conversation.objects.filter(run=run, index=0, iteration=0).update(
        reason="passed, in the engine's words", verdict=f"passed after 3 turns, told otherwise: {CONDITION}"
    )
    verdict = text(element(logged_in.get(run_url("conversation", run, 0)).content.decode(), "verdict"))
    assert f"✓ Passed, in the engine's words Ended: {CONDITION}" in verdict
    assert "told otherwise" not in verdict


def test_the_termination_reason_is_shown_prominently(logged_in, version, user):
    run = make_run(version, user)
    met = logged_in.get(run_url("conversation", run, 0)).content.decode()
    verdict = text(element(met, "verdict"))
    # The stored reason is the verdict without its ending ("passed after 3 turns"): the ending has its own line.
    assert f"✓ Passed after 3 turns Ended: {CONDITION} Turns 3" in verdict
    assert f"Conversation ended: {CONDITION}" in text(turn(met, 3))
    assert "&quot;confirmed&quot;" in element(met, "verdict")  # escaped like everything else
    maxed = logged_in.get(run_url("conversation", run, 0), {"iteration": 1}).content.decode()
    assert "✗ Failed after 10 turns Ended: max turns (10) Turns 10" in text(element(maxed, "verdict"))
    errored = logged_in.get(run_url("conversation", run, 0), {"iteration": 4}).content.decode()
    assert "Ended:" not in text(element(errored, "verdict"))  # the error says why it stopped
    greeting = logged_in.get(run_url("conversation", run, 1)).content.decode()
    assert "Ended:" not in greeting and "Simulated user tokens" not in greeting


def test_inputs_exhausted_is_shown_too(logged_in, version, user):
    run = make_run(version, user, booking=[("failed", 0.0, 2, "inputs exhausted")] * 5)
    page = logged_in.get(run_url("conversation", run, 0), {"iteration": 3}).content.decode()
    assert "Ended: inputs exhausted" in text(element(page, "verdict"))


def test_weighted_criteria_are_nested_under_their_check(logged_in, version, user):
    run = make_run(version, user)
    last = turn(logged_in.get(run_url("conversation", run, 0)).content.decode(), 3)
    check = last.split('<ul class="checks"', 1)[1]
    assert "llm_judge (2 weighted criteria)" in text(check.split("checks-nested", 1)[0])
    assert "weighted score 0.70 (threshold 0.50 of 1) over 2 criteria" in text(check)  # (0.4 + 3 × 0.8) / 4
    nested = check.split('<ul class="checks checks-nested checks-criteria" aria-label="Criteria">', 1)[1]
    items = [text(item) for item in nested.split("</li>") if "check-line" in item]
    assert items[0].startswith("✗ FAIL polite (weight 1) 0.40 score 0.40: <b>curt</b> but fine")
    assert items[1].startswith("✓ PASS accurate (weight 3) 0.80 score 0.80: table for two at 8pm")
    assert "&lt;b&gt;curt&lt;/b&gt;" in nested and "<b>curt" not in nested  # reasoning escaped
    assert "Judge's raw answer" in nested  # each criterion's raw answer, folded


def test_iteration_switcher_moves_between_iterations(logged_in, version, user):
    run = make_run(version, user)
    base = run_url("conversation", run, 0)
    page = logged_in.get(base, {"iteration": 2}).content.decode()
    switcher = element(page, "iteration-switcher", "nav")
    assert "iteration 3 of 5" in text(switcher)
    assert "iteration 3 of 5" in text(page.split("<h1>")[1].split("</h1>")[0])
    assert f'href="{base}?iteration=1" rel="prev"' in switcher
    assert f'href="{base}?iteration=3" rel="next"' in switcher
    current = re.findall(r'class="imark imark-\w+[^"]*is-current"', switcher)
    assert len(current) == 1 and 'aria-current="page">✓</a>' in switcher
    assert f'representative: <a href="{base}">iteration 1</a>' in switcher
    assert "FLAKY" in text(switcher)
    first = element(logged_in.get(base).content.decode(), "iteration-switcher", "nav")
    assert "iteration 1 of 5" in text(first) and 'aria-disabled="true">‹ Previous iteration' in first
    assert "This is the representative iteration" in text(first)
    last = element(logged_in.get(base, {"iteration": 4}).content.decode(), "iteration-switcher", "nav")
    assert 'aria-disabled="true">Next iteration ›' in last
    assert logged_in.get(base, {"iteration": 5}).status_code == 404


def test_a_shared_run_shows_iterations_with_share_links(version, user):
    run = make_run(version, user)
    link = ShareLink.objects.create(run=run, created_by=user)
    visitor = Client()
    page = visitor.get(reverse("share:run", args=[link.token])).content.decode()
    row = iteration_rows(page)["booking"]
    shared = reverse("share:conversation", args=[link.token, 0])
    assert f'href="{shared}?iteration=1" class="imark imark-failed"' in row
    assert "/runs/" not in element(page, "iterations")  # nothing that needs a login
    transcript = visitor.get(shared, {"iteration": 1}).content.decode()
    assert "iteration 2 of 5" in text(element(transcript, "iteration-switcher", "nav"))


def test_runs_without_repeats_have_no_iterations_section(logged_in, user):
    source = SUITE.replace("iterations: 5\n", "")
    version = suite_services.create_suite(owner=user, source=source).latest_version
    run = Run.objects.create(suite_version=version, created_by=user, model="mock", endpoint_name="mock",
                             is_mock=True, status=Status.PASSED)  # fmt: skip
    add(run, 1, 0, "greeting", "passed", 1.0, one_turn("Hello!", "Hello there.", True))
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert 'id="iterations"' not in page and "Iter." not in page
    transcript = logged_in.get(run_url("conversation", run, 1)).content.decode()
    assert 'id="iteration-switcher"' not in transcript


def test_the_editor_says_how_many_conversations_iterations_make(logged_in):
    problems = logged_in.post(reverse("suites:validate"), {"source": SUITE}).content.decode()
    assert "Valid — 3 evals · 15 conversations a run" in text(problems)  # 3 evals × iterations: 5
    once = logged_in.post(reverse("suites:validate"), {"source": SUITE.replace("iterations: 5\n", "")})
    assert "conversations a run" not in once.content.decode()


def test_an_eval_cancelled_before_any_iteration_finished_reads_cancelled(logged_in, version, user):
    """Cancelled iterations are not errors: the eval reads "cancelled", never "error — no iteration was graded"."""
    run = make_run(version, user, status=Status.CANCELLED, booking=[("queued", None, 0, "")] * 5)
    Conversation.objects.filter(run=run, index=0).update(status=Status.CANCELLED, verdict="cancelled")
    page = logged_in.get(run_url("detail", run)).content.decode()
    booking = iteration_rows(page)["booking"]
    assert '<span class="badge badge-cancelled">cancelled</span>' in booking
    assert "cancelled before any iteration was graded" in text(booking)
    assert "error" not in text(booking) and "no iteration was graded" not in text(booking)
    (item,) = [item for item in selectors.iterated_for(run, list(run.conversations.all())) if item.index == 0]
    assert item.status == "cancelled"  # the results JSON says so too
