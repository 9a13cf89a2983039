"""The terminal report's limits: a long reply is cut with how much more --json holds, and the progress line
keeps every figure on a narrow terminal."""

from __future__ import annotations

from engine.loader import load_suite
from engine.report import SHOWN_TEXT_CHARS, format_eval
from engine.runner import run_suite
from evalsite.cli.progress import Tally


def test_a_long_reply_is_cut_in_the_report_saying_how_much_more_the_json_holds():
    reply = "word " * 3000
    suite = load_suite(
        "name: long\nmodel: mock\nmock:\n  default: |-\n    " + reply.strip() + "\n"
        "evals:\n  - {prompt: Say a lot, checks: [{contains: nothing-like-this}]}\n"
    )
    (result,) = _played(suite)
    shown = format_eval(result)
    assert f"… ({len(result.turns[0].response) - SHOWN_TEXT_CHARS:,} more characters in --json)" in shown
    assert len(shown) < SHOWN_TEXT_CHARS + 1000
    assert len(result.turns[0].response) > 14_000  # the result itself keeps it whole


def _played(suite):
    from engine.clients import EndpointConfig, EndpointRegistry

    return run_suite(
        suite, EndpointRegistry(default=EndpointConfig(name="default", base_url="http://127.0.0.1:9"))
    ).evals


def test_a_narrow_terminal_gets_every_figure_in_short_words():
    tally = Tally(20)
    wide = tally.line(200)
    assert wide.startswith("0/20 · 0 passed · 0 failed · 0 errors · 0 calls in flight · $0.0000")
    narrow = tally.line(40)
    assert narrow.startswith("0/20 ✓0 ✗0 !0 · 0 out · $0.0000") and len(narrow) <= 40
