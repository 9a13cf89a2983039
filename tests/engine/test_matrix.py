"""The matrix's variant syntax and its grid: cells, per-variant statistics and the paired test."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from scipy.stats import binomtest

from engine.matrix import (
    CellIn,
    ColumnIn,
    VariantError,
    agreement_line,
    build_grid,
    cell_text,
    column_stats,
    difference_lines,
    end_line,
    fitted_label,
    grid_csv,
    grid_markdown,
    grid_text,
    matrix_junit,
    mcnemar,
    parse_variants,
    percentile,
    row_mark,
    stop_text,
)


def column(key: str, outcomes: str, latencies=(), scores=None) -> ColumnIn:
    """A variant whose eval i ended as outcomes[i]: p passed, f failed, e error, c cancelled, q not played
    yet."""
    names = {"p": "passed", "f": "failed", "e": "error", "c": "cancelled", "q": "queued"}
    cells = [
        CellIn(index=i, eval_id=f"e{i}", iteration=0, status=names[mark], model_tokens=10, judge_tokens=3, cost=0.001,
               score=None if scores is None else scores[i], passed_on_turn=2 if mark == "p" else None)
        for i, mark in enumerate(outcomes)
    ]  # fmt: skip
    status = "running" if "q" in outcomes else ("passed" if set(outcomes) == {"p"} else "failed")
    return ColumnIn(key=key, label=key, model=key, status=status, cells=cells, latencies_ms=list(latencies))


def test_variants_read_models_and_settings():
    variants = parse_variants(["gpt-4o-mini, gpt-4o-mini@temperature=0.7@seed=3", "mock"])
    assert [v.model for v in variants] == ["gpt-4o-mini", "gpt-4o-mini", "mock"]
    assert variants[1].model_settings.temperature == 0.7 and variants[1].model_settings.seed == 3
    assert variants[1].name == "gpt-4o-mini temperature=0.7 seed=3"
    assert variants[0].model_settings is None and variants[0].name == "gpt-4o-mini"
    # One variant a text: a stop sequence may hold a comma.
    (kept,) = parse_variants(["m@stop=[',', END]"], split=False)
    assert kept.model_settings.stop == [",", "END"]


def test_a_variant_that_unsets_a_setting_is_named_for_it_and_keeps_the_null():
    """`@seed=null` sends no seed (the null removes the suite's): a column of its own, not the bare model's."""
    bare, unseeded = parse_variants(["gpt-4o, gpt-4o@seed=null"])
    assert (bare.name, unseeded.name) == ("gpt-4o", "gpt-4o seed=null")
    assert unseeded.model_settings.given() == {"seed": None}


@pytest.mark.parametrize(
    "text, words",
    [
        ("m@temperature=9", "temperature"),
        ("m@nonsense=1", "nonsense"),
        ("m@temperature", "KEY=VALUE"),
        ("@temperature=0", "no model"),
        ("a,a", "named twice"),
        (",".join(f"m{i}" for i in range(11)), "at most 10"),
    ],
)
def test_a_bad_variant_is_refused_by_name(text, words):
    with pytest.raises(VariantError, match=words):
        parse_variants([text])


@pytest.mark.parametrize(
    "text, words",
    [
        # A few aliases expand into millions of values in the request body.
        ("m@extra_body={a: &x [1, 1], b: [*x, *x]}", "extra_body: anchor &x is not allowed"),
        ("m@extra_body={a: 1, a: 2}", "duplicate key `a`"),
        ("m@seed=1@seed=2", "seed is set twice"),
    ],
)
def test_a_variants_value_is_read_as_a_suites_is(text, words):
    with pytest.raises(VariantError, match=words):
        parse_variants([text], split=False)


def test_stats_per_variant_with_wilson_interval_and_latency_percentiles():
    grid = build_grid([column("a", "ppfpe", latencies=[100, 200, 300, 400], scores=[1, 1, 0, 0.5, None])])
    (stats,) = grid.stats
    assert (stats.passed, stats.graded, stats.errors, stats.total) == (3, 4, 1, 5)
    assert stats.rate == 0.75
    assert stats.low == pytest.approx(0.3006, abs=1e-3) and stats.high == pytest.approx(0.9544, abs=1e-3)
    assert stats.mean_score == pytest.approx(2.5 / 4)
    assert (stats.model_tokens, stats.judge_tokens, stats.tokens, round(stats.cost, 6)) == (50, 15, 65, 0.005)
    assert (stats.p50_ms, stats.p95_ms) == (250, 385)
    assert percentile([], 50) is None


def test_rows_where_variants_disagree_come_first_or_in_the_suites_order():
    columns = [column("a", "ppfp"), column("b", "pffp")]
    grid = build_grid(columns)
    assert [row.eval_id for row in grid.rows] == ["e1", "e0", "e2", "e3"]
    assert [row.disagrees for row in grid.rows] == [True, False, False, False]
    assert [row.eval_id for row in build_grid(columns, sort="suite").rows] == ["e0", "e1", "e2", "e3"]


def test_an_error_or_a_cancelled_cell_is_no_disagreement_and_comes_after_the_real_ones():
    """A disagreement is between verdicts: a variant that passed beside one that errored has differed from
    nothing. Such a row is incomplete, after the rows whose verdicts differ and before those that agree;
    one whose verdicts differ (e2) stays a disagreement whatever else errored."""
    grid = build_grid([column("a", "pepfpq"), column("b", "ppcppp"), column("c", "ppfpep")])
    assert [row.eval_id for row in grid.rows] == ["e2", "e3", "e1", "e4", "e0", "e5"]
    assert [(row.disagrees, row.incomplete) for row in grid.rows] == [
        (True, True), (True, False), (False, True), (False, True), (False, False), (False, False),
    ]  # fmt: skip
    assert [line.split(",")[2] for line in grid_csv(grid).splitlines()[1:]] == [
        "yes", "yes", "incomplete", "incomplete", "no", "no",
    ]  # fmt: skip
    # A cell not played yet is neither: the row waits for it.
    assert [row.eval_id for row in build_grid([column("a", "pq"), column("b", "pp")]).rows] == ["e0", "e1"]


def test_the_terminal_and_the_markdown_mark_each_row_as_the_page_does():
    """`differs` where verdicts differ, `incomplete` where a variant has none to compare, nothing where they
    agree, and the page's count of each; "so far" while a variant plays."""
    grid = build_grid([column("a", "pepfp"), column("b", "ppcpp"), column("c", "ppfpe")])
    assert [(row.eval_id, row_mark(row)) for row in grid.rows] == [
        ("e2", "differs"), ("e3", "differs"), ("e1", "incomplete"), ("e4", "incomplete"), ("e0", ""),
    ]  # fmt: skip
    said = (
        "2 of 5 evals end differently across variants; 2 more have a cell with no verdict to compare (an error, "
        "or cancelled), listed after them."
    )
    text = grid_text(grid).splitlines()
    assert said in text
    table = [
        re.split(r"\s{2,}", line.replace("pass (turn 2)", "pass")) for line in text[text.index(said) + 2 :]
    ]
    assert table == [
        ["eval", "a", "b", "c"],
        ["e2", "pass", "cancelled", "FAIL", "differs"], ["e3", "FAIL", "pass", "pass", "differs"],
        ["e1", "error", "pass", "pass", "incomplete"], ["e4", "pass", "pass", "error", "incomplete"],
        ["e0", "pass", "pass", "pass"],
    ]  # fmt: skip
    markdown = grid_markdown(grid).replace("pass (turn 2)", "pass")
    assert said in markdown.splitlines()
    assert (
        "| eval | a | b | c |  |\n|---|---|---|---|---|\n| e2 | pass | cancelled | FAIL | differs |"
        in markdown
    )
    assert (
        "| e1 | error | pass | pass | incomplete |" in markdown
        and "| e0 | pass | pass | pass |  |" in markdown
    )
    in_suite_order = build_grid([column("a", "pe"), column("b", "pq")], sort="suite")
    assert agreement_line(in_suite_order) == (
        "0 of 2 evals end differently across variants so far; 1 more has a cell with no verdict to compare (an "
        "error, or cancelled)."
    )


def test_an_iteration_that_errored_takes_none_of_the_other_variants_iterations_out_of_the_test():
    """Six evals of three iterations: `a` passed one of the two it graded (the second errored or was
    cancelled), `b` two of three. Each variant's rate is over its own graded iterations, so `b` did better on
    every eval: six to none. Pairing iteration by iteration would drop `b`'s second pass with `a`'s error,
    call every eval a tie and find nothing."""
    a = [
        [("p", "passed"), ("e", "error"), ("f", "failed")],
        [("p", "passed"), ("c", "cancelled"), ("f", "failed")],
    ]
    first = ColumnIn("a", "a", "a", "failed", [
        CellIn(index=i, eval_id=f"e{i}", iteration=j, status=status)
        for i in range(6) for j, (_, status) in enumerate(a[i % 2])
    ])  # fmt: skip
    second = iterated("b", ["fpp"] * 6)
    (difference,) = build_grid([first, second]).differences
    assert (difference.first_only, difference.second_only) == (0, 6)
    assert difference.significant and difference.better == 1


def test_a_difference_is_significant_only_when_the_discordant_pairs_say_so():
    # Twelve evals a passes and b fails, none the other way: p = 2 * 0.5**12.
    strong = build_grid([column("a", "p" * 12 + "pf"), column("b", "f" * 12 + "pf")])
    (difference,) = strong.differences
    assert (difference.first_only, difference.second_only) == (12, 0)
    assert difference.p_value == pytest.approx(2 * 0.5**12)
    assert difference.significant and difference.better == 0
    assert strong.best == frozenset({0})
    # Three against one: not beyond chance, whatever the pass rates look like.
    weak = build_grid([column("a", "pppfpp"), column("b", "fffppp")])
    (difference,) = weak.differences
    assert (difference.first_only, difference.second_only) == (3, 1)
    assert difference.p_value == pytest.approx(binomtest(3, 4, 0.5).pvalue)
    assert not difference.significant
    # Errors and unplayed evals are not pairs.
    assert mcnemar(0, 0) == 1.0


@pytest.mark.parametrize(
    "first_only, second_only", [(0, 1), (1, 1), (5, 0), (7, 3), (2, 9), (30, 18), (120, 95)]
)
def test_the_exact_mcnemar_p_value_is_scipys_binomial_test(first_only, second_only):
    expected = binomtest(first_only, first_only + second_only, 0.5).pvalue
    assert mcnemar(first_only, second_only) == pytest.approx(expected, rel=1e-12)


def test_differences_skip_errors_and_unplayed_evals():
    (none,) = build_grid([column("a", "ppee"), column("b", "ppqq")]).differences
    assert (none.first_only, none.second_only, none.significant) == (0, 0, False)


def test_a_grid_is_finished_only_when_every_variant_is():
    assert not build_grid([column("a", "pp"), column("b", "pq")]).finished
    assert build_grid([column("a", "pp"), column("b", "pf")]).finished


def test_cells_say_pass_fail_score_and_the_turn_passed_on():
    assert cell_text(CellIn(0, "x", 0, "passed", passed_on_turn=3)) == "pass (turn 3)"
    assert cell_text(CellIn(0, "x", 0, "failed", score=0.4)) == "FAIL 0.40"
    assert cell_text(CellIn(0, "x", 0, "passed", score=1.0)) == "pass"  # a plain check's: no figure
    assert cell_text(CellIn(0, "x", 0, "running")) == "…"
    assert cell_text(None) == "—"


def test_exports_list_every_variant():
    grid = build_grid([column("a", "pf"), column("b", "pp")])
    lines = grid_csv(grid).splitlines()
    assert lines[0].startswith("eval,iteration,disagree,a status,a score,a passed_on_turn,a model_tokens,")
    assert ",b status,b score,b passed_on_turn," in lines[0]
    assert lines[1] == "e1,0,yes,failed,,,10,3,0,0.001,0,0.0,passed,,2,10,3,0,0.001,0,0.0"
    markdown = grid_markdown(grid)
    assert "| a | 50% [" in markdown and "| e1 | FAIL | pass (turn 2) |" in markdown
    junit = ET.fromstring(matrix_junit([("a", _junit("s", 2, 1)), ("b", _junit("s", 2, 0))]))
    assert [suite.get("name") for suite in junit.iter("testsuite")] == ["s [a]", "s [b]"]
    assert (junit.get("tests"), junit.get("failures")) == ("4", "1")


def _junit(name: str, tests: int, failures: int) -> str:
    return (
        f'<testsuites><testsuite name="{name}" tests="{tests}" failures="{failures}" errors="0" time="1">'
        f'<testcase name="x" classname="{name}"/></testsuite></testsuites>'
    )


def test_best_marks_only_a_variant_that_did_better_than_another():
    assert build_grid([column("a", "ppf"), column("b", "ppf"), column("c", "ppf")]).best == frozenset()
    assert build_grid([column("a", "ppf"), column("b", "ppf"), column("c", "pff")]).best == frozenset({0, 1})


def test_cached_calls_are_summed_and_left_out_of_the_latency_of_a_report():
    from engine.matrix import column_of_report
    from engine.results import EvalResult, RunReport, Totals, TurnRecord

    def turn(n, latency, cached):
        return TurnRecord(turn=n, prompt="q", response="a", latency_ms=latency, cached=cached,
                          cached_calls=int(cached), saved_cost=0.002 if cached else 0.0)  # fmt: skip

    turns = [turn(1, 0, True), turn(2, 300, False), turn(3, 500, False)]
    result = EvalResult(
        index=0,
        id="e0",
        kind="multi-turn",
        prompt="q",
        verdict="",
        status="passed",
        turns=turns,
        totals=Totals.of(turns),
    )
    report = RunReport.model_construct(model="m", status="passed", evals=[result])  # what the column reads
    stats = build_grid([column_of_report("a", "a", report)]).stats[0]
    assert (stats.cached_calls, round(stats.saved_cost, 6)) == (1, 0.002)
    assert (stats.p50_ms, stats.p95_ms) == (400, 490)


def iterated(key: str, outcomes: list[str]) -> ColumnIn:
    """A variant whose eval i ran len(outcomes[i]) times, iteration j ending as outcomes[i][j]."""
    names = {"p": "passed", "f": "failed"}
    cells = [
        CellIn(index=i, eval_id=f"e{i}", iteration=j, status=names[mark])
        for i, marks in enumerate(outcomes)
        for j, mark in enumerate(marks)
    ]
    return ColumnIn(key=key, label=key, model=key, status="failed", cells=cells)


def test_an_evals_iterations_are_one_pair_not_many():
    """Six evals of ten iterations each, where one variant passes every time and the other half the time:
    sixty discordant conversations, but only six evals of evidence, which a two-sided exact test cannot
    call beyond chance at p < 0.05 (0.031 needs six of six; here it is 1/32)."""
    always = iterated("always", ["p" * 10] * 6)
    half = iterated("half", ["pf" * 5] * 6)
    (difference,) = build_grid([always, half]).differences
    assert (difference.first_only, difference.second_only) == (6, 0)
    assert difference.p_value == pytest.approx(binomtest(6, 6).pvalue)
    four = build_grid([iterated("always", ["p" * 10] * 4), iterated("half", ["pf" * 5] * 4)])
    assert not four.differences[0].significant  # per conversation it was 20 to 0: p ≈ 2e-6
    assert "passed more often on 6 evals, less often on 0 (exact sign test over evals" in "\n".join(
        difference_lines(build_grid([always, half]))
    )


def test_a_label_that_starts_like_a_formula_is_text_in_the_csv():
    grid = build_grid([column('=HYPERLINK("http://x","click")', "pf"), column("@b", "fp")])
    header = grid_csv(grid).splitlines()[0]
    assert header.startswith("eval,iteration,disagree,\"'=HYPERLINK(")
    assert ",'@b status," in header


def test_a_long_variant_name_fits_a_runs_label_and_stays_apart_from_others_cut_alike():
    long = "m@stop=" + "z" * 200
    first, second = fitted_label(long + "1"), fitted_label(long + "2")
    assert len(first) == len(second) == 100 and first != second
    assert fitted_label("gpt-4o-mini temperature=0.7") == "gpt-4o-mini temperature=0.7"


def test_the_models_tokens_are_told_apart_from_the_judges_and_the_simulated_users_everywhere():
    """A variant's tokens are not one figure that a judge's grading swells: the model's, the judges' and (when
    a variant has a simulated user) the user's, each under its own name, in the terminal's table, the
    Markdown, the CSV; read from a run's report as from the database."""
    from engine.matrix import column_of_report
    from engine.results import EvalResult, RunReport, Totals, TurnRecord, Usage

    turns = [
        TurnRecord(turn=1, prompt="q", response="a", usage=Usage(prompt_tokens=40, completion_tokens=2),
                   judge_usage=Usage(prompt_tokens=300, completion_tokens=20))
    ]  # fmt: skip
    result = EvalResult(index=0, id="e0", kind="single-turn", prompt="q", verdict="", status="passed",
                        turns=turns, totals=Totals.of(turns))  # fmt: skip
    judged = column_of_report(
        "a", "judged", RunReport.model_construct(model="m", status="passed", evals=[result])
    )
    (cell,) = judged.cells
    assert (cell.model_tokens, cell.judge_tokens, cell.user_tokens) == (42, 320, 0)
    grid = build_grid([judged, column("b", "p")])
    header, judged_line = (re.split(r"\s{2,}", line) for line in grid_text(grid).splitlines()[:2])
    assert header[4:7] == ["model tokens", "judge tokens", "cost"]
    assert judged_line[4:6] == ["42", "320"]
    assert "| variant | pass rate [95%] | passed | mean score | model tokens | judge tokens | cost |" in (
        grid_markdown(grid)
    )
    assert "| judged | 100% [21%–100%] | 1/1 | — | 42 | 320 |" in grid_markdown(grid)
    rows = grid_csv(grid).splitlines()
    assert ",judged model_tokens,judged judge_tokens,judged user_tokens,judged cost," in rows[1 - 1]
    assert rows[1].split(",")[6:9] == ["42", "320", "0"]
    # A simulated user's tokens: a column of their own, on every variant's line.
    talked = CellIn(index=0, eval_id="e0", iteration=0, status="passed", model_tokens=5, user_tokens=70)
    grid = build_grid([ColumnIn("c", "c", "m", "passed", [talked]), column("b", "p")])
    assert "| model tokens | judge tokens | simulated-user tokens | cost |" in grid_markdown(grid)
    assert "| c | 100% [21%–100%] | 1/1 | — | 5 | 0 | 70 |" in grid_markdown(grid)
    assert "| b | 100% [21%–100%] | 1/1 | — | 10 | 3 | 0 |" in grid_markdown(grid)


def test_each_variants_calls_from_the_cache_and_their_savings_are_in_the_terminal_the_markdown_and_the_csv():
    cached = CellIn(index=0, eval_id="e0", iteration=0, status="passed", cached_calls=4, saved_cost=0.0031)
    grid = build_grid([ColumnIn("a", "a", "m", "passed", [cached]), column("b", "p")])
    header, first, second = (re.split(r"\s{2,}", line) for line in grid_text(grid).splitlines()[:3])
    assert header[7:9] == ["cached calls", "saved"]
    assert (first[7:9], second[7:9]) == (["4", "$0.0031"], ["0", "$0.0000"])
    markdown = grid_markdown(grid)
    assert "| cost | cached calls | saved | p50 | p95 |" in markdown
    assert "| $0.0000 | 4 | $0.0031 |" in markdown
    lines = grid_csv(grid).splitlines()
    assert ",a cached_calls,a saved_cost,b status," in lines[0] and lines[0].endswith(",b saved_cost")
    assert lines[1].split(",")[10:12] == ["4", "0.0031"]
    # No call from the cache: the terminal and the Markdown say nothing of it; the CSV keeps its columns.
    plain = build_grid([column("a", "p"), column("b", "f")])
    assert "cached" not in grid_text(plain) and "cached" not in grid_markdown(plain)
    assert grid_csv(plain).splitlines()[1].split(",")[10:12] == ["0", "0.0"]


def test_a_variants_end_says_its_errors_in_the_plural_and_what_its_stop_left_unplayed():
    assert end_line("[1/2] a", 8, 0, 1, 9) == "[1/2] a: 8 passed, 0 failed, 1 error of 9"
    assert end_line("[2/2] b", 7, 0, 2, 9) == "[2/2] b: 7 passed, 0 failed, 2 errors of 9"
    stopped = {"stop_reason": "cost limit $0.05 reached", "cancelled": 18}
    assert end_line("[1/2] a", 0, 2, 0, 20, **stopped, not_started=16) == (
        "[1/2] a: 0 passed, 2 failed, 0 errors, 2 stopped, 16 not started (cost limit $0.05 reached) of 20"
    )
    # A server that does not say which were never started: counted together, not guessed.
    assert end_line("[1/2] a", 0, 2, 0, 20, **stopped, not_started=None) == (
        "[1/2] a: 0 passed, 2 failed, 0 errors, 18 not played (cost limit $0.05 reached) of 20"
    )


def test_a_variant_stopped_short_reads_not_started_where_it_started_nothing():
    reason = "cost limit $0.05 reached"
    cells = [
        CellIn(index=0, eval_id="e0", iteration=0, status="failed"),
        CellIn(
            index=1, eval_id="e1", iteration=0, status="cancelled", reason=f"stopped after 1 turn: {reason}"
        ),
        CellIn(index=2, eval_id="e2", iteration=0, status="cancelled", reason=f"not started: {reason}"),
        CellIn(index=3, eval_id="e3", iteration=0, status="cancelled", reason="cancelled"),  # by hand
    ]
    assert [cell_text(cell) for cell in cells] == ["FAIL", "cancelled", "not started", "cancelled"]
    stopped = ColumnIn(key="a", label="a", model="a", status="cancelled", cells=cells, stop_reason=reason)
    assert stop_text(stopped, column_stats(stopped)) == (
        "cost limit $0.05 reached — 1 of 4 conversations played, 2 stopped mid-way, 1 not started"
    )
    playing = [*cells[:3], CellIn(index=3, eval_id="e3", iteration=0, status="running")]
    stopping = ColumnIn(key="a", label="a", model="a", status="running", cells=playing, stop_reason=reason)
    assert stop_text(stopping, column_stats(stopping)) == "cost limit $0.05 reached; 1 finishing"
    cancelled = ColumnIn(key="a", label="a", model="a", status="cancelled", cells=cells)
    assert stop_text(cancelled, column_stats(cancelled)) == ""
