"""Two runs side by side: which evals regressed, which were fixed, how scores and costs moved, and, for one
eval, its two conversations turn by turn.

Plain Python over engine.results models, so the compare page, the API, the CLI's `--baseline` and the
Markdown summary all read one answer. Evals are matched by id (an eval's `id`, else `eval-<n>`), so two
versions of a suite compare as long as their ids are stable; iterations of an eval are compared by pass
rate, with Wilson 95% intervals, never iteration by iteration (iteration 3 of one run has nothing to do
with iteration 3 of the other).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .outcomes import GRADED, Status
from .results import CheckResult, EvalResult, ToolCall, TurnRecord
from .stats import wilson_interval


class Change(StrEnum):
    """How one eval moved from the first run (before) to the second (after)."""

    REGRESSION = "regression"  # passed before, failed or errored after
    FIX = "fix"  # failed or errored before, passed after
    STILL_FAILING = "still_failing"  # did not pass in either
    UNCHANGED = "unchanged"  # passed in both
    ADDED = "added"  # only in the second run
    REMOVED = "removed"  # only in the first run
    INCOMPLETE = "incomplete"  # cancelled, still running or skipped in either: nothing to say yet


@dataclass(frozen=True)
class Side:
    """One eval in one run: its verdict, score, cost and, when iterated, its pass rate."""

    status: Status
    score: float | None  # the eval's score; iterated: the mean of its graded iterations' scores
    cost: float
    turns: int
    passed_on_turn: int | None = None
    iterations: int = 1
    passes: int = 0  # iterations that passed, among the graded ones
    graded: int = 0  # iterations that passed or failed
    pass_rate_low: float | None = None  # Wilson 95% interval of the pass rate; None when not iterated
    pass_rate_high: float | None = None
    overridden: int = 0  # iterations whose verdict a reviewer overturned (engine.overrides)
    # The tools the model called: every call's name in the order made; iterated, each tool once, sorted (the
    # iterations' orders are not one sequence).
    tool_calls: tuple[str, ...] = ()

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.graded if self.graded else None


@dataclass(frozen=True)
class ToolChange:
    """How an eval's tool calls differ between the two runs: tools called in one run only, or the same tools
    called in another order or number."""

    only_before: list[str]
    only_after: list[str]
    sequence_changed: bool

    @property
    def words(self) -> str:
        """The difference as the second run reads against the first: "now calls book, no longer search",
        "now calls book", "no longer calls search", "calls its tools in another order or number"."""
        added, dropped = ", ".join(self.only_after), ", ".join(self.only_before)
        if added and dropped:
            return f"now calls {added}, no longer {dropped}"
        if added:
            return f"now calls {added}"
        if dropped:
            return f"no longer calls {dropped}"
        return "calls its tools in another order or number"


def tool_change(before: Sequence[str], after: Sequence[str], *, ordered: bool = True) -> ToolChange | None:
    """The difference between two runs' tool calls of one eval (names in the order made); None when they are
    the same. `ordered` False: each is a set of tools (iterated evals), so only which tools counts."""
    a, b = list(dict.fromkeys(before)), list(dict.fromkeys(after))
    only_before = [name for name in a if name not in b]
    only_after = [name for name in b if name not in a]
    sequence_changed = ordered and list(before) != list(after)
    if not only_before and not only_after and not sequence_changed:
        return None
    return ToolChange(only_before, only_after, sequence_changed)


@dataclass(frozen=True)
class EvalDiff:
    id: str
    change: Change
    before: Side | None
    after: Side | None
    prompt: str = ""

    @property
    def tool_change(self) -> ToolChange | None:
        """How the tool calls differ, when the eval is in both runs; None when they do not."""
        if self.before is None or self.after is None:
            return None
        return tool_change(self.before.tool_calls, self.after.tool_calls, ordered=not self.iterated)

    @property
    def score_delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        if self.before.score is None or self.after.score is None:
            return None
        return self.after.score - self.before.score

    @property
    def cost_delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after.cost - self.before.cost

    @property
    def iterated(self) -> bool:
        return any(side is not None and side.iterations > 1 for side in (self.before, self.after))

    @property
    def rates_differ(self) -> bool:
        """Iterated: the two pass rates' 95% intervals do not overlap, so the change is unlikely to be chance."""
        before, after = self.before, self.after
        if not self.iterated or before is None or after is None or before.pass_rate_low is None:
            return False
        if after.pass_rate_low is None:
            return False
        return before.pass_rate_high < after.pass_rate_low or after.pass_rate_high < before.pass_rate_low


