"""Repeated evals on the pages: each eval's strip of iterations, its statistics and verdict against its
pass-rate threshold, and a transcript's switcher between its eval's iterations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.outcomes import GRADED
from engine.stats import IteratedResult, pass_rate_status
from engine.text import plural

from ..models import Conversation, Status
from .marks import symbol

# An eval may run many times; its strip shows this many marks and counts the rest.
ITERATION_MARKS_MAX = 100


@dataclass(frozen=True)
class IterationMark:
    """One iteration of a repeated eval in its strip, linking to its transcript."""

    iteration: int  # as stored and in ?iteration=, from 0; people read `number`
    status: str
    url: str
    title: str
    representative: bool = False
    current: bool = False

    @property
    def number(self) -> int:
        return self.iteration + 1

    @property
    def symbol(self) -> str:
        return symbol(self.status)


def iteration_mark(
    conversation: Conversation, url: str, *, representative: bool = False, current: bool = False
) -> IterationMark:
    status = conversation.status
    parts = [status]
    if status in GRADED and conversation.score is not None:
        parts.append(f"score {conversation.score:.2f}")
    if conversation.turn_count:
        parts.append(plural(conversation.turn_count, "turn"))
    if conversation.termination and status != Status.ERROR:
        parts.append(conversation.termination)
    title = f"Iteration {conversation.iteration + 1}: {', '.join(parts)}"
    if representative:
        title += " — representative (score closest to the mean)"
    return IterationMark(conversation.iteration, status, url, title, representative, current)


def _percent(value: float) -> str:
    return f"{value:.0%}"


@dataclass
class IteratedRow:
    """A repeated eval on the run page: its strip, its statistics over the iterations finished so far, and
    its verdict against its pass-rate threshold."""

    index: int
    eval_id: str
    marks: list[IterationMark]
    total: int
    result: IteratedResult | None  # None until an iteration has finished
    errors: int = 0
    cancelled: int = 0
    unfinished: int = 0
    representative: IterationMark | None = None  # the iteration whose score is closest to the mean
    more: int = 0  # iterations past the strip's ITERATION_MARKS_MAX
    running: int = 0

    def __post_init__(self) -> None:
        self.marks = self.marks[:ITERATION_MARKS_MAX]

    @property
    def stats(self):
        return self.result.stats if self.result else None

    @property
    def done(self) -> int:
        return self.total - self.unfinished

    @property
    def flaky(self) -> bool:
        return bool(self.stats and self.stats.flaky)

    @property
    def status(self) -> str:
        if self.result is None:
            return Status.RUNNING if self.running else Status.QUEUED
        return self.result.status

    @property
    def so_far(self) -> bool:
        return self.result is not None and self.unfinished > 0

    @property
    def graded(self) -> int:
        return self.stats.iterations - self.stats.errors if self.stats else 0

    @property
    def pass_rate(self) -> str:
        return _percent(self.stats.pass_rate) if self.graded else "—"

    @property
    def interval(self) -> str:
        return (
            f"{_percent(self.stats.pass_rate_low)}–{_percent(self.stats.pass_rate_high)}"
            if self.graded
            else ""
        )

    @property
    def threshold(self) -> str:
        return _percent(self.stats.pass_rate_threshold) if self.stats else ""

    @property
    def verdict_note(self) -> str:
        if self.result is None:
            return "waiting for the first iteration"
        if not self.graded:
            if self.errors and self.cancelled:
                return f"{plural(self.errors, 'iteration')} errored, {self.cancelled} cancelled"
            if self.errors:
                return "every iteration errored"
            return (
                "cancelled before any iteration was graded" if self.cancelled else "no iteration was graded"
            )
        sign = "≥" if self.stats.pass_rate >= self.stats.pass_rate_threshold else "<"
        return f"{self.pass_rate} {sign} {self.threshold} needed"

    @property
    def mean(self) -> str:
        stats = self.stats
        return f"{stats.mean:.2f} ± {stats.std_dev:.2f}" if stats and stats.mean is not None else "—"

    @property
    def score_range(self) -> str:
        stats = self.stats
        return f"min {stats.min:.2f} · max {stats.max:.2f}" if stats and stats.min is not None else ""

    @property
    def avg_turns(self) -> str:
        return f"{self.stats.avg_turns:.1f}" if self.stats else "—"

    @property
    def turn_range(self) -> str:
        return f"{self.stats.min_turns}–{self.stats.max_turns}" if self.stats else ""

    @property
    def terminations(self) -> list[tuple[str, int]]:
        counts = self.stats.termination_counts if self.stats else {}
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def iteration_groups(conversations: Iterable[Conversation]) -> dict[int, list[Conversation]]:
    """The run's repeated evals: eval index -> its conversations in iteration order (evals run once left out)."""
    groups: dict[int, list[Conversation]] = defaultdict(list)
    for conversation in conversations:
        groups[conversation.index].append(conversation)
    return {
        index: sorted(group, key=lambda c: c.iteration)
        for index, group in sorted(groups.items())
        if len(group) > 1
    }


