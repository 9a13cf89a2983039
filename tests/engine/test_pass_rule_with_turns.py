"""A weighted pass rule `with_turns` on a `turns` conversation, against the real fake endpoint: every graded
turn's score and the graders' weighted mean (one more score) combine by `aggregation` and pass at the rule's
threshold, as AgentV scores its conversation tests; a required grader that fails zeroes the graders' score; a
stopped conversation fails; reviewers' overrides recount it the same way; the rule is refused without turns."""

from __future__ import annotations

import json
import os

import pytest

from engine.clients import EndpointConfig, EndpointRegistry
from engine.drivers import Defaults, driver_for
from engine.loader import load_suite
from engine.overrides import reverdict
from engine.results import OverrideRecord
from engine.runner import run_suite
from engine.source import SuiteError
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

SUITE = """\
name: coding
model: agent
judge: judge
evals:
  - id: code
    turns:
      - input: Write a function that adds two numbers.
        checks: [{contains: def}, {contains: "return"}]
      - input: Now add type hints.
        checks: [{contains: "->"}]
    graders:
      coherent: {kind: llm_judge, rubric: "Is the whole conversation correct Python?", threshold: 0.8}
    pass_rule: {weighted_average: {coherent: 1}, threshold: 0.8, with_turns: true}
"""


def registry(fake) -> EndpointRegistry:
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    return EndpointRegistry(config)


def play(fake, source: str, first: str, second: str, judged: float):
    fake.rule("adds two numbers", first, model="agent")
    fake.rule("type hints", second, model="agent")
    fake.rule("correct Python", json.dumps({"score": judged, "reason": f"says {judged}"}), where="any",
              model="judge")  # fmt: skip
    suite = load_suite(source)
    (result,) = run_suite(suite, registry(fake), concurrency=1).evals
    return suite, result


RIGHT = "def add(a, b):\n    return a + b"
HINTED = "def add(a: int, b: int) -> int:\n    return a + b"


def test_every_turn_right_and_the_judge_at_zero_fails_on_the_mean(fake_openai):
    _, result = play(fake_openai, SUITE, RIGHT, HINTED, 0.0)
    # (1 + 1 + 0) / 3: the judge's score is one score beside the turns', not folded into the last turn
    assert result.status == "failed" and result.score == pytest.approx(2 / 3)
    assert result.verdict == (
        "score 0.67 < 0.80, the mean of the turns' 1.00, 1.00 and the graders' 0.00: coherent 0.00 < 0.80"
    )
    assert result.turns_passed == 2 and result.turns_total == 2


def test_a_failed_turn_check_passes_when_the_mean_reaches_the_threshold(fake_openai):
    _, result = play(fake_openai, SUITE, "def add(a, b): a + b", HINTED, 1.0)
    # turn 1 scores 0.5 (one of its two checks), turn 2 and the judge 1: (0.5 + 1 + 1) / 3
    assert result.turns[0].passed is False
    assert result.status == "passed" and result.score == pytest.approx(2.5 / 3)


@pytest.mark.parametrize(("aggregation", "score", "status"), [("min", 0.5, "failed"), ("max", 1.0, "passed")])
def test_min_and_max_take_the_graders_score_with_the_turns(fake_openai, aggregation, score, status):
    source = SUITE.replace("    graders:", f"    aggregation: {aggregation}\n    graders:")
    _, result = play(fake_openai, source, "def add(a, b): a + b", HINTED, 1.0)
    assert result.status == status and result.score == pytest.approx(score)


def test_min_fails_on_the_graders_score_alone(fake_openai):
    source = SUITE.replace("    graders:", "    aggregation: min\n    graders:")
    _, result = play(fake_openai, source, RIGHT, HINTED, 0.5)
    assert result.status == "failed" and result.score == pytest.approx(0.5)


def test_a_required_grader_that_fails_counts_zero(fake_openai):
    source = SUITE.replace(
        "threshold: 0.8, with_turns: true}",
        "threshold: 0.5, with_turns: true, required: [coherent]}",
    )
    _, result = play(fake_openai, source, RIGHT, HINTED, 0.7)
    # the judge's 0.7 is under its own 0.8: the graders count 0, (1 + 1 + 0) / 3 still reaches 0.5
    assert result.status == "passed" and result.score == pytest.approx(2 / 3)
    assert "required coherent failed" in result.verdict


def test_a_conversation_stopped_at_a_failed_turn_fails(fake_openai):
    source = SUITE.replace("    graders:", "    aggregation: max\n    on_turn_failure: stop\n    graders:")
    _, result = play(fake_openai, source, "no code", HINTED, 1.0)
    assert len(result.turns) == 1
    assert result.status == "failed" and "stopped" in result.verdict


def test_an_override_recounts_under_the_same_rule(fake_openai):
    suite, result = play(fake_openai, SUITE, RIGHT, HINTED, 0.0)
    ev = suite.evals[0]
    turned = OverrideRecord(turn=2, target="checks[0]", passed=False, note="not typed")
    reviewed = reverdict(driver_for(ev, 0, Defaults.of(suite)), result.turns, [turned],
                         graders=result.graders, pass_rule=ev.pass_rule)  # fmt: skip
    assert reviewed.verdict.outcome == "failed" and reviewed.verdict.score == pytest.approx(1 / 3)
    graders = [item.model_copy(update={"score": 1.0, "passed": True}) for item in result.graders]
    reviewed = reverdict(driver_for(ev, 0, Defaults.of(suite)), result.turns, [],
                         graders=graders, pass_rule=ev.pass_rule)  # fmt: skip
    assert reviewed.verdict.outcome == "passed" and reviewed.verdict.score == pytest.approx(1.0)


def test_with_turns_is_refused_without_turns():
    source = SUITE.replace(
        """    turns:
      - input: Write a function that adds two numbers.
        checks: [{contains: def}, {contains: "return"}]
      - input: Now add type hints.
        checks: [{contains: "->"}]
""",
        "    input: Write a function.\n    checks: [{contains: def}]\n",
    )
    with pytest.raises(SuiteError) as caught:
        load_suite(source)
    problem = caught.value.problems[0]
    assert problem.path == "evals[0].pass_rule.with_turns" and "`turns`" in problem.message, problem


def test_turns_graded_by_their_own_graders_alone(fake_openai):
    source = SUITE.replace('        checks: [{contains: def}, {contains: "return"}]\n', "").replace(
        '        checks: [{contains: "->"}]\n', ""
    )
    _, result = play(fake_openai, source, RIGHT, HINTED, 0.9)
    assert result.turns_total == 0 and result.status == "passed" and result.score == pytest.approx(0.9)
    with pytest.raises(SuiteError, match="no turn has checks"):
        load_suite(source.split("    graders:")[0])  # neither checks nor graders
