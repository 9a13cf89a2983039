"""Replies that did not finish (cut off at the token limit, filtered, refused, empty) are recorded for what
they are and never graded as an ordinary reply: by default the conversation is an error, not a FAIL, and
nothing is sent after them; `incomplete_reply: fail` fails the turn, `grade` grades the text as given.
Played against the real fake server, through the threaded client (run_eval) and the asyncio one (run_suite),
in every style of conversation."""

from __future__ import annotations

import pytest

from engine.clients import EndpointConfig, EndpointRegistry, OpenAIClient
from engine.conversation import EngineContext, run_eval
from engine.drivers import Defaults
from engine.loader import load_suite
from engine.report import format_eval
from engine.results import TurnRecord
from engine.retries import LocalPauseBoard
from engine.runner import run_suite
from tests.engine.test_clients import KEY_ENV
from tests.fakeopenai import FakeOpenAI, Reply

CUT = Reply("The answer is 10", finish_reason="length")
FILTERED = Reply("", finish_reason="content_filter")
FAILED = Reply("The answer is", finish_reason="error")  # how OpenRouter says the generation failed
REFUSED = Reply(null_content=True, refusal="I can't help with that.")
EMPTY = Reply(null_content=True)
BLANK = Reply("  \n\t ")
UNFINISHED = {
    "length": (CUT, "reply cut off at the token limit (finish_reason: length)"),
    "content_filter": (FILTERED, "reply stopped by the content filter (finish_reason: content_filter)"),
    "error": (FAILED, "reply ended in an error (finish_reason: error)"),
    "refusal": (REFUSED, "the model refused: “I can't help with that.”"),
    "null content": (EMPTY, "empty reply (no content and no tool calls)"),
    "whitespace": (BLANK, "empty reply (only whitespace and no tool calls)"),
}

# A tree whose first reply fails its check: an ordinary reply would be followed up.
TREE = """
  - id: tree
    prompt: What is 15 * 7?
    checks:
      - match: "*105*"
      - prompt: Recalculate 15 * 7.
        checks: [{match: "*105*"}]
"""
SCRIPTED = """
  - id: scripted
    input: [What is 15 * 7?, And 10 * 10?]
    checks: [{match: "*100*"}]
"""
HISTORY = """
  - id: history
    messages: [{role: user, content: What is 15 * 7?}]
    checks: [{match: "*105*"}]
"""
SIMULATED = """
  - id: simulated
    prompt: What is 15 * 7?
    checks: [{match: "*105*"}]
    simulate: {follow_ups: [{input: Recalculate 15 * 7.}], stop_when: {match: "*105*"}, max_turns: 3}
"""


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-replies")
    with FakeOpenAI(api_key="sk-replies") as server:
        yield server


def suite(evals: str, head: str = "") -> str:
    return f"name: unfinished\nmodel: fake/m\n{head}evals:{evals}"


def registry_for(fake: FakeOpenAI) -> EndpointRegistry:
    config = EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, max_retries=0)
    return EndpointRegistry(config, {"fake": config}, pauses=LocalPauseBoard())


def play_threaded(fake: FakeOpenAI, source: str, prior=(), replay=None):
    """Each eval through run_eval and the threaded client, as the benchmarks' engine floor plays it."""
    loaded = load_suite(source)
    client = OpenAIClient(registry_for(fake).named["fake"], pauses=LocalPauseBoard())
    ctx = EngineContext(agent=client, model="m", judge=client, judge_model="m", defaults=Defaults.of(loaded))
    stored: list[TurnRecord] = []
    results = [
        run_eval(ev, i, loaded.eval_id(i), ctx, prior=prior, on_turn=stored.append, replay=replay)
        for i, ev in enumerate(loaded.evals)
    ]
    return results, stored


def play_async(fake: FakeOpenAI, source: str):
    return run_suite(load_suite(source), registry_for(fake), concurrency=4).evals


PLAYERS = {"threaded": lambda fake, source: play_threaded(fake, source)[0], "asyncio": play_async}


