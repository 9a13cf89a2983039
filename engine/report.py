"""The terminal report, in vibecheck's per-turn shape.

Eval 1: What is 15 * 7?
  Turn 1:
    Prompt: What is 15 * 7?
    Response: 100
    ❌ FAIL match "*105*"
  Turn 2:
    ...
  Overall: ✅ PASS (succeeded on turn 2)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from enum import StrEnum

from .clients.settings import briefly
from .cost import no_prices, spent
from .outcomes import NOT_STARTED, Status
from .results import (
    DEFAULT_ENDPOINT,
    CheckResult,
    ConditionResult,
    EvalResult,
    RunReport,
    RunTotals,
    ToolCall,
    TurnGrade,
    TurnRecord,
)
from .schema import Style
from .text import against, plural, terminal_safe

PASS = "✅ PASS"
FAIL = "❌ FAIL"
ERROR = "💥 ERROR"
STOPPED = "⏹ STOPPED"
SHOWN_CHARS = 120  # of a tool call's arguments or result: one line each, the rest is in --json
NAMELESS = "(no function name)"  # a call that named none: the model's mistake


SHOWN_TEXT_CHARS = 2000  # of a prompt or a reply in the terminal report; the whole is in --json


def _indent(text: str, prefix: str) -> str:
    if len(text) > SHOWN_TEXT_CHARS:
        text = f"{text[:SHOWN_TEXT_CHARS]}… ({len(text) - SHOWN_TEXT_CHARS:,} more characters in --json)"
    lines = text.splitlines() or [""]
    return lines[0] + "".join(f"\n{prefix}{line}" for line in lines[1:])


def how_read(result: CheckResult | ConditionResult | TurnGrade) -> str:
    """How a judge's answer was read, after its reason; "" when it was the JSON asked for, at once."""
    parts = [f"read from `{result.read_from}`"] if result.read_from else []
    if result.first_answer is not None:
        parts.append("asked again: its first answer could not be read")
    return "".join(f" — {part}" for part in parts)


def _check_lines(result: CheckResult, prefix: str) -> list[str]:
    mark = PASS if result.passed else FAIL
    lines = [f"{prefix}{mark} {result.label} — {result.reason}{how_read(result)}"]
    for child in result.children:
        lines += _check_lines(child, prefix + "  ")
    return lines


def _condition_brief(result: ConditionResult) -> str:
    """A member of all/any/not inline: its outcome without the reason; its own members in brackets."""
    if result.met is None or not result.children:
        return f"{result.label} → {result.answer}"
    return f"{result.label} → {result.outcome} [{'; '.join(map(_condition_brief, result.children))}]"


def _condition_line(result: ConditionResult) -> str:
    """The stop condition as evaluated after one reply, on one line; a judge's reason after its numbers."""
    line = f"Stop when: {result.label} → {result.outcome}"
    if result.children:
        line += f" [{'; '.join(map(_condition_brief, result.children))}]"
    elif result.threshold is not None and result.reason:
        line += f" — {result.reason}{how_read(result)}"
    return line + (" — stopped" if result.met else "")


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _call_line(call: ToolCall, carried_out: bool = True) -> str:
    """`→ name {arguments} → result`; a call that failed shows why, marked as the model's mistake or the
    tool's error; one of a round that did not finish says it was not carried out."""
    arguments = (
        call.raw_arguments if call.arguments is None else json.dumps(call.arguments, ensure_ascii=False)
    )
    line = f"→ {call.name or NAMELESS} {_one_line(arguments) or '{}'}"
    if not carried_out:
        return f"{line} (not carried out)"
    if call.error is None:
        return f"{line} → {_one_line(call.result)}"
    return f"{line} ⚠ {'mistake' if call.mistake else 'error'}: {_one_line(call.error)}"


