"""A run's results in the forms CI systems, spreadsheets and pull requests read: JUnit XML, CSV, Markdown.

`FORMATS` is the one list of them: the run page, the API and `evalsite run` each serve every entry, so the
three export the same text. Model output is hostile: XML gets only characters XML 1.0 allows, CSV cells
cannot start a formula, and Markdown cells are escaped so a reply cannot break out of its table or inject
links.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .compare import Change, Comparison
from .failures import failures, transcript_url
from .gates import GateResult, grader_names
from .outcomes import Status
from .report import never_started, run_cost, token_figures
from .results import EvalResult, RunReport, TurnRecord
from .text import plural

# XML 1.0 allows tab, newline, carriage return and U+0020 upwards, except surrogates and U+FFFE/U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def role_transcript(result: EvalResult, system: str | None = None) -> str:
    """The conversation as `[Role]:` blocks, every message marked: the system prompt (the report does not
    hold it: the caller passes the suite's), the given history, then each turn."""
    blocks = [f"[System]:\n{system}"] if system else []
    for message in result.history:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(part.get("text", part.get("value", ""))) for part in content)
        blocks.append(f"[{str(message.get('role', 'user')).capitalize()}]:\n{content or ''}")
    for turn in result.turns:
        if turn.prompt:
            blocks.append(f"[User]:\n{turn.prompt}")
        blocks += tool_blocks(turn)
        blocks.append(f"[Assistant]:\n{turn.response}")
    return "\n\n".join(blocks)


def tool_blocks(turn: TurnRecord) -> list[str]:
    """A turn's tool rounds as `[Role]:` blocks, before its reply: what the model said beside its calls, each
    call with its arguments as sent, and each result with its latency and, for an error, whose it was."""
    blocks = []
    for round_ in turn.tool_rounds:
        if round_.text:
            blocks.append(f"[Assistant]:\n{round_.text}")
        for call in round_.calls:
            blocks.append(f"[Assistant → tool call {call.name}]:\n{call.raw_arguments}")
            if round_.incomplete is not None:  # its calls were not carried out: no result went back
                continue
            fault = ""
            if call.error is not None:
                fault = ", the model's mistake" if call.mistake else ", tool error"
            blocks.append(f"[Tool {call.name}, {call.latency_ms} ms{fault}]:\n{call.result}")
    return blocks


def case_name(result: EvalResult, iterated: bool) -> str:
    return f"{result.id} (iteration {result.iteration + 1})" if iterated else result.id


def junit_xml(report: RunReport, system: str | None = None) -> str:
    """One testsuite for the run, one testcase per eval (per iteration for iterated evals). A failed eval
    carries its verdict in <failure>, an errored one in <error>, a cancelled one and a re-grade's eval that
    is not in the source run are <skipped>; every
    testcase carries its `[Role]:` transcript in <system-out>. Gates that fail are testcases of their own,
    so a run failed only by a gate still shows red in CI."""
    iterated = {item.id for item in report.iterated}
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    cases = []
    for result in report.evals:
        case = ET.Element(
            "testcase",
            name=_xml_text(case_name(result, result.id in iterated)),
            classname=_xml_text(report.suite.name),
            time=f"{sum(turn.latency_ms for turn in result.turns) / 1000:.3f}",
        )
        counts["tests"] += 1
        if result.status == Status.FAILED:
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=_xml_text(result.verdict), type="failed")
            failure.text = _xml_text(_failed_checks(result))
        elif result.status == Status.ERROR:
            counts["errors"] += 1
            error = ET.SubElement(case, "error", message=_xml_text(result.verdict), type="error")
            error.text = _xml_text(result.error or result.verdict)
        elif result.status != Status.PASSED:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_xml_text(result.verdict or str(result.status)))
        out = ET.SubElement(case, "system-out")
        reviewed = ""
        if result.original is not None:
            reviewed = f"Overridden by a reviewer (the run said {result.original.status}):\n"
            reviewed += override_notes(result) + "\n\n"
        out.text = _xml_text(reviewed + role_transcript(result, system))
        cases.append(case)
    for gate in report.gates:
        case = ET.Element("testcase", name=_xml_text(f"gate {gate.label}"), classname=_xml_text(report.suite.name), time="0")  # fmt: skip
        counts["tests"] += 1
        if not gate.passed:
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=_xml_text(_gate_line(gate)), type="gate")
        cases.append(case)
    duration = f"{report.totals.duration_s or 0:.3f}"
    # <testsuites> carries no `skipped` in the schema Jenkins' xunit plugin validates against.
    root = ET.Element(
        "testsuites", name="evalsite", time=duration,
        **{k: str(v) for k, v in counts.items() if k != "skipped"},
    )  # fmt: skip
    suite = ET.SubElement(
        root, "testsuite", name=_xml_text(report.suite.name), time=duration,
        **{k: str(v) for k, v in counts.items()},
    )  # fmt: skip
    properties = ET.SubElement(suite, "properties")
    for name, value in (("model", report.model), ("endpoint", report.endpoint), ("status", report.status)):
        ET.SubElement(properties, "property", name=name, value=_xml_text(str(value)))
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _failed_checks(result: EvalResult) -> str:
    lines = [result.verdict]
    for turn in result.turns:
        for check in turn.checks:
            if not check.passed:
                lines.append(f"turn {turn.turn}: {check.label}: {check.reason}")
        if turn.grade is not None and not turn.grade.passed:
            lines.append(f"turn {turn.turn}: {turn.grade.grader}: {turn.grade.rationale}")
    return "\n".join(lines)