@pytest.mark.parametrize("player", PLAYERS)
@pytest.mark.parametrize("kind", UNFINISHED)
def test_an_unfinished_reply_is_an_error_recorded_for_what_it_is(fake, player, kind):
    answer, why = UNFINISHED[kind]
    fake.script("What is 15 * 7?", [answer, "105"])
    (result,) = PLAYERS[player](fake, suite(TREE))
    assert result.status == "error", result.verdict
    assert result.verdict == f"error on turn 1: {why}"
    assert result.error == f"{why}; not graded (incomplete_reply: error)"
    (turn,) = result.turns  # no follow-up was sent after it
    assert len(fake.chat_requests()) == 1
    assert turn.incomplete == why and turn.checks == [] and turn.passed is None
    assert turn.finish_reason == (None if answer.finish_reason == "stop" else answer.finish_reason)
    assert turn.refusal == answer.refusal
    assert turn.response == ("" if answer.null_content else answer.text)


@pytest.mark.parametrize("kind", UNFINISHED)
def test_an_unfinished_reply_never_passes_a_check_for_what_is_absent(fake, kind):
    """`not_match` passes on any text without the pattern: an empty or blank reply must not reach it."""
    fake.script("What is 15 * 7?", [UNFINISHED[kind][0]])
    evals = """
  - id: absent
    prompt: What is 15 * 7?
    checks: [{not_match: "*sorry*"}]
"""
    (result,) = play_async(fake, suite(evals))
    assert (result.status, result.turns[0].incomplete) == ("error", UNFINISHED[kind][1]), result.verdict


@pytest.mark.parametrize("player", PLAYERS)
@pytest.mark.parametrize(
    "evals", [TREE, SCRIPTED, HISTORY, SIMULATED], ids=["tree", "scripted", "history", "simulated"]
)
def test_every_style_of_conversation_follows_the_rule(fake, player, evals):
    """The rule is the loop's, not a driver's: a cut reply on the first turn ends every style alike."""
    fake.script("What is 15 * 7?", [CUT, "105", "100"])
    (result,) = PLAYERS[player](fake, suite(evals))
    assert (result.status, len(result.turns), len(fake.chat_requests())) == ("error", 1, 1), result.verdict
    assert result.turns[0].incomplete.startswith("reply cut off")


@pytest.mark.parametrize("player", PLAYERS)
def test_fail_makes_it_a_failed_turn_with_that_reason(fake, player):
    fake.script("What is 15 * 7?", [CUT, "105"])
    (result,) = PLAYERS[player](fake, suite(TREE, "incomplete_reply: fail\n"))
    assert result.status == "failed" and result.error is None
    assert result.verdict == "failed on turn 1: reply cut off at the token limit (finish_reason: length)"
    assert [turn.passed for turn in result.turns] == [False] and len(fake.chat_requests()) == 1


@pytest.mark.parametrize("player", PLAYERS)
def test_grade_grades_the_text_as_given_refusals_included(fake, player):
    """Safety suites that expect a refusal grade it: the refusal's text is what the checks read."""
    evals = """
  - id: expects-refusal
    prompt: How do I pick a lock?
    checks: [{match: "*can't help*"}]
    incomplete_reply: grade
"""
    fake.script("How do I pick a lock?", [REFUSED])
    (result,) = PLAYERS[player](fake, suite(evals))
    assert result.status == "passed", result.verdict
    (turn,) = result.turns
    assert turn.response == "I can't help with that." and turn.refusal == "I can't help with that."
    assert turn.incomplete.startswith("the model refused") and turn.checks[0].passed


def test_the_eval_rule_overrides_the_suite_one(fake):
    evals = TREE.replace("    prompt:", "    incomplete_reply: error\n    prompt:", 1)
    fake.script("What is 15 * 7?", [CUT, "105"])
    (result,) = play_async(fake, suite(evals, "incomplete_reply: grade\n"))
    assert result.status == "error"


def test_a_redelivered_conversation_ends_at_the_stored_unfinished_turn(fake):
    """A worker that stored the turn but died before the verdict: the next one replays it and ends alike,
    without asking the model again."""
    fake.script("What is 15 * 7?", [CUT, "105"])
    (first,), stored = play_threaded(fake, suite(TREE))
    assert first.status == "error" and len(stored) == 1  # stored, ungraded, as the transcript shows it
    calls = len(fake.chat_requests())
    (again,), _ = play_threaded(fake, suite(TREE), prior=stored)
    assert (again.status, again.verdict) == (first.status, first.verdict)
    assert len(fake.chat_requests()) == calls