def _tool_lines(turn: TurnRecord, prefix: str) -> list[str]:
    """The turn's tool calls, in the order they ran; with several rounds, each call says its round."""
    if not turn.tool_calls:
        return []
    rounds = len(turn.tool_rounds)
    lines = [f"{prefix}Tool calls: {len(turn.tool_calls)} in {plural(rounds, 'round')}"]
    for number, round_ in enumerate(turn.tool_rounds, start=1):
        lines += [
            f"{prefix}  {f'{number} ' if rounds > 1 else ''}{_call_line(call, round_.incomplete is None)}"
            for call in round_.calls
        ]
    return lines


def overall(result: EvalResult) -> str:
    if result.status == Status.PASSED:
        return _marked(PASS, how_passed(result))
    if result.status == Status.FAILED:
        return _marked(FAIL, _after_outcome(result.verdict, Status.FAILED))
    if result.status == Status.ERROR:
        return f"{ERROR} ({result.error})"
    # Its run stopped it (its cost limit; a refused setting, whose words the error above says).
    if result.verdict.startswith("stopped "):
        return _marked(STOPPED, briefly(result.verdict.removeprefix("stopped ")))
    return _marked("⏹ CANCELLED", _after_outcome(result.verdict, Status.CANCELLED))


def _marked(mark: str, how: str) -> str:
    return f"{mark} ({how})" if how else mark


def how_passed(result: EvalResult) -> str:
    """How a conversation passed, in words that follow a mark already saying it passed: the turn that
    succeeded; else the verdict past its first word, if that word is the outcome ("after 3 turns: condition
    met: …"), as counted verdicts never start with it ("every turn passed: 2 of 2")."""
    if result.passed_on_turn is not None:
        return f"succeeded on turn {result.passed_on_turn}"
    return _after_outcome(result.verdict, Status.PASSED)


def _after_outcome(verdict: str, outcome: Status) -> str:
    """The verdict without the outcome it starts with ("failed after 2 turns" → "after 2 turns"), which the
    mark before it says."""
    rest = verdict.removeprefix(str(outcome))
    if rest == verdict or rest[:1] not in ("", " ", ":"):
        return verdict
    return rest.removeprefix(":").strip()


def format_eval(result: EvalResult, iterations: int = 1, unpriced: Sequence[str] = ()) -> str:
    """One eval's block; `iterations`: how many times the eval ran, so every run of a repeated eval is
    labelled alike ("iteration 1 of 5" as well as "iteration 2 of 5"), as the pages label them. A turn's cost
    is unknown, or a lower bound, when its calls went to endpoints without prices (its `unpriced`), or those
    of `unpriced` (a run's, for a document whose turns do not name theirs)."""
    repeat = f" (iteration {result.iteration + 1} of {iterations})" if iterations > 1 else ""
    lines = [f"Eval {result.index + 1}{repeat}: {_indent(result.prompt, '  ')}"]
    if result.history:
        roles = ", ".join(message["role"] for message in result.history)
        lines.append(f"  Given history: {plural(len(result.history), 'message')} ({roles})")
    for turn in result.turns:
        unpriced_here = sorted({*turn.unpriced, *unpriced})
        lines.append(f"  Turn {turn.turn}:")
        if turn.followup_reason:
            lines.append(f"    Follow-up because {turn.followup_reason}")
        prompt = turn.prompt if turn.prompt else "(none: the model replies to the given history)"
        who = " (simulated user)" if turn.user_usage.total_tokens else ""
        lines.append(f"    Prompt{who}: {_indent(prompt, '      ')}")
        lines += _tool_lines(turn, "    ")
        lines.append(f"    Response: {_indent(turn.response, '      ')}")
        if turn.refusal and turn.refusal != turn.response:
            lines.append(f"    Refusal: {_indent(turn.refusal, '      ')}")
        if turn.incomplete:
            lines.append(f"    ⚠ Not a finished reply: {turn.incomplete}")
        if turn.stop_when is not None:
            lines.append(f"    {_condition_line(turn.stop_when)}")
        for check in turn.checks:
            lines += _check_lines(check, "    ")
        if turn.grade is not None:
            mark = PASS if turn.grade.passed else FAIL
            lines.append(
                f"    {mark} {turn.grade.grader} {turn.grade.score:.2f}: {turn.grade.submission!r} vs "
                f"{turn.grade.ground_truth!r} — {turn.grade.rationale}{how_read(turn.grade)}"
            )
        for item in turn.grades:
            lines.append(_grade_line(item, "    "))
        estimated = " (estimated)" if turn.usage.estimated else ""
        others = "".join(
            f" + {tokens:,} {who}"
            for tokens, who in _other_tokens(turn.judge_usage.total_tokens, turn.user_usage.total_tokens)
        )
        lines.append(
            f"    Tokens: {turn.usage.prompt_tokens} in / {turn.usage.completion_tokens} out{estimated}{others}"
            f", cost {spent(turn.cost + turn.judge_cost + turn.user_cost, unpriced_here) or 'unknown'}"
            f"{cached_note(turn, unpriced_here)}"
        )
    for grader in result.graders:
        if grader.score is not None:
            mark = PASS if grader.passed else FAIL
            score = against(grader.score, grader.threshold, label="")
            lines.append(f"  {mark} grader {grader.name} ({grader.kind}) {score}")
            for item in grader.grades:
                lines.append(_grade_line(item, "    "))
    if result.turns_total:
        marks = "".join("✓" if turn.passed else "✗" for turn in result.turns if turn.passed is not None)
        lines.append(f"  Turns: {result.turns_passed}/{result.turns_total} {marks}".rstrip())
    if len(result.turns) and result.termination and result.conversation == Style.SIMULATED:
        lines.append(f"  Ended: {result.termination}")
    lines.append(f"  Overall: {overall(result)}")
    return "\n".join(lines)


