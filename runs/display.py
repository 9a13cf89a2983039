"""How the run pages show what the engine recorded: ✓✗ strips of scripted conversations, suite gates, repeated
evals' iteration strips and statistics, given histories with their embedded files, the system message, and a
conversation as `[Role]:` text. Nothing here works out again what is stored: a turn's pass, a conversation's
verdict, its system message and history are read as stored.

Plain functions over rows and records, and over what runs.selectors worked out from them; the views choose
what to query and the templates lay it out.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.clients import RATE_LIMIT_WAIT, UNREADABLE_REPLY
from engine.history import INSTRUCTIONS_SUFFIX
from engine.outcomes import GRADED, TerminationKind
from engine.overrides import targets as review_targets
from engine.results import GateResult, TurnRecord
from engine.schema import Style
from engine.stats import IteratedResult, pass_rate_status
from engine.text import plural
from engine.transcript import format_transcript, message_text

from .models import Conversation, Run, Status, Turn

GRADED_STYLES = (Style.SCRIPTED, Style.TURNS)
STRIP_MAX_MARKS = 24


# The one mapping from a status to its symbol: iteration strips, turn strips, a transcript's verdict, gates and
# check badges (through the `symbol` template filter, runs/templatetags/runs_display.py). An error or an
# unfinished iteration must not read as a failure.
STATUS_SYMBOLS = {
    "passed": "✓",
    "failed": "✗",
    "error": "!",
    "cancelled": "–",
    "running": "●",
    "queued": "○",
}


def symbol(status: str) -> str:
    return STATUS_SYMBOLS.get(status, "?")


@dataclass(frozen=True)
class Mark:
    """One graded unit of a scripted conversation, as ✓ or ✗ in its strip."""

    turn: int
    passed: bool
    title: str

    @property
    def symbol(self) -> str:
        return symbol("passed" if self.passed else "failed")


def turn_marks(turns: Iterable[Turn], reviewed: dict | None = None) -> list[Mark]:
    """One mark per graded turn, in order, passed or failed as the engine stored it (Turn.passed: its grade
    against the ground truth and its checks together), or as a reviewer's overrides made it (`reviewed`:
    Conversation.original's reviewed_turns, {"2": true}). Ungraded turns (passed is None) have none."""
    reviewed = reviewed or {}
    marks = []
    for turn in turns:
        if turn.passed is None:
            continue
        record = turn.record
        passed = reviewed.get(str(record["turn"]), turn.passed)
        grade, checks = record.get("grade"), record.get("checks") or []
        parts = [f"{grade.get('grader') or 'grade'} {grade['score']:.2f}"] if grade else []
        if checks:
            parts.append(f"{sum(check['passed'] for check in checks)}/{plural(len(checks), 'check')}")
        title = f"Turn {record['turn']} {'passed' if passed else 'failed'}: {', '.join(parts)}"
        if str(record["turn"]) in reviewed:
            title += " (overridden by a reviewer)"
        marks.append(Mark(record["turn"], passed, title))
    return marks


def strip(conversation: Conversation, marks: list[Mark]) -> dict | None:
    """'2/3 ✓✓✗': the stored count once the conversation is over, the marks so far while it runs."""
    if conversation.style not in GRADED_STYLES:
        return None
    if conversation.turns_total == 0 and not marks:
        return None  # graded by its named graders alone: their columns say it
    if conversation.turns_total is not None and (conversation.turns_total or not marks):
        passed, total = conversation.turns_passed or 0, conversation.turns_total
    elif marks:
        passed, total = sum(mark.passed for mark in marks), len(marks)
    else:
        return None
    return {"passed": passed, "total": total, "marks": marks}


def row_key(conversation: Conversation, columns: tuple) -> str:
    """Everything a row of the run's table is drawn from, as one digest: the row's HTML is cached under it
    (the `rows` cache; runs.views.run._cached_rows), so a row is rendered again only once something it shows
    has changed. The digest covers every loaded field and every value the view attached (its link, waiting
    note, grader cells), not a list of the fields the template happens to read today, so a new column cannot
    be served stale; `columns` are the table's own settings (which columns it has)."""
    # In the order the fields were loaded and the values attached, the same on every request (not sorted: it
    # costs as much again, ~30 µs a row).
    state = [(name, value) for name, value in vars(conversation).items() if not name.startswith("_")]
    return hashlib.blake2b(repr((state, columns)).encode(), digest_size=16).hexdigest()


GATE_OPS = {">=": "≥", "<=": "≤", "==": "="}