@dataclass(frozen=True)
class Comparison:
    rows: list[EvalDiff]
    counts: dict[Change, int]
    score_before: float | None  # mean eval score over the evals both runs graded
    score_after: float | None
    cost_before: float  # the whole run's cost
    cost_after: float

    @property
    def score_delta(self) -> float | None:
        if self.score_before is None or self.score_after is None:
            return None
        return self.score_after - self.score_before

    @property
    def cost_delta(self) -> float:
        return self.cost_after - self.cost_before

    @property
    def regressions(self) -> list[EvalDiff]:
        return [row for row in self.rows if row.change == Change.REGRESSION]


# Rows in the order a reviewer reads them: what broke first, then what was fixed, then the rest.
ORDER = list(Change)


def compare_runs(before: Iterable[EvalResult], after: Iterable[EvalResult]) -> Comparison:
    """Compare two runs' evals (every iteration of every eval, as RunReport.evals holds them)."""
    first, second = _by_id(before), _by_id(after)
    ids = list(first) + [key for key in second if key not in first]
    rows = []
    for key in ids:
        a, b = first.get(key), second.get(key)
        side_a, side_b = (_side(a) if a else None), (_side(b) if b else None)
        prompt = (b or a)[0].prompt
        rows.append(EvalDiff(key, _change(side_a, side_b), side_a, side_b, prompt))
    rows.sort(key=lambda row: ORDER.index(row.change))  # stable: suite order within each kind of change
    counts = {change: 0 for change in Change}
    for row in rows:
        counts[row.change] += 1
    both = [row for row in rows if row.score_delta is not None]
    return Comparison(
        rows=rows,
        counts=counts,
        score_before=_mean([row.before.score for row in both]),
        score_after=_mean([row.after.score for row in both]),
        cost_before=sum(side.cost for row in rows if (side := row.before) is not None),
        cost_after=sum(side.cost for row in rows if (side := row.after) is not None),
    )


def _by_id(results: Iterable[EvalResult]) -> dict[str, list[EvalResult]]:
    grouped: dict[str, list[EvalResult]] = {}
    for result in results:
        grouped.setdefault(result.id, []).append(result)
    for group in grouped.values():
        group.sort(key=lambda result: result.iteration)
    return grouped


def tool_names(result) -> tuple[str, ...]:
    """The names of an eval's tool calls, in the order made: a stored summary carries them (`tool_names`), an
    EvalResult has them in its turns."""
    stored = getattr(result, "tool_names", None)
    if stored is not None:
        return tuple(stored)
    return tuple(call.name for turn in result.turns for call in turn.tool_calls)


def _side(results: Sequence[EvalResult]) -> Side:
    cost = sum(result.totals.cost for result in results)
    turns = sum(result.totals.turns for result in results)
    overridden = sum(1 for result in results if result.original is not None)
    if len(results) == 1:
        (result,) = results
        graded = result.status in GRADED
        return Side(
            status=Status(result.status),
            score=result.score,
            cost=cost,
            turns=turns,
            passed_on_turn=result.passed_on_turn,
            passes=int(result.status == Status.PASSED),
            graded=int(graded),
            overridden=overridden,
            tool_calls=tool_names(result),
        )
    graded = [result for result in results if result.status in GRADED]
    passes = sum(1 for result in graded if result.status == Status.PASSED)
    low, high = wilson_interval(passes, len(graded))
    scores = [result.score for result in graded if result.score is not None]
    return Side(
        status=_iterated_status(results, passes, len(graded)),
        score=_mean(scores),
        cost=cost,
        turns=turns,
        iterations=len(results),
        passes=passes,
        graded=len(graded),
        pass_rate_low=low,
        pass_rate_high=high,
        overridden=overridden,
        tool_calls=tuple(sorted({name for result in results for name in tool_names(result)})),
    )


def _iterated_status(results: Sequence[EvalResult], passes: int, graded: int) -> Status:
    """An iterated eval's verdict from its iterations alone. The pass-rate threshold lives in the suite, which
    two runs may not share; a majority (at least half, the default threshold 0.5) decides here."""
    statuses = {result.status for result in results}
    if statuses & {Status.QUEUED, Status.RUNNING}:
        return Status.RUNNING
    if statuses == {Status.SKIPPED}:  # a re-grade's eval that its source never played
        return Status.SKIPPED
    if not graded:
        return Status.ERROR if Status.ERROR in statuses else Status.CANCELLED
    return Status.PASSED if passes / graded >= 0.5 else Status.FAILED


def _change(before: Side | None, after: Side | None) -> Change:
    if before is None:
        return Change.ADDED
    if after is None:
        return Change.REMOVED
    # A re-grade's skipped eval was never graded: it neither regressed nor was fixed.
    unsettled = (Status.QUEUED, Status.RUNNING, Status.CANCELLED, Status.SKIPPED)
    if before.status in unsettled or after.status in unsettled:
        return Change.INCOMPLETE
    was, now = before.status == Status.PASSED, after.status == Status.PASSED
    if was and now:
        return Change.UNCHANGED
    if was:
        return Change.REGRESSION
    if now:
        return Change.FIX
    return Change.STILL_FAILING