def _other_tokens(judge: int, user: int) -> list[tuple[int, str]]:
    """The judges' and the simulated user's tokens beside the model's, as the cost counts them too: the ones
    spent, in that order."""
    return [(tokens, who) for tokens, who in ((judge, "judge"), (user, "simulated user")) if tokens]


def token_figures(totals: RunTotals) -> str:
    """A run's tokens as its summary says them: the model's, then what judges and the simulated user spent
    besides, which its cost includes ("1,234 tokens (+ 560 judge)")."""
    model = f"{totals.total_tokens:,} token{'' if totals.total_tokens == 1 else 's'}"
    others = ", ".join(
        f"+ {tokens:,} {who}" for tokens, who in _other_tokens(totals.judge_tokens, totals.user_tokens)
    )
    return f"{model} ({others})" if others else model


def _grade_line(item, indent: str) -> str:
    mark = PASS if item.passed else FAIL
    return f"{indent}{mark} {item.name or item.grader} {item.score:.2f}: {item.rationale}{how_read(item)}"


# An iteration in a repeated eval's strip: passed, failed, not played (the run stopped first), else an error.
STRIP_MARKS = {Status.PASSED: "✓", Status.FAILED: "✗", Status.CANCELLED: "·"}


def format_iterated(report: RunReport) -> list[str]:
    lines = []
    for item in report.iterated:
        stats = item.stats
        strip = "".join(
            STRIP_MARKS.get(r.status, "!")
            for r in sorted((r for r in report.evals if r.index == item.index), key=lambda r: r.iteration)
        )
        mean = "n/a" if stats.mean is None else f"{stats.mean:.2f} ± {stats.std_dev:.2f}"
        flaky = " FLAKY" if stats.flaky else ""
        if item.status == Status.CANCELLED:  # no iteration played: the run stopped before it
            lines.append(f"{STOPPED} {item.id}: not played {strip}")
            continue
        mark = PASS if item.status == Status.PASSED else ERROR if item.status == Status.ERROR else FAIL
        lines.append(
            f"{mark} {item.id}: {stats.pass_count}/{stats.iterations - stats.errors} passed "
            f"({stats.pass_rate:.0%}, 95% CI {stats.pass_rate_low:.0%}–{stats.pass_rate_high:.0%}, needs "
            f"{stats.pass_rate_threshold:.0%}) {strip}{flaky} — score {mean}, turns {stats.min_turns}–{stats.max_turns}"
        )
    return lines


