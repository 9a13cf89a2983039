"""How two runs' tool calls of one eval differ (engine.compare): tools called in one run only, the same tools in
another order, and one turn's calls lined up by name, as the compare page and `--baseline` read them."""

from __future__ import annotations

from engine.compare import compare_runs, line_up_calls, tool_change
from engine.results import EvalResult, ToolCall, ToolRound, TurnRecord


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(id=name, name=name, arguments=arguments, result="ok")


def result(*calls: ToolCall, iteration: int = 0) -> EvalResult:
    turn = TurnRecord(turn=1, prompt="p", response="r", tool_rounds=[ToolRound(calls=list(calls))])
    return EvalResult(index=0, id="agent", kind="single-turn", prompt="p", status="passed", verdict="passed",
                      turns=[turn], iteration=iteration)  # fmt: skip


def test_tools_called_in_one_run_only_are_named():
    change = tool_change(["search", "book"], ["book", "pay"])
    assert (change.only_before, change.only_after) == (["search"], ["pay"])
    assert change.words == "now calls pay, no longer search"
    assert tool_change(["search"], []).words == "no longer calls search"
    assert tool_change([], ["search"]).words == "now calls search"


def test_the_same_tools_in_another_order_or_number_differ_unless_iterated():
    assert tool_change(["search", "book"], ["search", "book"]) is None
    moved = tool_change(["search", "book"], ["book", "search"])
    assert moved.sequence_changed and moved.words == "calls its tools in another order or number"
    assert tool_change(["search"], ["search", "search"]).sequence_changed
    assert tool_change(["search", "book"], ["book", "search"], ordered=False) is None


def test_compare_runs_reads_the_calls_from_each_eval_result():
    (row,) = compare_runs([result(call("search"))], [result(call("book"))]).rows
    assert row.tool_change.words == "now calls book, no longer search"
    (same,) = compare_runs([result(call("search", q="a"))], [result(call("search", q="b"))]).rows
    assert same.tool_change is None  # other arguments show turn by turn, not in the table
    iterated = compare_runs(
        [result(call("search"), call("book")), result(call("book"), iteration=1)],
        [result(call("book"), call("search")), result(iteration=1)],
    ).rows[0]
    assert iterated.iterated and iterated.tool_change is None  # the same tools over the iterations


def test_one_turns_calls_are_lined_up_by_name():
    pairs = line_up_calls([call("search", q="a"), call("book", day=1)], [call("book", day=2), call("pay")])
    lined = [(p.before.name if p.before else None, p.after.name if p.after else None) for p in pairs]
    assert lined == [("search", None), ("book", "book"), (None, "pay")]
    assert [p.only for p in pairs] == ["before", None, "after"]
    assert pairs[1].arguments_changed and not pairs[1].result_changed and pairs[1].changed
    assert not line_up_calls([call("search", q="a")], [call("search", q="a")])[0].changed
