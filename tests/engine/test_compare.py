"""Comparing two runs, on hand-made pairs of results: regressions, fixes, still failing, evals
added and removed, iterated evals by pass rate, and one eval's two conversations turn by turn."""

from __future__ import annotations

import pytest

from engine.compare import Change, compare_runs, side_by_side
from engine.results import CheckResult, EvalResult, Totals, TurnRecord


def check(label: str, passed: bool) -> CheckResult:
    return CheckResult(type="match", label=label, passed=passed, reason="")


def turn(number: int, prompt: str, response: str, node: str, *checks: CheckResult) -> TurnRecord:
    return TurnRecord(
        turn=number, node=node, prompt=prompt, response=response, checks=list(checks),
        passed=all(c.passed for c in checks) if checks else None,
    )  # fmt: skip


def result(
    id: str, status: str, score: float | None = None, *, iteration: int = 0, cost: float = 0.0, turns=()
) -> EvalResult:
    if score is None and status in ("passed", "failed"):
        score = 1.0 if status == "passed" else 0.0
    return EvalResult(
        index=0, id=id, kind="single-turn", iteration=iteration, prompt=f"{id}?", status=status,
        score=score, verdict=status, turns=list(turns), totals=Totals(turns=len(turns), cost=cost),
    )  # fmt: skip


def test_each_eval_is_a_regression_a_fix_still_failing_or_unchanged():
    before = [
        result("a", "passed", cost=0.10),
        result("b", "failed", cost=0.10),
        result("c", "failed"),
        result("d", "passed"),
        result("e", "passed"),
        result("gone", "passed"),
    ]
    after = [
        result("a", "failed", cost=0.25),
        result("b", "passed", cost=0.05),
        result("c", "failed"),
        result("d", "passed"),
        result("e", "error"),  # an error after a pass is a regression: the eval no longer passes
        result("new", "failed"),
    ]
    comparison = compare_runs(before, after)
    changes = {row.id: row.change for row in comparison.rows}
    assert changes == {
        "a": Change.REGRESSION, "b": Change.FIX, "c": Change.STILL_FAILING, "d": Change.UNCHANGED,
        "e": Change.REGRESSION, "gone": Change.REMOVED, "new": Change.ADDED,
    }  # fmt: skip
    # What broke is listed first, in suite order; then fixes; then the rest.
    assert [row.id for row in comparison.rows] == ["a", "e", "b", "c", "d", "new", "gone"]
    assert comparison.counts[Change.REGRESSION] == 2 and comparison.counts[Change.FIX] == 1
    assert comparison.counts[Change.UNCHANGED] == 1 and comparison.counts[Change.STILL_FAILING] == 1
    assert [row.id for row in comparison.regressions] == ["a", "e"]
    # Scores over the evals graded in both runs (a b c d; e errored after): before 2/4, after 2/4.
    assert (comparison.score_before, comparison.score_after, comparison.score_delta) == (0.5, 0.5, 0.0)
    assert comparison.cost_before == pytest.approx(0.20) and comparison.cost_after == pytest.approx(0.30)
    a = comparison.rows[0]
    assert a.score_delta == -1.0 and a.cost_delta == pytest.approx(0.15)


def test_partial_scores_give_score_deltas():
    comparison = compare_runs([result("x", "failed", 0.4)], [result("x", "failed", 0.7)])
    (row,) = comparison.rows
    assert row.change == Change.STILL_FAILING and row.score_delta == pytest.approx(0.3)


def test_a_cancelled_or_running_eval_is_incomplete_not_a_regression():
    comparison = compare_runs([result("x", "passed")], [result("x", "cancelled")])
    assert comparison.rows[0].change == Change.INCOMPLETE
    assert compare_runs([result("x", "running")], [result("x", "passed")]).rows[0].change == Change.INCOMPLETE