def _gate_line(gate: GateResult) -> str:
    actual = "n/a" if gate.actual is None else f"{gate.actual:.3g}"
    if gate.kind in ("logical_and", "logical_or"):
        return f"{gate.label}: {'held' if gate.passed else 'did not hold'}"
    return f"{gate.label}: actual {actual}"


# --- Markdown, for a pull-request comment -----------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")


def _md(text: str, limit: int = 80) -> str:
    """One table cell of hostile text: one line, cut, Markdown and HTML specials escaped."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _MD_SPECIAL.sub(r"\\\1", text)


MARK = {
    Status.PASSED: "✅",
    Status.FAILED: "❌",
    Status.ERROR: "⚠️",
    Status.CANCELLED: "⏹",
    Status.SKIPPED: "⏭",
}


def markdown_summary(
    report: RunReport,
    *,
    comparison: Comparison | None = None,
    run_url: str | None = None,
    baseline_url: str | None = None,
    limit: int = 50,
) -> str:
    """Counts, gates, the comparison with the baseline, every failing eval (regressions first) with its
    reason and a link to its transcript, and the fixed ones, short enough for a PR comment."""
    totals = report.totals
    title = f"{MARK.get(report.status, '')} evalsite: {_md(report.suite.name)} {report.status}".replace(
        "  ", " "
    )
    lines = [f"### {title}", ""]
    lines.append(
        f"**{totals.passed}** passed · **{totals.failed}** failed · **{totals.error}** errored"
        + _cancelled(report)
        + (f" · {totals.skipped} not in the source run" if totals.skipped else "")
        + f" of {plural(totals.evals, 'eval')} on `{_md(report.model)}`"
        + f" · {token_figures(totals)} · {run_cost(totals.cost, report.unpriced, 4)}"
    )
    overridden = [r for r in report.evals if r.original is not None]
    if overridden:
        changed = sum(1 for r in overridden if r.original.status != r.status)
        lines += [
            "",
            f"{plural(len(overridden), 'verdict')} reviewed by hand ({changed} changed by overrides; "
            "counts above are as reviewed)",
        ]
    if run_url:
        lines += ["", f"[Open the run]({run_url})"]
    if report.gates:
        lines += ["", "| gate | actual | |", "|---|---|---|"]
        for gate in report.gates:
            actual = "" if gate.actual is None else f"{gate.actual:.3g}"
            lines.append(f"| {_md(gate.label)} | {actual} | {'✅' if gate.passed else '❌'} |")
    if comparison is not None:
        counts = comparison.counts
        against = f"[baseline]({baseline_url})" if baseline_url else "the baseline"
        lines += [
            "",
            f"Against {against}: **{counts[Change.REGRESSION]}** regressed · **{counts[Change.FIX]}** fixed · "
            f"{counts[Change.STILL_FAILING]} still failing · {counts[Change.UNCHANGED]} unchanged"
            + (f" · {counts[Change.ADDED]} new" if counts[Change.ADDED] else "")
            + (f" · {counts[Change.REMOVED]} removed" if counts[Change.REMOVED] else ""),
        ]
        if comparison.score_delta is not None:
            lines[-1] += f" · score {comparison.score_delta:+.3f}"
    lines += _failing_table(report, comparison, run_url, limit)
    return "\n".join(lines) + "\n"


def _cancelled(report: RunReport) -> str:
    """The summary's count of conversations without a verdict: a stopped run's (its cost limit, a refused
    setting) as the terminal counts them, those cut short apart from those never started."""
    cancelled = report.totals.cancelled
    if not cancelled:
        return ""
    if not report.stop_reason:
        return f" · {cancelled} cancelled"
    unplayed = sum(map(never_started, report.evals))
    return (f" · {cancelled - unplayed} stopped" if cancelled > unplayed else "") + (
        f" · {unplayed} not started" if unplayed else ""
    )


def _failing_table(
    report: RunReport, comparison: Comparison | None, run_url: str | None, limit: int
) -> list[str]:
    """Every failing eval with its reason and a link to its transcript: regressions, new failures, the
    others; then the evals fixed since the baseline."""
    found = failures(report.evals, comparison)
    lines: list[str] = []
    if found.failing:
        kinds = comparison is not None
        lines += ["", "| | eval | why | transcript |" if kinds else "| eval | why | transcript |"]
        lines.append("|---|---|---|---|" if kinds else "|---|---|---|")
        iterated = {item.id for item in report.iterated}
        for item in found.failing[:limit]:
            url = transcript_url(run_url, item.result)
            link = f" [open]({url}) " if url else " "
            name = _md(case_name(item.result, item.result.id in iterated), 60)
            row = f"| {name} | {MARK.get(item.result.status, '')} {_md(item.reason, 160)} |{link}|"
            lines.append(f"| {item.kind} {row}" if kinds else row)
        if len(found.failing) > limit:
            lines.append(f"| … {len(found.failing) - limit} more | |" + (" |" if kinds else "") + " |")
    if found.fixed:
        shown = ", ".join(f"`{_md(row.id, 60)}`" for row in found.fixed[:limit])
        more = f" and {len(found.fixed) - limit} more" if len(found.fixed) > limit else ""
        lines += ["", f"Fixed since the baseline: {shown}{more}"]
    return lines


# --- CSV: one row per eval (per iteration), and one row per turn and per tool call -------------------------

# A spreadsheet runs a cell that starts with one of these as a formula; model output is hostile, so such a
# cell gets a leading apostrophe (OWASP's advice for CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

# An eval's cost is its model's, its judges' and its simulated user's: its row gives the tokens of each, and a
# turn's row the cost of each.
EVAL_COLUMNS = [
    "eval_id", "iteration", "conversation", "status", "score", "passed_on_turn", "turns", "turns_passed",
    "turns_total", "prompt_tokens", "completion_tokens", "judge_tokens", "user_tokens", "cost", "verdict",
    "prompt", "error", "overridden_from", "override_notes", "tags",
]  # fmt: skip
TURN_COLUMNS = [
    "eval_id", "iteration", "turn", "node", "prompt", "response", "passed", "checks", "grade_score",
    "grade_passed", "grades", "prompt_tokens", "completion_tokens", "latency_ms", "cost", "judge_cost",
    "user_cost", "tool_round", "tool_call", "tool_name", "tool_arguments", "tool_result", "tool_error",
    "tool_mistake", "tool_source",
]  # fmt: skip
# A turn's own row leaves the tool columns empty; each of its tool calls has a row after it.
_NO_TOOL = [None] * 8


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return spreadsheet_text(str(value))


def spreadsheet_text(text: str) -> str:
    """A CSV cell's text that a spreadsheet shows rather than runs."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def override_notes(result: EvalResult) -> str:
    """A reviewed eval's overrides, one line each: who gave which outcome to what, and why."""
    return "\n".join(
        f"turn {item.turn} {item.target} → {'passed' if item.passed else 'failed'}"
        f"{' by ' + item.by if item.by else ''}: {item.note}"
        for item in result.overrides
    )