def gates(results: list[GateResult], depth: int = 0) -> list[dict]:
    """The suite's gates as the run page shows them (runs.selectors.gate_results works them out). A logical
    gate's members follow it, one level deeper; `top` marks the gates the run's verdict counts."""
    rows = []
    for gate in results:
        logical = gate.kind in ("logical_and", "logical_or")
        rows.append(
            {
                "label": ("all of" if gate.kind == "logical_and" else "any of") if logical else gate.label,
                "text": gate.label
                if logical
                else f"{gate.metric} {GATE_OPS.get(gate.op, gate.op)} {gate.value:g}",
                "actual": "" if logical else ("n/a" if gate.actual is None else f"{round(gate.actual, 3):g}"),
                "logical": logical,
                "passed": gate.passed,
                "status": "passed" if gate.passed else "failed",
                "depth": depth,
                "top": depth == 0,
            }
        )
        rows += gates(gate.children, depth + 1)
    return rows


def grader_cells(conversation, names: list[str]) -> list[dict | None]:
    """One cell per grader column: its score and whether it passed; None when it did not grade this eval."""
    found = {item["name"]: item for item in conversation.graders or ()}
    cells = []
    for name in names:
        item = found.get(name)
        if item is None or item.get("score") is None:
            cells.append(None)
        else:
            cells.append({"score": f"{item['score']:.2f}", "passed": item.get("passed"),
                          "title": f"{name}: {item['score']:.2f}, needs {item.get('threshold', 1):g}"})  # fmt: skip
    return cells


def in_flight(progress: dict) -> int:
    """Conversations still playing or about to; after a cancel they finish their current turn first."""
    return progress["counts"][Status.QUEUED] + progress["counts"][Status.RUNNING]


def run_state(run: Run, progress: dict, gate_rows: list[dict], eval_count: int, failed: int) -> dict:
    """The run header's status badge and the reason beside it: "cancelling" while a cancelled run's
    conversations finish their turn, and why a run failed, errored or was cancelled, in words.

    From what the page has already loaded: the gates over the evals' scores, and how many evals there are and
    failed (an eval run several times counts once, by its pass rate), the same inputs
    runs.scheduling.finalize decided on.
    """
    counts = progress["counts"]
    finishing = in_flight(progress)
    if run.status == Status.CANCELLED and finishing:
        return {
            "label": "cancelling",
            "tone": Status.CANCELLED,
            "live": True,
            "reason": f"{finishing} finishing",
        }
    evals = plural(eval_count, "eval")
    reasons = []
    if run.status == Status.FAILED:
        failing = [gate for gate in gate_rows if gate.get("top", True) and not gate["passed"]]
        reasons = [
            f"gate {gate['text']} failed" + (f": {gate['actual']}" if gate["actual"] else "")
            for gate in failing
        ]
        if not failing and failed:
            reasons.append(f"{failed} of {evals} failed")
    elif run.status == Status.ERROR:
        if counts[Status.ERROR]:
            reasons.append(f"{plural(counts[Status.ERROR], 'conversation')} errored")
        if failed:
            reasons.append(f"{failed} of {evals} failed")
    elif run.status == Status.CANCELLED:
        finished = progress["done"] - counts[Status.CANCELLED]
        reasons.append(f"cancelled with {finished} of {plural(progress['total'], 'conversation')} finished")
    elif run.status == Status.PASSED and gate_rows and failed:
        reasons.append(f"every gate holds; {failed} of {evals} failed")
    return {"label": run.status, "tone": run.status, "live": False, "reason": "; ".join(reasons)}


# --- Repeated evals ------------------------------------------------------------------------------------------

# An eval may run up to 1,000 times; its strip shows this many marks and counts the rest.
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


STYLE_LABELS = {style: style.label for style in Style}
# An attached file embedded in a history message: engine.history.file_block's header line.
FILE_BLOCK = re.compile(r"^=== (?P<name>[^\n]+) ===$", re.MULTILINE)
ROLE_CLASSES = ("system", "user", "assistant", "tool")


def system_message(conversation: Conversation) -> dict | None:
    """The system message the model saw first, as stored when the run was launched: the suite's `system` and
    any `*.instructions.md` guidelines the eval's history attached, each in a file block named after it."""
    if not conversation.system:
        return None
    guidelines = [
        match["name"]
        for match in FILE_BLOCK.finditer(conversation.system)
        if match["name"].endswith(INSTRUCTIONS_SUFFIX)
    ]
    return {"segments": message_segments(conversation.system), "guidelines": guidelines}


def message_segments(text: str) -> list[dict]:
    """A given message split around embedded file blocks, so files show as code; the text is unchanged."""
    starts = [match.start() for match in FILE_BLOCK.finditer(text)]
    if not starts:
        return [{"file": False, "text": text}]
    segments = [{"file": False, "text": text[: starts[0]].rstrip("\n")}] if starts[0] else []
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        segments.append({"file": True, "text": text[begin:end].rstrip("\n")})
    return [segment for segment in segments if segment["text"]]