def test_iterated_evals_compare_pass_rates_with_intervals():
    # Before: 9 of 10 passed; after: 2 of 10. The Wilson intervals (0.596-0.982, 0.057-0.510) do not overlap.
    before = [result("flaky", "passed" if i < 9 else "failed", iteration=i) for i in range(10)]
    after = [result("flaky", "passed" if i < 2 else "failed", iteration=i) for i in range(10)]
    (row,) = compare_runs(before, after).rows
    assert row.iterated and row.change == Change.REGRESSION
    assert (row.before.passes, row.before.graded, row.after.passes, row.after.graded) == (9, 10, 2, 10)
    assert row.before.pass_rate == 0.9 and row.after.pass_rate == 0.2
    assert row.before.pass_rate_low == pytest.approx(0.5958, abs=5e-4)
    assert row.after.pass_rate_high == pytest.approx(0.5098, abs=5e-4)
    assert row.rates_differ
    assert row.score_delta == pytest.approx(0.2 - 0.9)


def test_iterated_rates_that_overlap_are_not_called_different():
    before = [result("x", "passed" if i < 3 else "failed", iteration=i) for i in range(5)]
    after = [result("x", "passed" if i < 2 else "failed", iteration=i) for i in range(5)]
    (row,) = compare_runs(before, after).rows
    assert row.change == Change.REGRESSION  # 3/5 passes by majority, 2/5 does not
    assert not row.rates_differ


def test_errored_iterations_are_left_out_of_the_rate():
    before = [result("x", "passed", iteration=0), result("x", "error", iteration=1)]
    after = [result("x", "error", iteration=0), result("x", "error", iteration=1)]
    (row,) = compare_runs(before, after).rows
    assert (row.before.passes, row.before.graded, row.before.status) == (1, 1, "passed")
    assert (row.after.graded, row.after.status) == (0, "error")
    assert row.change == Change.REGRESSION


# --- one eval, turn by turn ---------------------------------------------------------------------------------


def test_side_by_side_lines_up_turns_and_finds_where_a_tree_parted():
    # Before: turn 1 fails "*105*", so the follow-up at checks[0] is sent; after: turn 1 fails "*polite*"
    # instead, so another branch (checks[1]) follows. Turn 3 exists only before.
    before = result("tree", "failed", turns=[
        turn(1, "15 * 7?", "100", "evals[0]", check("match *105*", False), check("match *polite*", True)),
        turn(2, "Recalculate.", "105", "evals[0].checks[0]", check("match *105*", True)),
        turn(3, "Sure?", "Yes", "evals[0].checks[0].checks[0]"),
    ])  # fmt: skip
    after = result("tree", "passed", turns=[
        turn(1, "15 * 7?", "105", "evals[0]", check("match *105*", True), check("match *polite*", False)),
        turn(2, "Be polite.", "105, thank you", "evals[0].checks[1]", check("match *thank*", True)),
    ])  # fmt: skip
    view = side_by_side(before, after)
    assert view.diverged_at == 2
    first, second, third = view.pairs
    assert (first.prompt_changed, first.reply_changed, first.branch_changed) == (False, True, False)
    assert [(f.label, f.before, f.after) for f in first.flips] == [
        ("match *105*", False, True), ("match *polite*", True, False),
    ]  # fmt: skip
    assert second.branch_changed and second.prompt_changed
    assert [(f.label, f.before, f.after) for f in second.flips] == [
        ("match *105*", True, None), ("match *thank*", None, True),
    ]  # fmt: skip
    assert third.only == "before" and third.after is None
    assert view.changed_replies == 3


def test_identical_conversations_have_no_flips_and_no_divergence():
    turns = [turn(1, "Hi", "Hello", "evals[0].input[0]", check("match *Hello*", True))]
    view = side_by_side(result("s", "passed", turns=turns), result("s", "passed", turns=turns))
    assert view.diverged_at is None and view.changed_replies == 0
    assert view.pairs[0].flips == [] and view.pairs[0].only is None


def test_a_changed_reply_on_the_same_branch_is_not_a_divergence():
    a = result("s", "passed", turns=[turn(1, "Hi", "Hello", "evals[0]", check("match *H*", True))])
    b = result("s", "passed", turns=[turn(1, "Hi", "Hey", "evals[0]", check("match *H*", True))])
    view = side_by_side(a, b)
    assert view.diverged_at is None and view.pairs[0].reply_changed and not view.pairs[0].flips