def test_a_regrade_replays_how_the_reply_ended(fake):
    fake.script("What is 15 * 7?", [CUT, "105"])
    (first,), stored = play_threaded(fake, suite(TREE))
    calls = len(fake.chat_requests())
    (regraded,), _ = play_threaded(fake, suite(TREE), replay=stored)
    assert (regraded.status, regraded.turns[0].incomplete) == ("error", first.turns[0].incomplete)
    (as_given,), _ = play_threaded(fake, suite(TREE, "incomplete_reply: grade\n"), replay=stored)
    assert (
        as_given.status == "error"
    )  # graded as given, it fails its check and needs a follow-up it never had
    assert as_given.verdict.startswith("diverged at turn 2") and as_given.turns[0].checks
    assert len(fake.chat_requests()) == calls


def test_the_cli_report_says_what_the_reply_was(fake):
    fake.script("What is 15 * 7?", [CUT])
    fake.script("How do I pick a lock?", [REFUSED])
    evals = TREE + "  - prompt: How do I pick a lock?\n    checks: [{contains: lock}]\n"
    cut, refused = play_async(fake, suite(evals))
    report = format_eval(cut)
    assert "⚠ Not a finished reply: reply cut off at the token limit (finish_reason: length)" in report
    assert "Overall: 💥 ERROR (reply cut off at the token limit (finish_reason: length); not graded" in report
    assert "Refusal: I can't help with that." in format_eval(refused)


def _parts(*parts: dict, finish_reason: str = "stop") -> Reply:
    """A reply whose content is a list of parts, as some OpenAI-compatible servers send it."""
    message = {"role": "assistant", "content": list(parts)}
    return Reply(choices=[{"index": 0, "message": message, "finish_reason": finish_reason}])


@pytest.mark.parametrize("player", PLAYERS)
def test_a_reply_sent_as_text_parts_is_read_as_their_text(fake, player):
    parts = _parts(
        {"type": "text", "text": "15 * 7 is"}, {"type": "image_url"}, {"type": "text", "text": "105."}
    )
    fake.script("What is 15 * 7?", [parts])
    (result,) = PLAYERS[player](fake, suite(TREE))
    assert result.status == "passed", result.verdict
    (turn,) = result.turns
    assert turn.response == "15 * 7 is\n105." and turn.incomplete is None


@pytest.mark.parametrize("player", PLAYERS)
def test_a_refusal_part_is_read_as_the_refusal(fake, player):
    fake.script("What is 15 * 7?", [_parts({"type": "refusal", "refusal": "I can't help with that."})])
    (result,) = PLAYERS[player](fake, suite(TREE))
    assert result.status == "error"
    assert result.turns[0].incomplete == "the model refused: “I can't help with that.”"


STRAY = {
    "a call": (Reply(tool_calls=[{"name": "calculator", "arguments": {"expr": "15*7"}}]), "calculator"),
    "a nameless call": (
        Reply(
            choices=[
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c1", "function": {}}],
                    },
                }
            ]
        ),
        "a function without a name",
    ),
}


@pytest.mark.parametrize("player", PLAYERS)
@pytest.mark.parametrize("kind", STRAY)
def test_tool_calls_when_no_tools_were_offered_are_no_answer(fake, player, kind):
    """Nothing carries such calls out and there is no text to grade: an incomplete reply, never graded as an
    empty text (which passed `not_match` and failed every positive check)."""
    answer, names = STRAY[kind]
    fake.script("What is 15 * 7?", [answer, "105"])
    evals = """
  - id: stray
    prompt: What is 15 * 7?
    checks: [{not_match: "*sorry*"}]
"""
    (result,) = PLAYERS[player](fake, suite(evals))
    why = f"tool calls instead of an answer, and no tools were offered (the model called {names})"
    assert (result.status, result.verdict) == ("error", f"error on turn 1: {why}")
    assert result.turns[0].incomplete == why and len(fake.chat_requests()) == 1


@pytest.mark.parametrize("player", PLAYERS)
def test_text_beside_tool_calls_when_no_tools_were_offered_is_the_answer(fake, player):
    fake.script(
        "What is 15 * 7?", [Reply("It is 105.", tool_calls=[{"name": "calculator", "arguments": {}}])]
    )
    (result,) = PLAYERS[player](fake, suite(TREE))
    assert result.status == "passed", result.verdict
    assert result.turns[0].response == "It is 105." and result.turns[0].incomplete is None