def given_history(history: list[dict]) -> list[dict]:
    """The given history as the transcript shows it: every role, marked as not generated in this run."""
    given = []
    for message in history:
        role = str(message.get("role") or "user")
        given.append(
            {
                "role": role,
                "side": role if role in ROLE_CLASSES else "other",
                "segments": message_segments(message_text(message)),
            }
        )
    return given


def ending(conversation: Conversation, turns: list[TurnRecord]) -> str | None:
    """Why a simulated conversation ended: condition met (which), max turns, inputs exhausted. While it runs,
    the last stored turn says so before the conversation row does."""
    if conversation.style != Style.SIMULATED or conversation.status == Status.ERROR:
        return None
    if conversation.termination:
        return None if conversation.termination_kind == TerminationKind.ERROR else conversation.termination
    return turns[-1].termination if turns else None


def spend(turns: list[TurnRecord]) -> dict:
    """A conversation's cost by who spent it: the agent, its judges, the simulated user (Conversation.cost is
    their sum)."""
    return {
        "agent": sum(turn.cost for turn in turns),
        "judge": sum(turn.judge_cost for turn in turns),
        "user": sum(turn.user_cost for turn in turns),
        "user_tokens": sum(turn.user_usage.total_tokens for turn in turns),
    }


def transcript_text(history: list[dict], turns: list[TurnRecord], system: str = "") -> str:
    """The whole conversation in the `[Role]:` format judges read: the system message the model saw first
    (the suite's system prompt and any `*.instructions.md` guidelines, as stored at launch), the given
    history, then the live turns. Without the system message a copied transcript hid what steered it."""
    messages = [{"role": "system", "content": system}] if system else []
    messages += history
    for turn in turns:
        if turn.prompt:  # "" is the model replying to the given history: no user message was sent
            messages.append({"role": "user", "content": turn.prompt})
        messages.append({"role": "assistant", "content": turn.response})
    return format_transcript(messages)


def waiting(reason: str, until, now, count: int | None = None) -> dict | None:
    """A model call waiting to retry, as the run page and the transcript say it: "waiting for rate limit
    (retry in 8 s)", "endpoint unavailable (HTTP 503), retry in 4 s". `count`: how many conversations wait
    (the progress card), None for one conversation. None once the wait is over."""
    if until is None or until <= now:
        return None
    seconds = math.ceil((until - now).total_seconds())
    if count is not None and reason.startswith(UNREADABLE_REPLY):
        reason = UNREADABLE_REPLY  # how many times is one conversation's count, not the card's
    rate_limited = reason == RATE_LIMIT_WAIT
    lead = reason or "waiting to retry"
    if count is not None:
        lead = f"{plural(count, 'conversation')} {lead if rate_limited else 'waiting: ' + lead}"
    prefix = "next retry in" if count is not None and count > 1 else "retry in"
    countdown = f"{prefix} {seconds} s"
    return {
        "lead": lead,
        "prefix": prefix,
        "seconds": seconds,
        "until": until.isoformat(),
        "parenthesised": rate_limited,
        "text": f"{lead} ({countdown})" if rate_limited else f"{lead}, {countdown}",
    }


def calling(slow: dict | None, now) -> dict | None:
    """Model calls out longer than their run's usual latency, as the progress card says it: "3 calls waiting
    on the model for 45 s" (the longest-out call's time; app.js counts it on). None when there are none."""
    if not slow or not slow["count"] or slow["since"] is None:
        return None
    seconds = max(0, math.floor((now - slow["since"]).total_seconds()))
    lead = f"{plural(slow['count'], 'call')} waiting on the model for"
    return {
        "lead": lead,
        "seconds": seconds,
        "since": slow["since"].isoformat(),
        "text": f"{lead} {seconds} s",
    }


def review_rows(turns: list[TurnRecord], overrides: list, can_override: bool) -> dict[int, list[dict]]:
    # `overrides`: runs.models.Override rows (their ids withdraw them).
    """Per stored turn, the outcomes a reviewer may overturn and the overrides already given, as the transcript
    lists them under a turn's checks: {turn: [{target, label, passed (as the run gave it), override,
    flip_to}]}. Without the right to override, only the overridden outcomes are listed."""
    given = {(item.turn, item.target): item for item in overrides}
    rows: dict[int, list[dict]] = {}
    for turn in turns:
        for target in review_targets(turn):
            override = given.get((turn.turn, target.key))
            if override is None and not can_override:
                continue
            own = target.passed  # `turns` are as stored: the run's own outcomes
            rows.setdefault(turn.turn, []).append(
                {
                    "target": target.key,
                    "label": target.label,
                    "passed": own,
                    "override": override,
                    "override_id": override.pk if override is not None else None,
                    "flip_to": not own,
                    "by": override.created_by.get_username() if override is not None else "",
                }
            )
    return rows