def _mean(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


# --- one eval, turn by turn --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckFlip:
    label: str
    before: bool | None  # None: the check was not on that side's turn
    after: bool | None


@dataclass(frozen=True)
class CallPair:
    """One tool call lined up with its counterpart in the other conversation's turn (None: no counterpart, the
    sequences differ there)."""

    before: ToolCall | None
    after: ToolCall | None

    @property
    def only(self) -> str | None:
        if self.before is None:
            return "after"
        if self.after is None:
            return "before"
        return None

    @property
    def arguments_changed(self) -> bool:
        if self.before is None or self.after is None:
            return False
        return _arguments(self.before) != _arguments(self.after)

    @property
    def result_changed(self) -> bool:
        if self.before is None or self.after is None:
            return False
        return self.before.result != self.after.result

    @property
    def changed(self) -> bool:
        return self.only is not None or self.arguments_changed or self.result_changed


def _arguments(call: ToolCall):
    return call.arguments if call.arguments is not None else call.raw_arguments


def line_up_calls(before: Sequence[ToolCall], after: Sequence[ToolCall]) -> list[CallPair]:
    """Two turns' tool calls lined up by name, in order (difflib over the names), so a call added, dropped or
    moved shows alone and the calls both made face each other."""
    pairs: list[CallPair] = []
    names_a, names_b = [call.name for call in before], [call.name for call in after]
    matcher = difflib.SequenceMatcher(None, names_a, names_b, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            pairs += [CallPair(before[a1 + i], after[b1 + i]) for i in range(a2 - a1)]
            continue
        pairs += [CallPair(call, None) for call in before[a1:a2]]
        pairs += [CallPair(None, call) for call in after[b1:b2]]
    return pairs


@dataclass(frozen=True)
class TurnPair:
    turn: int
    before: TurnRecord | None
    after: TurnRecord | None
    prompt_changed: bool
    reply_changed: bool
    branch_changed: bool  # the two sides sent different follow-ups here (their suite nodes differ)
    flips: list[CheckFlip] = field(default_factory=list)  # checks whose outcome differs
    calls: list[CallPair] = field(default_factory=list)  # both sides' tool calls, lined up

    @property
    def tools_changed(self) -> bool:
        return any(pair.changed for pair in self.calls)

    @property
    def only(self) -> str | None:
        """ "before" or "after" when only one conversation reached this turn."""
        if self.before is None:
            return "after"
        if self.after is None:
            return "before"
        return None


@dataclass(frozen=True)
class SideBySide:
    pairs: list[TurnPair]
    diverged_at: int | None  # the first turn whose prompt or follow-up branch differs; None if none does

    @property
    def changed_replies(self) -> int:
        return sum(1 for pair in self.pairs if pair.reply_changed)


def side_by_side(before: EvalResult, after: EvalResult) -> SideBySide:
    """Line up two conversations of one eval by turn: what changed in each reply, which checks flipped, and
    where the follow-ups parted (a tree whose turn 1 failed in one run and passed in the other)."""
    pairs, diverged = [], None
    for number in range(1, max(len(before.turns), len(after.turns)) + 1):
        a = before.turns[number - 1] if number <= len(before.turns) else None
        b = after.turns[number - 1] if number <= len(after.turns) else None
        if a is None or b is None:
            calls = line_up_calls(a.tool_calls if a else [], b.tool_calls if b else [])
            pairs.append(TurnPair(number, a, b, True, True, False, calls=calls))
            continue
        branch = a.node != b.node
        prompt_changed = a.prompt != b.prompt
        if diverged is None and (branch or prompt_changed):
            diverged = number
        pairs.append(
            TurnPair(
                turn=number,
                before=a,
                after=b,
                prompt_changed=prompt_changed,
                reply_changed=a.response != b.response,
                branch_changed=branch,
                flips=_flips(a.checks, b.checks),
                calls=line_up_calls(a.tool_calls, b.tool_calls),
            )
        )
    return SideBySide(pairs, diverged)


def _flips(before: Sequence[CheckResult], after: Sequence[CheckResult]) -> list[CheckFlip]:
    """Checks matched by label (then by order among equal labels) whose outcomes differ."""

    def keyed(results: Sequence[CheckResult]) -> dict[tuple[str, int], bool]:
        seen: dict[str, int] = {}
        out = {}
        for result in results:
            n = seen.get(result.label, 0)
            seen[result.label] = n + 1
            out[(result.label, n)] = result.passed
        return out

    a, b = keyed(before), keyed(after)
    keys = list(a) + [key for key in b if key not in a]
    return [
        CheckFlip(label, a.get((label, n)), b.get((label, n)))
        for label, n in keys
        if a.get((label, n)) != b.get((label, n))
    ]