def _csv_lines(header: list[str], rows) -> Iterator[str]:
    """CSV text, one line at a time: a big run's export is streamed, never held."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in [header] if header else []:
        writer.writerow(row)
    for row in rows:
        writer.writerow([_cell(value) for value in row])
        if out.tell() > 65536:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


def evals_csv(report: RunReport) -> str:
    return "".join(evals_csv_lines(report.evals, grader_names(report.evals)))


def evals_csv_lines(evals: Iterable[EvalResult], names: list[str]) -> Iterator[str]:
    """One row per eval (per iteration), with a score and a passed column per named grader in `names`."""
    header = [*EVAL_COLUMNS, *(column for name in names for column in (name, f"{name}_passed"))]

    def rows():
        for r in evals:
            t = r.totals
            graded = {grader.name: grader for grader in r.graders}
            extra = []
            for name in names:
                grader = graded.get(name)
                extra += [grader.score if grader else None, grader.passed if grader else None]
            yield [
                r.id, r.iteration, r.conversation, r.status, r.score, r.passed_on_turn, t.turns, r.turns_passed,
                r.turns_total, t.prompt_tokens, t.completion_tokens, t.judge_tokens, t.user_tokens, t.cost,
                r.verdict, r.prompt, r.error, r.original.status if r.original else None, override_notes(r), ";".join(r.tags), *extra,
            ]  # fmt: skip

    return _csv_lines(header, rows())


def turns_csv(report: RunReport) -> str:
    return "".join(turns_csv_lines(report.evals))


def turns_csv_lines(evals: Iterable[EvalResult]) -> Iterator[str]:
    """One row per turn of every eval, each followed by a row per tool call it made."""

    def rows():
        for r in evals:
            for turn in r.turns:
                checks = "; ".join(
                    f"{c.label}: {'pass' if c.passed else 'fail'}{' (overridden)' if c.overridden else ''}"
                    for c in turn.checks
                )
                grades = "; ".join(f"{g.name or g.grader}: {g.score:.3g}" for g in turn.grades)
                grade = turn.grade
                yield [
                    r.id, r.iteration, turn.turn, turn.node, turn.prompt, turn.response, turn.passed, checks,
                    grade.score if grade else None, grade.passed if grade else None, grades,
                    turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.latency_ms, turn.cost,
                    turn.judge_cost, turn.user_cost, *_NO_TOOL,
                ]  # fmt: skip
                yield from _call_rows(r, turn)

    return _csv_lines(TURN_COLUMNS, rows())


def _call_rows(r: EvalResult, turn: TurnRecord) -> Iterator[list]:
    """A row per tool call of the turn, in the order made: the turn's keys, the call's latency, and the tool
    columns; its tokens and cost are the turn's, on the turn's row, so summing a column counts them once."""
    number = 0
    for round_number, round_ in enumerate(turn.tool_rounds, start=1):
        for call in round_.calls:
            number += 1
            yield [
                r.id, r.iteration, turn.turn, turn.node, None, None, None, None, None, None, None, None, None,
                call.latency_ms, None, None, None, round_number, number, call.name, call.raw_arguments, call.result,
                call.error, call.mistake, call.source,
            ]  # fmt: skip


# --- the formats: one entry each, served by the run page, the API and the CLI -----------------------------


@dataclass(frozen=True)
class RunExport:
    """A run as the writers read it. Each reader is called only by the writers that need it, so a CSV
    streams the evals and never holds the whole report."""

    report: Callable[[], RunReport]
    evals: Callable[[], Iterable[EvalResult]]
    grader_names: Callable[[], list[str]]
    system: Callable[[], str | None]  # the suite's system prompt: the report does not hold it
    run_url: str | None = None
    comparison: Comparison | None = None
    baseline_url: str | None = None

    @classmethod
    def of_report(cls, report: RunReport, system: str | None = None, **links) -> RunExport:
        """A run the caller holds whole, as the CLI does."""
        return cls(
            report=lambda: report,
            evals=lambda: report.evals,
            grader_names=lambda: grader_names(report.evals),
            system=lambda: system,
            **links,
        )


@dataclass(frozen=True)
class CliOption:
    """How `evalsite run` asks for a format: `--junit OUT.xml`."""

    flag: str
    metavar: str
    help: str

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_") + "_path"


@dataclass(frozen=True)
class ExportFormat:
    """One way to export a run's results. The CLI writes it where its option says, or, with `beside`, next
    to the file of the format of that key (`--csv out.csv` writes out.turns.csv too)."""

    key: str  # the run page's URL: results.<key>
    label: str  # the run page's link
    suffix: str  # the file's name ends .<suffix>; the API's URL is results.<suffix>
    media_type: str
    summary: str  # the API route's
    write: Callable[[RunExport], Iterable[str]]
    cli: CliOption | None = None
    beside: str | None = None
    streams: bool = False  # the writer yields chunks, which the page and the API send as they come
    compares: bool = False  # it lists regressions against a baseline: the API takes ?baseline=<run id>
    written: str = ""  # what the CLI says it wrote: "Wrote the <written> to <path>"

    def text(self, run: RunExport) -> str:
        return "".join(self.write(run))


def _junit(run: RunExport) -> Iterator[str]:
    yield junit_xml(run.report(), run.system())


def _evals_csv(run: RunExport) -> Iterator[str]:
    return evals_csv_lines(run.evals(), run.grader_names())


def _turns_csv(run: RunExport) -> Iterator[str]:
    return turns_csv_lines(run.evals())


def _markdown(run: RunExport) -> Iterator[str]:
    yield markdown_summary(
        run.report(), comparison=run.comparison, run_url=run.run_url, baseline_url=run.baseline_url
    )


CSV_TYPE = "text/csv; charset=utf-8"

FORMATS = {
    entry.key: entry
    for entry in (
        ExportFormat(
            key="junit", label="JUnit XML", suffix="junit.xml", media_type="application/xml",
            summary="A run's results as JUnit XML", write=_junit, written="JUnit XML report",
            cli=CliOption(
                "--junit", "OUT.xml",
                "write JUnit XML: a testcase per eval (per iteration), failed gates too, the transcript with its "
                "tool calls in system-out",
            ),
        ),
        ExportFormat(
            key="csv", label="CSV, evals", suffix="csv", media_type=CSV_TYPE,
            summary="A run's results as CSV, a row per eval (per iteration)", write=_evals_csv, streams=True,
            written="CSV of evals",
            cli=CliOption(
                "--csv", "OUT.csv",
                "write a CSV row per eval (per iteration) here, and a row per turn and per tool call beside it "
                "(OUT.turns.csv)",
            ),
        ),
        ExportFormat(
            key="turns.csv", label="CSV, turns", suffix="turns.csv", media_type=CSV_TYPE,
            summary="A run's turns as CSV, a row per turn and per tool call", write=_turns_csv, streams=True, beside="csv",
            written="CSV of turns",
        ),
        ExportFormat(
            key="md", label="Markdown summary", suffix="md", media_type="text/markdown; charset=utf-8",
            summary="A run's Markdown summary, for a pull-request comment", write=_markdown, compares=True,
            written="Markdown summary",
            cli=CliOption(
                "--markdown", "OUT.md",
                "write a Markdown summary for a pull-request comment: every failing eval with its reason and "
                "transcript link (with --baseline: regressions first, then new failures)",
            ),
        ),
    )
}  # fmt: skip
