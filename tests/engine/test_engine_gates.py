"""Suite gates: metrics over the evals' results, operators, and the report status they decide."""

from __future__ import annotations

import pytest

from engine.clients import EndpointConfig, EndpointRegistry
from engine.gates import evaluate_gates, percentile
from engine.loader import load_suite
from engine.results import EvalResult, gated_status
from engine.runner import run_suite
from engine.schema import Gate
from tests.engine.scripted_play import (
    problems_of,
)

# --- gates ----------------------------------------------------------------------------------------------


def result_of(status: str, score: float | None) -> EvalResult:
    return EvalResult(index=0, id="e", kind="single-turn", prompt="p", status=status, score=score, verdict="")


# scores 1.0, 0.5, 0.0, 0.75 (3 finished + 1 failed), plus an error with no score
EVALS = [
    result_of("passed", 1.0),
    result_of("failed", 0.5),
    result_of("failed", 0.0),
    result_of("passed", 0.75),
    result_of("error", None),
]


def test_gate_metrics_hand_computed():
    gates = [Gate(metric=metric, op=">=", value=0) for metric in ("avg", "min", "accuracy", "p95")]
    actual = {gate.metric: gate.actual for gate in evaluate_gates(gates, EVALS)}
    assert actual["avg"] == pytest.approx((1.0 + 0.5 + 0.0 + 0.75) / 4)  # 0.5625; the error has no score
    assert actual["min"] == 0.0
    assert actual["accuracy"] == pytest.approx(2 / 4)  # passed / (passed + failed); errors left out
    # sorted [0, .5, .75, 1]: rank (4-1)*0.95 = 2.85 -> 0.75 + 0.85 * (1 - 0.75)
    assert actual["p95"] == pytest.approx(0.9625)
    assert percentile([0.0, 1.0], 0.95) == pytest.approx(0.95)
    assert percentile([0.3], 0.95) == 0.3


@pytest.mark.parametrize(
    ("op", "value", "passed"),
    [
        (">=", 0.5625, True),
        (">=", 0.57, False),
        (">", 0.5625, False),
        (">", 0.56, True),
        ("<=", 0.5625, True),
        ("<=", 0.56, False),
        ("<", 0.5625, False),
        ("<", 0.6, True),
        ("==", 0.5625, True),
        ("==", 0.5, False),
    ],
)
def test_gate_operators(op, value, passed):
    (gate,) = evaluate_gates([Gate(metric="avg", op=op, value=value)], EVALS)
    assert gate.passed is passed
    assert gate.label == f"avg {op} {value:g}"


def test_gate_with_no_scored_eval_fails_with_no_actual():
    (gate,) = evaluate_gates([Gate(metric="avg", value=0.0)], [result_of("error", None)])
    assert (gate.actual, gate.passed) == (None, False)
    (gate,) = evaluate_gates([Gate(metric="accuracy", value=0.0)], [result_of("error", None)])
    assert (gate.actual, gate.passed) == (None, False)


def test_gated_status_gates_decide_but_errors_still_win():
    passing = evaluate_gates([Gate(metric="avg", op=">=", value=0.5)], EVALS[:4])
    failing = evaluate_gates([Gate(metric="min", op=">", value=0.0)], EVALS[:4])
    assert gated_status(EVALS[:4], passing) == "passed"  # two evals failed, the gate holds
    assert gated_status(EVALS[:4], failing) == "failed"
    assert gated_status(EVALS, passing) == "error"  # an eval errored: its result is unknown
    all_passed = [result_of("passed", 1.0), result_of("passed", 0.6)]
    assert gated_status(all_passed, evaluate_gates([Gate(metric="avg", value=0.9)], all_passed)) == "failed"
    assert gated_status(EVALS[:4], []) == "failed"  # no gates: any failure fails the run
    assert gated_status([result_of("cancelled", None), *all_passed], passing) == "cancelled"


def test_gate_validation():
    problems = problems_of(
        "name: s\ngates:\n  - {metric: median, value: 1}\nevals:\n  - input: a\n    ground_truth: b\n"
    )
    assert problems[0].path == "gates[0].metric"
    problems = problems_of(
        "name: s\ngates:\n  - {metric: avg, op: '=>', value: 1}\nevals:\n  - input: a\n    ground_truth: b\n"
    )
    assert problems[0].path == "gates[0].op"
    problems = problems_of("name: s\ngates:\n  - {metric: avg}\nevals:\n  - input: a\n    ground_truth: b\n")
    assert problems[0].message == "`value` is required"


GATED_SUITE = """
name: gated
model: mock
grader: contains
gates:
  - {metric: avg, op: ">=", value: 0.6}
  - {metric: accuracy, op: ">=", value: 0.5}
mock:
  rules:
    - {when: "*France*", reply: Paris}
    - {when: "*Germany*", reply: Berlin}
    - {when: "*Italy*", reply: Madrid}
evals:
  - id: europe
    input: [France?, Germany?, Italy?]
    ground_truth: [Paris, Berlin, Rome]
  - id: france
    input: France?
    ground_truth: Paris
"""


def test_run_suite_gates_decide_the_report_status():
    """In-process run on the mock: one eval fails (2/3), the gates (avg 0.83, accuracy 0.5) pass the run."""
    registry = EndpointRegistry(EndpointConfig(name="default", base_url="http://127.0.0.1:9/v1"))
    report = run_suite(load_suite(GATED_SUITE), registry)
    by_id = {result.id: result for result in report.evals}
    assert (by_id["europe"].status, by_id["europe"].score) == ("failed", pytest.approx(2 / 3))
    assert [g.submission for g in by_id["europe"].per_turn_grades] == ["Paris", "Berlin", "Madrid"]
    assert by_id["france"].status == "passed"
    assert [(g.label, g.passed) for g in report.gates] == [("avg >= 0.6", True), ("accuracy >= 0.5", True)]
    assert report.gates[0].actual == pytest.approx((2 / 3 + 1) / 2)
    assert report.status == "passed"
    stricter = run_suite(load_suite(GATED_SUITE.replace("value: 0.6", "value: 0.9")), registry)
    assert stricter.status == "failed"
    assert [g.passed for g in stricter.gates] == [False, True]