def cached_note(turn, unpriced: Sequence[str] = ()) -> str:
    """What of the turn came from the response cache, for its tokens line, in one wording whichever calls
    they were: "(from the cache: the reply and 1 more call, $0.010000 saved)", "(from the cache: 1 call,
    $0.002000 saved)"; what they saved left out when prices do not say it."""
    if not turn.cached_calls:
        return ""
    if not turn.cached:
        what = plural(turn.cached_calls, "call")
    elif turn.cached_calls > 1:
        what = f"the reply and {plural(turn.cached_calls - 1, 'more call')}"
    else:
        what = "the reply"
    saved = spent(turn.saved_cost, unpriced)
    return f" (from the cache: {what}, {saved} saved)" if saved else f" (from the cache: {what})"


def format_header(suite_name: str, model: str, endpoint: str, mock: bool) -> str:
    # The model is named once: a `name/` prefix already says which endpoint it went to.
    if mock:
        where = " [mock endpoint]"
    elif endpoint == DEFAULT_ENDPOINT:
        where = " on the default endpoint"
    elif model.startswith(f"{endpoint}/"):
        where = ""
    else:
        where = f" on {endpoint}"
    return f"Suite: {suite_name} — model {model}{where}"


def format_line(result: EvalResult, iterations: int = 1) -> str:
    """A conversation that passed, on one line: its number, the start of its prompt, and how it passed."""
    repeat = f" (iteration {result.iteration + 1} of {iterations})" if iterations > 1 else ""
    how = how_passed(result)
    return f"{PASS} Eval {result.index + 1}{repeat}: {_one_line(result.prompt)}{f' ({how})' if how else ''}"


def format_summary(report: RunReport) -> str:
    totals = report.totals
    short = ""  # a stopped run's cancelled conversations: cut short as they played, or never started
    if report.stop_reason and totals.cancelled:
        unplayed = sum(map(never_started, report.evals))
        short += f", {totals.cancelled - unplayed} stopped" if totals.cancelled > unplayed else ""
        short += f", {unplayed} not started" if unplayed else ""
    summary = (
        f"Summary: {totals.passed} passed, {totals.failed} failed, {plural(totals.error, 'error')}{short} of "
        f"{plural(totals.evals, 'eval')} — {plural(totals.turns, 'turn')}, {token_figures(totals)}, "
        f"{run_cost(totals.cost, report.unpriced)}"
    )
    if totals.duration_s is not None:
        summary += f", {totals.duration_s:.1f}s"
    if totals.cached_calls:
        saved = spent(totals.saved_cost, report.unpriced)
        summary += (
            f"; {plural(totals.cached_calls, 'call')} from the cache{f', {saved} saved' if saved else ''}"
        )
    for gate in report.gates:
        actual = "n/a" if gate.actual is None else f"{gate.actual:.3f}"
        summary += f"\nGate {gate.label}: {PASS if gate.passed else FAIL} (actual {actual})"
    # A run stopped short (its cost limit, a refused setting) says why, not a bare "cancelled" that reads like
    # someone's Ctrl-C, nor a FAIL: what it did not play has no verdict. A refusal's words are the error's.
    if report.stop_reason:
        return f"{summary}\nOverall: {STOPPED} ({briefly(report.stop_reason)})"
    # The mark says passed or failed; another status (an error, a cancel) is said beside it.
    said = "" if report.status in (Status.PASSED, Status.FAILED) else f" ({report.status})"
    return f"{summary}\nOverall: {PASS if report.status == Status.PASSED else FAIL}{said}"


