"""Re-grading stored conversations: replies come from the stored turns, never from the model; edited
checks grade them afresh; a tree whose edited checks would send another follow-up, or need a turn the
stored conversation never had, ends "diverged at turn N: needs a new run". Against the real fake endpoint,
whose request log shows which calls were made."""

from __future__ import annotations

import json
import os

from engine.clients import EndpointConfig, EndpointRegistry
from engine.conversation import run_eval
from engine.loader import load_suite
from engine.runner import build_context
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.engine.doubles import MULTIPLY_TREE

TREE = "name: tree\nmodel: agent\njudge: judge\nevals:\n" + MULTIPLY_TREE


def _context(fake, source):
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    suite = load_suite(source)
    ctx, _ = build_context(suite, EndpointRegistry(config), suite.model)
    return suite, ctx


def _played(fake, source):
    suite, ctx = _context(fake, source)
    return run_eval(suite.evals[0], 0, suite.eval_id(0), ctx)


def test_an_edited_check_regrades_the_stored_replies_without_the_model(fake_openai):
    fake_openai.script("What is 15 * 7?", ["I think it is 100.", "Sorry: 105."])
    stored = _played(fake_openai, TREE)
    assert stored.status == "failed" or stored.status == "passed"
    assert [t.prompt for t in stored.turns] == ["What is 15 * 7?", "Please recalculate."]
    calls = len(fake_openai.chat_requests())
    # The edit: the first turn's check now accepts "100" (wrongly, but it is the user's edit): it passes on
    # turn 1, and the re-grade ends there.
    edited = TREE.replace('- contains: "105"\n        prompt', '- contains: "100"\n        prompt')
    suite, ctx = _context(
        fake_openai, edited.replace('- contains: "7"\n        prompt', "- contains: think\n        prompt")
    )
    regraded = run_eval(suite.evals[0], 0, "multiply", ctx, replay=stored.turns)
    assert (regraded.status, regraded.passed_on_turn, len(regraded.turns)) == ("passed", 1, 1)
    assert regraded.turns[0].response == "I think it is 100." and regraded.turns[0].usage.total_tokens == 0
    assert len(fake_openai.chat_requests()) == calls  # no model was asked


def test_a_tree_that_would_send_another_follow_up_diverges(fake_openai):
    fake_openai.script("What is 15 * 7?", ["I think it is 100.", "Sorry: 105."])
    stored = _played(fake_openai, TREE)
    calls = len(fake_openai.chat_requests())
    # The edit accepts "100": the first failing check is now the second, whose follow-up differs.
    suite, ctx = _context(
        fake_openai, TREE.replace('- contains: "105"\n        prompt', '- contains: "100"\n        prompt')
    )
    regraded = run_eval(suite.evals[0], 0, "multiply", ctx, replay=stored.turns)
    assert regraded.status == "error"
    assert regraded.verdict.startswith("diverged at turn 2: needs a new run (it would send 'Show your work.'")
    assert len(regraded.turns) == 1  # graded on the turns it would have had, and no further
    assert len(fake_openai.chat_requests()) == calls


def test_a_turn_past_the_stored_end_diverges(fake_openai):
    fake_openai.script("What is 15 * 7?", ["15 * 7 = 105."])
    stored = _played(fake_openai, TREE)
    assert len(stored.turns) == 1
    suite, ctx = _context(
        fake_openai, TREE.replace('- contains: "105"\n        prompt', '- contains: "106"\n        prompt')
    )
    regraded = run_eval(suite.evals[0], 0, "multiply", ctx, replay=stored.turns)
    assert regraded.status == "error" and "diverged at turn 2" in regraded.verdict
    assert "the stored conversation ended after turn 1" in regraded.verdict


def test_judges_are_the_only_calls_of_a_regrade(fake_openai):
    fake_openai.script("What is 15 * 7?", ["15 * 7 = 105."])
    stored = _played(fake_openai, TREE)
    judged = TREE.replace(
        '- contains: "105"\n        prompt', "- llm_judge: {criteria: Correct}\n        prompt"
    )
    fake_openai.rule("Correct", json.dumps({"score": 1, "reason": "right"}), where="any", model="judge")
    before = len(fake_openai.chat_requests())
    suite, ctx = _context(fake_openai, judged)
    regraded = run_eval(suite.evals[0], 0, "multiply", ctx, replay=stored.turns)
    assert regraded.status == "passed"
    new = fake_openai.chat_requests()[before:]
    assert [r["model"] for r in new] == ["judge"]


def test_a_tree_whose_follow_up_was_removed_diverges_instead_of_failing_early(fake_openai):
    fake_openai.script("What is 15 * 7?", ["I think it is 107.", "Sorry: 105."])
    stored = _played(fake_openai, TREE)
    assert len(stored.turns) == 2
    removed = TREE.replace('        prompt: Please recalculate.\n        checks: [{contains: "105"}]\n', "")
    suite, ctx = _context(fake_openai, removed)
    regraded = run_eval(suite.evals[0], 0, "multiply", ctx, replay=stored.turns)
    assert (regraded.status, regraded.diverged_at, len(regraded.turns)) == ("error", 2, 1), regraded.verdict
    assert "this version has no such turn; the stored one sent 'Please recalculate.'" in regraded.verdict