def repeated_status(outcome: dict[str, int], threshold: float) -> str:
    """A repeated eval's verdict from its iterations' counts (runs.selectors.repeated_outcomes), by the
    engine's rule (engine.stats.pass_rate_status); running while none is graded and some are still going."""
    graded = outcome[Status.PASSED] + outcome[Status.FAILED]
    if not graded and outcome["unfinished"]:
        return Status.RUNNING
    return pass_rate_status(outcome[Status.PASSED], graded, bool(outcome[Status.ERROR]), threshold)


def iterated_rows(
    strips: list,
    results: dict[int, IteratedResult],
    outcomes: dict[int, dict[str, int]],
    url: Callable[[int, int], str],
) -> list[IteratedRow]:
    """One row per repeated eval, in suite order: its strip (`strips`: its first ITERATION_MARKS_MAX
    iterations and its representative one, from runs.selectors.strips), its statistics so far (`results`, by
    eval index, from runs.selectors.repeated_so_far) and its iterations' counts (`outcomes`, from
    runs.selectors.repeated_outcomes); `url(index, iteration)` links a mark to its transcript."""
    groups: dict[int, list] = defaultdict(list)
    for conversation in strips:
        groups[conversation.index].append(conversation)
    rows = []
    for index, group in sorted(groups.items()):
        result = results.get(index)
        counts = outcomes[index]
        representative = result.stats.representative if result else None
        shown = [c for n, c in enumerate(group) if n < ITERATION_MARKS_MAX or c.iteration == representative]
        marks = [
            iteration_mark(c, url(c.index, c.iteration), representative=c.iteration == representative)
            for c in shown
        ]
        rows.append(
            IteratedRow(
                index=index,
                eval_id=group[0].eval_id,
                marks=marks,
                total=counts["total"],
                more=max(0, counts["total"] - ITERATION_MARKS_MAX),
                result=result,
                errors=counts[Status.ERROR],
                cancelled=counts[Status.CANCELLED],
                unfinished=counts["unfinished"],
                running=counts[Status.RUNNING],
                representative=next((mark for mark in marks if mark.representative), None),
            )
        )
    return rows


def iteration_switcher(
    siblings: list[Conversation],
    results: dict[int, IteratedResult],
    current: int,
    url: Callable[[int, int], str],
) -> dict | None:
    """A transcript's way to its eval's other iterations: "iteration 3 of 5", previous and next, and the
    strip with this iteration and the representative one marked. None when the eval ran once. `results`:
    runs.selectors.iterated_so_far over the siblings."""
    groups = iteration_groups(siblings)
    if not groups:
        return None
    ((index, group),) = groups.items()
    result = results.get(index)
    representative = result.stats.representative if result else None
    marks = [
        iteration_mark(
            c,
            url(c.index, c.iteration),
            representative=c.iteration == representative,
            current=c.iteration == current,
        )
        for c in group
    ]
    here = next((position for position, mark in enumerate(marks) if mark.current), 0)
    shown = max(0, min(here - ITERATION_MARKS_MAX // 2, len(marks) - ITERATION_MARKS_MAX))
    return {
        "number": marks[here].number,
        "count": len(marks),
        "previous": marks[here - 1].url if here > 0 else None,
        "next": marks[here + 1].url if here + 1 < len(marks) else None,
        "marks": marks[shown : shown + ITERATION_MARKS_MAX],  # a window around this iteration
        "representative": next((mark for mark in marks if mark.representative), None),
        "flaky": bool(result and result.stats.flaky),
    }