def run_cost(usd: float, unpriced: Sequence[str], digits: int = 6) -> str:
    """A run's cost as its summary says it: "$0.001234"; with endpoints that have no prices, "cost unknown" or
    "at least $0.001234", saying which endpoints (mock runs cost nothing: the mock is never unpriced)."""
    if not unpriced:
        return f"${usd:.{digits}f}"
    return f"{spent(usd, unpriced, digits) or 'cost unknown'} ({no_prices(unpriced)})"


NOT_STARTED_NAMED = 10  # conversations a stopped run names; the rest are counted


def never_started(result: EvalResult) -> bool:
    """Never started, as a stopped run lists it (engine.runner.not_started), not cancelled mid-way."""
    return result.status == Status.CANCELLED and not result.turns and result.verdict.startswith(NOT_STARTED)


def not_started(report: RunReport) -> str:
    """The conversations a stopped run never started (its cost limit, a refused setting), as they are never
    printed as they end: a line naming the first few, and a blank line."""
    if not report.stop_reason:
        return ""
    left = [result for result in report.evals if never_started(result)]
    if not left:
        return ""
    runs_of = Counter(result.index for result in report.evals)
    named = [
        f"Eval {result.index + 1}"
        + (
            f" (iteration {result.iteration + 1} of {runs_of[result.index]})"
            if runs_of[result.index] > 1
            else ""
        )
        for result in left[:NOT_STARTED_NAMED]
    ]
    more = f" and {len(left) - NOT_STARTED_NAMED} more" if len(left) > NOT_STARTED_NAMED else ""
    return f"{STOPPED} not started ({briefly(report.stop_reason)}): {', '.join(named)}{more}\n\n"


class Detail(StrEnum):
    """How much of each conversation the report shows."""

    COMPACT = "compact"  # a line for each that passed, every turn of the others
    VERBOSE = "verbose"  # every turn of every conversation
    QUIET = "quiet"  # the summary alone


class ReportWriter:
    """The report in the order it is written, one piece at a time, so that a run can print each
    conversation as it ends: the header, the conversations, the summary last. Each piece is one `print`, its
    control characters escaped (engine.text.terminal_safe)."""

    def __init__(self, detail: Detail = Detail.VERBOSE, unpriced: Sequence[str] = ()) -> None:
        self.detail = detail
        # Endpoints without prices the run called, over each turn's own (format_eval): a document read back.
        self.unpriced = unpriced
        self.after_line = False  # the last piece was a one-line pass, not a block that ends in a blank line

    def header(self, suite_name: str, model: str, endpoint: str, mock: bool) -> str | None:
        if self.detail == Detail.QUIET:
            return None
        return terminal_safe(format_header(suite_name, model, endpoint, mock)) + "\n"

    def result(self, result: EvalResult, iterations: int = 1) -> str | None:
        if self.detail == Detail.QUIET or never_started(result):  # the unplayed are listed before the summary
            return None
        if self.detail == Detail.COMPACT and result.status == Status.PASSED:
            self.after_line = True
            return terminal_safe(format_line(result, iterations))
        gap = "\n" if self.after_line else ""
        self.after_line = False
        return f"{gap}{terminal_safe(format_eval(result, iterations, self.unpriced))}\n"

    def summary(self, report: RunReport) -> str:
        if self.detail == Detail.QUIET:
            return terminal_safe(format_summary(report))
        gap = "\n" if self.after_line else ""
        iterated = format_iterated(report)
        listed = "\n".join(["Iterated evals:", *iterated, "", ""]) if iterated else ""
        return terminal_safe(f"{gap}{not_started(report)}{listed}{format_summary(report)}")


def format_report(report: RunReport, detail: Detail = Detail.VERBOSE) -> str:
    writer = ReportWriter(detail, report.unpriced)
    runs_of = Counter(result.index for result in report.evals)
    pieces = [writer.header(report.suite.name, report.model, report.endpoint, report.mock)]
    pieces += [writer.result(result, runs_of[result.index]) for result in report.evals]
    pieces.append(writer.summary(report))
    return "\n".join(piece for piece in pieces if piece is not None)
