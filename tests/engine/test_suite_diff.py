"""Two suite versions compared: the numbered line diff with folded context, and the evals added,
removed and changed, matched by id, and the settings that changed."""

from __future__ import annotations

from engine.loader import load_suite
from engine.suite_diff import diff_sources, diff_suites

OLD = """\
name: tutor
model: mock
evals:
  - id: add
    prompt: What is 2+2?
    checks: [{contains: "4"}]
  - id: capital
    prompt: Capital of France?
    checks: [{contains: Paris}]
  - id: greet
    prompt: Say hi.
    checks: [{match: "*"}]
"""

NEW = """\
name: tutor
model: openai/gpt-4o-mini
evals:
  - id: add
    prompt: What is 2+2?
    checks: [{contains: "4"}]
  - id: capital
    prompt: What is the capital of France?
    checks: [{contains: Paris}]
  - id: farewell
    prompt: Say bye.
    checks: [{match: "*"}]
"""


def test_evals_are_matched_by_id_and_settings_named():
    diff = diff_suites(OLD, NEW, load_suite(OLD), load_suite(NEW))
    assert (diff.added, diff.removed, diff.changed, diff.settings) == (
        ["farewell"],
        ["greet"],
        ["capital"],
        ["model"],
    )
    assert not diff.identical


def test_the_line_diff_is_numbered_and_folds_unchanged_stretches():
    lines = diff_sources(OLD, NEW, context=1)
    kinds = [(line.kind, line.old, line.new) for line in lines]
    assert kinds[:4] == [("same", 1, 1), ("del", 2, None), ("add", None, 2), ("same", 3, 3)]
    assert ("skip", None, None) in kinds  # lines 4-6 are unchanged and more than one line from a change
    deleted = [line.text for line in lines if line.kind == "del"]
    assert deleted == [
        "model: mock",
        "    prompt: Capital of France?",
        "  - id: greet",
        "    prompt: Say hi.",
    ]


def test_an_invalid_version_still_gets_its_line_diff():
    diff = diff_suites(OLD, "name: [", load_suite(OLD), None)
    assert diff.lines and diff.added == diff.removed == diff.changed == []


def test_identical_versions():
    diff = diff_suites(OLD, OLD, load_suite(OLD), load_suite(OLD))
    assert diff.identical and diff.lines == []
