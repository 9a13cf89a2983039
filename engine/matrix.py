"""A matrix: one suite played against several models, or several settings of one model, compared eval by eval.

A variant is a model reference with optional generation settings, written `MODEL` or
`MODEL@KEY=VALUE@KEY=VALUE` (`gpt-4o-mini@temperature=0.7`); `evalsite run --model a,b,c`, the launch form
and the API all read that one syntax. The grid (`build_grid`) takes each variant's conversations as plain
rows, from a RunReport here or from the database on a server, and gives the page, the terminal and the
exports one object: a cell per eval × variant, each variant's pass rate with its Wilson interval, mean
score, tokens (the model's apart from the judges' and the simulated user's), cost and latency percentiles, and which pairs of variants differ beyond chance (an exact
McNemar test on the evals where exactly one of the two passed).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import yaml
from pydantic import ValidationError

from .cost import spent
from .errors import first_error
from .exports import spreadsheet_text
from .outcomes import Status
from .results import EvalResult, RunReport
from .schema.settings import ModelSettings
from .source import SuiteError, load_typed_yaml
from .stats import wilson_interval
from .text import plural

SETTING_MARK = "@"
# How the verdict of a conversation a stopped run never started begins (engine.runner, runs.worker).
NOT_STARTED = "not started"
MAX_VARIANTS = 10
SIGNIFICANCE = 0.05
GRADED = (Status.PASSED, Status.FAILED)
FINISHED = frozenset({Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.SKIPPED})


class VariantError(ValueError):
    """A variant that cannot be read; the message names it and says why."""


@dataclass(frozen=True)
class Variant:
    model: str
    model_settings: ModelSettings | None = None
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or variant_label(self.model, self.model_settings)


def variant_label(model: str, settings: ModelSettings | None) -> str:
    """`gpt-4o-mini temperature=0.7`: the model, then each setting given, as the user wrote it."""
    if settings is None or not settings.given():
        return model
    given = " ".join(f"{key}={_setting_text(value)}" for key, value in settings.given().items())
    return f"{model} {given}"


LABEL_CHARS = 100  # a run's label (engine.options.RunOptions)


def fitted_label(name: str) -> str:
    """A variant's name as a run's label: as it is up to LABEL_CHARS, else cut short and told apart from any
    other cut alike by a digest of the whole."""
    if len(name) <= LABEL_CHARS:
        return name
    digest = hashlib.blake2s(name.encode(), digest_size=3).hexdigest()
    return f"{name[: LABEL_CHARS - len(digest) - 2]}… {digest}"


def _setting_text(value) -> str:
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf).strip().removesuffix("...").strip()


def parse_variant(text: str, label: str | None = None) -> Variant:
    """`MODEL` or `MODEL@KEY=VALUE@...`: each value read as YAML (`0.7`, `[END]`, `{type: json_object}`) and
    checked as ModelSettings."""
    model, *parts = [part.strip() for part in text.strip().split(SETTING_MARK)]
    if not model:
        raise VariantError(f"`{text.strip()}`: no model before the `{SETTING_MARK}`")
    data = {}
    for part in parts:
        key, equals, value = part.partition("=")
        if not equals or not key.strip():
            raise VariantError(f"`{text.strip()}`: write settings as `{SETTING_MARK}KEY=VALUE`, not `{part}`")
        if key.strip() in data:  # as a duplicate key in YAML: which of the two was meant is not said
            raise VariantError(f"`{text.strip()}`: {key.strip()} is set twice")
        try:
            data[key.strip()] = load_typed_yaml(value) if value.strip() else ""
        except SuiteError as exc:
            raise VariantError(f"`{text.strip()}`: {key.strip()}: {exc.problems[0].message}") from None
        except yaml.YAMLError:
            data[key.strip()] = value
    settings = None
    if data:
        try:
            settings = ModelSettings.model_validate(data)
        except ValidationError as exc:
            where, message = first_error(exc)
            raise VariantError(f"`{text.strip()}`: {where}: {message}") from None
    return Variant(model=model, model_settings=settings, label=(label or "").strip())


def named_twice(variants: Iterable[Variant]) -> str | None:
    """The first name two variants share (their columns could not be told apart); None when none does."""
    seen: set[str] = set()
    for variant in variants:
        if variant.name in seen:
            return variant.name
        seen.add(variant.name)
    return None


def parse_variants(texts: Iterable[str], *, split: bool = True) -> list[Variant]:
    """Every variant named, in order: comma-separated lists (`split`) or one a text; a blank text skipped, an
    empty name in a list (`a,,b`, `a,`) and the same name twice refused (its two columns could not be told
    apart)."""
    variants: list[Variant] = []
    for text in texts:
        parts = text.split(",") if split else [text]
        if split and len(parts) > 1 and not all(part.strip() for part in parts):
            raise VariantError(f"`{text.strip()}`: a name is missing between commas")
        for part in parts:
            if part.strip():
                variants.append(parse_variant(part))
    if (twice := named_twice(variants)) is not None:
        raise VariantError(f"`{twice}` is named twice: each variant needs its own model or settings")
    if len(variants) > MAX_VARIANTS:
        raise VariantError(f"{len(variants)} variants: a matrix compares at most {MAX_VARIANTS}")
    return variants


# --- the grid ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellIn:
    """One conversation of one variant, as the grid reads it."""

    index: int
    eval_id: str
    iteration: int
    status: str
    score: float | None = None
    passed_on_turn: int | None = None
    # Apart: a judge's tokens are the grading's, not the model's, and a variant graded by a wordy judge would
    # otherwise read as the costlier model.
    model_tokens: int = 0
    judge_tokens: int = 0
    user_tokens: int = 0  # the simulated user's
    cost: float = 0.0  # the model's, the judges' and the simulated user's together
    cached_calls: int = 0  # calls answered from the response cache (the model's, the judges', the user's)
    saved_cost: float = 0.0
    reason: str = ""  # why it has no verdict: an error's message, a cancelled conversation's verdict

    @property
    def tokens(self) -> int:
        return self.model_tokens + self.judge_tokens + self.user_tokens

    @property
    def unstarted(self) -> bool:
        """Cancelled before its first turn by a run stopped short (its cost limit): its verdict says so, as
        engine.report.never_started reads it. A conversation cancelled by hand says only "cancelled"."""
        return self.status == Status.CANCELLED and self.reason.startswith(NOT_STARTED)


@dataclass(frozen=True)
class ColumnIn:
    """One variant's run: its name and key (a run id on a server), its conversations and call latencies."""

    key: str
    label: str
    model: str
    status: str
    cells: Sequence[CellIn]
    latencies_ms: Sequence[int] = ()  # of the turns the model answered, not the cache
    unpriced: Sequence[str] = ()  # the endpoints without prices its run called: its cost is not known
    stop_reason: str = ""  # why its run stopped short ("cost limit $5.00 reached"); "" when it did not

    def cost_text(self, cost: float) -> str:
        """Its cost as the grid says it: "$0.0123", or "at least $0.0123" or "unknown" without prices."""
        return spent(cost, self.unpriced, 4) or "unknown"


@dataclass(frozen=True)
class Row:
    index: int
    eval_id: str
    iteration: int
    cells: tuple[CellIn | None, ...]
    disagrees: bool  # two variants' verdicts differ: one passed, another failed
    # A variant's conversation ended with no verdict (an error, cancelled): nothing to agree or disagree with.
    incomplete: bool = False

    @property
    def name(self) -> str:
        return f"{self.eval_id} (iteration {self.iteration + 1})" if self.iteration else self.eval_id

    @property
    def order(self) -> int:
        """Where the `disagreement` sort puts it: real disagreements, then incomplete rows, then the rest."""
        return 0 if self.disagrees else 1 if self.incomplete else 2


@dataclass(frozen=True)
class ColumnStats:
    total: int
    finished: int
    passed: int
    graded: int
    errors: int
    rate: float | None
    low: float | None
    high: float | None
    mean_score: float | None
    model_tokens: int
    judge_tokens: int
    user_tokens: int
    cost: float
    p50_ms: float | None
    p95_ms: float | None
    cached_calls: int = 0
    saved_cost: float = 0.0
    cancelled: int = 0
    not_started: int = 0  # of the cancelled: never started, their run stopped short (CellIn.unstarted)

    @property
    def tokens(self) -> int:
        return self.model_tokens + self.judge_tokens + self.user_tokens


@dataclass(frozen=True)
class Difference:
    """Two variants on the evals both graded: how often only one passed, and the exact McNemar p-value."""

    first: int
    second: int
    first_only: int
    second_only: int
    p_value: float
    significant: bool

    @property
    def better(self) -> int:
        return self.first if self.first_only > self.second_only else self.second


@dataclass(frozen=True)
class Grid:
    columns: tuple[ColumnIn, ...]
    rows: tuple[Row, ...]
    stats: tuple[ColumnStats, ...]
    differences: tuple[Difference, ...]
    finished: bool
    sort: str = "disagreement"
    best: frozenset[int] = field(default_factory=frozenset)

    def significant(self) -> list[Difference]:
        return [difference for difference in self.differences if difference.significant]


SORTS = ("disagreement", "suite")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100), interpolated between the two nearest values, as numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def column_stats(column: ColumnIn) -> ColumnStats:
    cells = column.cells
    finished = [cell for cell in cells if cell.status in FINISHED]
    graded = [cell for cell in cells if cell.status in GRADED]
    passed = sum(cell.status == Status.PASSED for cell in graded)
    scores = [cell.score for cell in graded if cell.score is not None]
    low, high = wilson_interval(passed, len(graded)) if graded else (None, None)
    return ColumnStats(
        total=len(cells),
        finished=len(finished),
        passed=passed,
        graded=len(graded),
        errors=sum(cell.status == Status.ERROR for cell in cells),
        rate=passed / len(graded) if graded else None,
        low=low,
        high=high,
        mean_score=sum(scores) / len(scores) if scores else None,
        model_tokens=sum(cell.model_tokens for cell in cells),
        judge_tokens=sum(cell.judge_tokens for cell in cells),
        user_tokens=sum(cell.user_tokens for cell in cells),
        cost=sum(cell.cost for cell in cells),
        p50_ms=percentile(column.latencies_ms, 50),
        p95_ms=percentile(column.latencies_ms, 95),
        cached_calls=sum(cell.cached_calls for cell in cells),
        saved_cost=sum(cell.saved_cost for cell in cells),
        cancelled=sum(cell.status == Status.CANCELLED for cell in cells),
        not_started=sum(cell.unstarted for cell in cells),
    )


def mcnemar(first_only: int, second_only: int) -> float:
    """The exact McNemar test's two-sided p-value: under no difference, each discordant pair is a fair coin."""
    discordant = first_only + second_only
    if discordant == 0:
        return 1.0
    # The binomial distribution at one half is symmetric, so the two-sided p-value is twice the tail of the
    # smaller count: exact integers, with no library (SciPy, which tests it, is too heavy for an install).
    tail = sum(math.comb(discordant, k) for k in range(min(first_only, second_only) + 1))
    return min(1.0, 2 * tail / 2**discordant)


def _difference(rows: Sequence[Row], first: int, second: int) -> Difference:
    """The pairs are evals, not conversations: an eval's iterations are repeated draws of one question, so
    counting each as a pair would claim far more evidence than the suite holds. Per eval, the variant whose
    graded iterations passed more often is the one that did better on it (with one iteration each: the one
    that passed); the exact test is then McNemar's on evals, a sign test over them. Each variant's rate is
    over its own graded iterations: an iteration that errored or was cancelled is no draw, and takes nothing
    of the other variant's out with it (iteration n of one is no pair of iteration n of the other)."""
    tallies: dict[int, list[int]] = {}  # per eval: the first's passes and graded, the second's
    for row in rows:
        tally = tallies.setdefault(row.index, [0, 0, 0, 0])
        for offset, cell in ((0, row.cells[first]), (2, row.cells[second])):
            if cell is not None and cell.status in GRADED:
                tally[offset] += cell.status == Status.PASSED
                tally[offset + 1] += 1
    first_only = second_only = 0
    for a_passed, a_graded, b_passed, b_graded in tallies.values():
        if not a_graded or not b_graded:  # an eval one of the two has no verdict on is no pair
            continue
        # The two rates compared as fractions, in integers: a_passed / a_graded against b_passed / b_graded.
        first_only += a_passed * b_graded > b_passed * a_graded
        second_only += b_passed * a_graded > a_passed * b_graded
    p_value = mcnemar(first_only, second_only)
    return Difference(first, second, first_only, second_only, p_value, p_value < SIGNIFICANCE)


def _disagrees(cells: Sequence[CellIn | None]) -> bool:
    """Verdicts differ: an error or a cancelled conversation has none, so it differs from nothing."""
    return len({cell.status for cell in cells if cell is not None and cell.status in GRADED}) > 1


def _incomplete(cells: Sequence[CellIn | None]) -> bool:
    return any(cell is not None and cell.status in FINISHED and cell.status not in GRADED for cell in cells)


def build_grid(columns: Sequence[ColumnIn], sort: str = "disagreement") -> Grid:
    """The grid of evals × variants: rows in the suite's order, or (`disagreement`) those where the variants'
    verdicts differ first, then those a variant has no verdict on (an error, cancelled); a row for each eval
    (each iteration) any variant has."""
    keys: dict[tuple[int, int], tuple[str, list[CellIn | None]]] = {}
    for number, column in enumerate(columns):
        for cell in column.cells:
            _, cells = keys.setdefault((cell.index, cell.iteration), (cell.eval_id, [None] * len(columns)))
            cells[number] = cell
    rows = [
        Row(index, eval_id, iteration, tuple(cells), _disagrees(cells), _incomplete(cells))
        for (index, iteration), (eval_id, cells) in sorted(keys.items())
    ]
    if sort == "disagreement":
        rows.sort(key=lambda row: row.order)  # stable: the suite's order within each group
    stats = tuple(column_stats(column) for column in columns)
    differences = tuple(_difference(rows, a, b) for a, b in combinations(range(len(columns)), 2))
    rates = [stat.rate for stat in stats if stat.rate is not None]
    top = max(rates) if rates else None
    # "Best" only beside a variant that did worse: when every variant has the same pass rate, none is.
    best = frozenset(
        i for i, stat in enumerate(stats) if top is not None and stat.rate == top and len(set(rates)) > 1
    )
    finished = all(column.status in FINISHED for column in columns)
    return Grid(tuple(columns), tuple(rows), stats, differences, finished, sort, best)


def column_of_report(key: str, label: str, report: RunReport) -> ColumnIn:
    """A variant played here: its RunReport's conversations as the grid reads them."""
    return ColumnIn(
        key=key,
        label=label,
        model=report.model,
        status=str(report.status),
        cells=[cell_of_result(result) for result in report.evals],
        latencies_ms=[turn.latency_ms for result in report.evals for turn in result.turns if not turn.cached],
        unpriced=report.unpriced,
        stop_reason=report.stop_reason or "",
    )


def no_verdict_reason(status: str, error: str | None, verdict: str | None) -> str:
    """Why a conversation that ended has no verdict, in words, as its transcript's headline says it: an
    error's message, why it was cancelled or skipped; empty for any other."""
    if status == Status.ERROR:
        return error or verdict or "unknown error"
    if status == Status.CANCELLED:
        return verdict or "cancelled"
    if status == Status.SKIPPED:
        return verdict or "not in the source run"
    return ""


def cell_of_result(result: EvalResult) -> CellIn:
    totals = result.totals
    return CellIn(
        index=result.index,
        eval_id=result.id,
        iteration=result.iteration,
        status=str(result.status),
        score=result.score,
        passed_on_turn=result.passed_on_turn,
        model_tokens=totals.total_tokens,
        judge_tokens=totals.judge_tokens,
        user_tokens=totals.user_tokens,
        cost=totals.cost,
        cached_calls=totals.cached_calls,
        saved_cost=totals.saved_cost,
        reason=no_verdict_reason(result.status, result.error, result.verdict),
    )


# --- words and exports ---------------------------------------------------------------------------------------

MARKS = {Status.PASSED: "pass", Status.FAILED: "FAIL", Status.ERROR: "error", Status.CANCELLED: "cancelled"}


def cell_text(cell: CellIn | None) -> str:
    """`pass (turn 2)`, `FAIL 0.40`, `error`, `not started` (its run stopped short first), `cancelled`, `…`
    (not played yet), `—` (the variant has no such eval)."""
    if cell is None:
        return "—"
    if cell.unstarted:
        return NOT_STARTED
    text = MARKS.get(cell.status, "…")
    trivial = cell.score == (1.0 if cell.status == Status.PASSED else 0.0)  # a plain check's pass or fail
    if cell.score is not None and cell.status in GRADED and not trivial:
        text += f" {cell.score:.2f}"
    if cell.status == Status.PASSED and cell.passed_on_turn and cell.passed_on_turn > 1:
        text += f" (turn {cell.passed_on_turn})"
    return text


def stop_text(column: ColumnIn, stats: ColumnStats) -> str:
    """Why a variant's run stopped short and how far it got, as the page says it beside its status: "cost
    limit $0.05 reached — 2 of 20 conversations played, 2 stopped mid-way, 16 not started" ("…; 3 finishing"
    while the conversations in flight finish); "" for a run that did not stop short."""
    if not column.stop_reason:
        return ""
    if column.status not in FINISHED:
        return f"{column.stop_reason}; {stats.total - stats.finished} finishing"
    return f"{column.stop_reason} — {_played(stats.total, stats.cancelled, stats.not_started)}"


def _played(total: int, cancelled: int, not_started: int) -> str:
    words = f"{total - cancelled} of {plural(total, 'conversation')} played"
    words += f", {cancelled - not_started} stopped mid-way" if cancelled > not_started else ""
    return words + (f", {not_started} not started" if not_started else "")


def end_line(
    name: str,
    passed: int,
    failed: int,
    errors: int,
    total: int,
    *,
    stop_reason: str = "",
    cancelled: int = 0,
    not_started: int | None = 0,
) -> str:
    """A variant's end, as `evalsite run --model a,b` says it, here or on a server: `[1/3] gpt-4o: 9 passed,
    1 failed, 0 errors of 10`; a variant its cost limit stopped says what it did not play and why: `…,
    0 errors, 2 stopped, 16 not started (cost limit $0.05 reached) of 20`, as a run's summary counts them.
    `not_started`: of the `cancelled`, those never started; None when that is not known (a server that does
    not say it), and then they are counted together as not played."""
    short = ""
    if stop_reason and not_started is None:
        short += f", {cancelled} not played" if cancelled else ""
    elif stop_reason:
        short += f", {cancelled - not_started} stopped" if cancelled > not_started else ""
        short += f", {not_started} not started" if not_started else ""
    short += f" ({stop_reason})" if stop_reason else ""
    return f"{name}: {passed} passed, {failed} failed, {plural(errors, 'error')}{short} of {total}"


def rate_text(stats: ColumnStats) -> str:
    if stats.rate is None:
        return "—"
    return f"{stats.rate:.0%} [{stats.low:.0%}–{stats.high:.0%}]"


def ms_text(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def _summary_fields(grid: Grid) -> list[tuple[str, Callable[[ColumnIn, ColumnStats], str]]]:
    """Each figure of a variant's line: its heading and how it reads. The simulated user's tokens, and the
    response cache's calls and savings, only when a variant has some, as a run's summary says the cache only
    when it answered: most suites have neither, and a column of zeros would say nothing."""
    fields: list[tuple[str, Callable[[ColumnIn, ColumnStats], str]]] = [
        ("pass rate [95%]", lambda column, stats: rate_text(stats)),
        ("passed", lambda column, stats: f"{stats.passed}/{stats.graded}"),
        ("mean score", lambda column, stats: "—" if stats.mean_score is None else f"{stats.mean_score:.2f}"),
        ("model tokens", lambda column, stats: f"{stats.model_tokens:,}"),
        ("judge tokens", lambda column, stats: f"{stats.judge_tokens:,}"),
    ]
    if any(stats.user_tokens for stats in grid.stats):
        fields.append(("simulated-user tokens", lambda column, stats: f"{stats.user_tokens:,}"))
    fields.append(("cost", lambda column, stats: column.cost_text(stats.cost)))
    if any(stats.cached_calls for stats in grid.stats):
        fields += [
            ("cached calls", lambda column, stats: f"{stats.cached_calls:,}"),
            ("saved", lambda column, stats: f"${stats.saved_cost:.4f}"),
        ]
    fields += [
        ("p50", lambda column, stats: ms_text(stats.p50_ms)),
        ("p95", lambda column, stats: ms_text(stats.p95_ms)),
    ]
    return fields


def summary_header(grid: Grid) -> list[str]:
    return ["variant", *(heading for heading, _ in _summary_fields(grid))]


def summary_rows(grid: Grid) -> list[list[str]]:
    """A line per variant: its name, then each figure of summary_header."""
    fields = _summary_fields(grid)
    return [
        [column.label, *(text(column, stats) for _, text in fields)]
        for column, stats in zip(grid.columns, grid.stats, strict=True)
    ]


def difference_lines(grid: Grid) -> list[str]:
    """A sentence per pair of variants that differ beyond chance."""
    lines = []
    for difference in grid.significant():
        better = grid.columns[difference.better].label
        worse = grid.columns[
            difference.second if difference.better == difference.first else difference.first
        ].label
        wins = max(difference.first_only, difference.second_only)
        losses = min(difference.first_only, difference.second_only)
        if any(row.iteration for row in grid.rows):  # evals of several iterations: compared by pass rate
            lines.append(
                f"{better} beats {worse}: passed more often on {plural(wins, 'eval')}, less often on {losses} "
                f"(exact sign test over evals, p = {difference.p_value:.3g})"
            )
            continue
        lines.append(
            f"{better} beats {worse}: passed {plural(wins, 'eval')} it failed, failed {losses} it passed "
            f"(exact McNemar p = {difference.p_value:.3g})"
        )
    return lines


# Each variant's columns in the CSV, after the row's eval, iteration and agreement.
CSV_CELL_COLUMNS = (
    "status", "score", "passed_on_turn", "model_tokens", "judge_tokens", "user_tokens", "cost", "cached_calls",
    "saved_cost",
)  # fmt: skip


def _csv_cell(cell: CellIn | None) -> list:
    if cell is None:
        return [""] * len(CSV_CELL_COLUMNS)
    return [
        cell.status, "" if cell.score is None else cell.score, cell.passed_on_turn or "", cell.model_tokens,
        cell.judge_tokens, cell.user_tokens, round(cell.cost, 8), cell.cached_calls, round(cell.saved_cost, 8),
    ]  # fmt: skip


def grid_csv(grid: Grid) -> str:
    """A row per eval (per iteration): for each variant its status, score, the turn it passed on, the tokens
    of the model, the judges and the simulated user apart, the cost of all three, and its calls answered
    from the response cache with what they saved."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["eval", "iteration", "disagree"]
    for column in grid.columns:  # a label is the user's text: it may start like a formula
        label = spreadsheet_text(column.label)
        header += [f"{label} {name}" for name in CSV_CELL_COLUMNS]
    writer.writerow(header)
    for row in grid.rows:
        agreement = "yes" if row.disagrees else "incomplete" if row.incomplete else "no"
        line: list = [spreadsheet_text(row.eval_id), row.iteration, agreement]
        for cell in row.cells:
            line += _csv_cell(cell)
        writer.writerow(line)
    return out.getvalue()


def row_mark(row: Row) -> str:
    """The word a row carries beside its cells, as the page's badge says it: `differs` when two variants'
    verdicts differ, `incomplete` when a variant has none to compare (an error, a cancelled conversation),
    else nothing."""
    return "differs" if row.disagrees else "incomplete" if row.incomplete else ""


def agreement_line(grid: Grid) -> str:
    """How many evals end differently across the variants, and how many more have a cell with no verdict to
    compare, in the page's words; said "so far" while a variant still plays."""
    rows = len(grid.rows)
    differ = sum(row.disagrees for row in grid.rows)
    incomplete = sum(row.incomplete and not row.disagrees for row in grid.rows)
    line = f"{differ} of {plural(rows, 'eval')} end differently across variants"
    line += " so far" if not grid.finished else ""
    if incomplete:
        line += (
            f"; {incomplete} more {'has' if incomplete == 1 else 'have'} a cell with no verdict to compare (an "
            "error, or cancelled)"
        )
        line += ", listed after them" if grid.sort == "disagreement" else ""
    return line + "."


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def partial_note(grid: Grid) -> list[str]:
    """While a variant still plays (an export of a matrix on a server taken mid-way), a line that says its
    figures are so far; nothing once every variant has ended."""
    if grid.finished:
        return []
    playing = [column.label for column in grid.columns if column.status not in FINISHED]
    done = sum(stats.finished for stats in grid.stats)
    total = sum(stats.total for stats in grid.stats)
    return [
        f"Partial, so far: {done} of {plural(total, 'conversation')} ended; still playing: "
        f"{', '.join(playing)}. These figures change as the rest end."
    ]


def grid_markdown(grid: Grid, limit: int = 200) -> str:
    """The per-variant summary, the differences beyond chance, how many evals end differently, then the grid
    in the grid's order (verdicts that differ first, marked `differs`, then evals a variant has no verdict on,
    marked `incomplete`); while a variant still plays, a line first that says the figures are so far."""
    header = summary_header(grid)
    note = partial_note(grid)
    lines = [*(f"**{_md(line)}**" for line in note), *([""] if note else [])]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in summary_rows(grid)]
    differences = difference_lines(grid)
    lines += (
        ["", *(f"- {line}" for line in differences)] if differences else ["", "No difference beyond chance."]
    )
    if grid.rows:
        lines += ["", agreement_line(grid)]
    # The last column, headed by nothing, is the row's mark: `differs` or `incomplete`, as on the page.
    lines += ["", "| eval | " + " | ".join(_md(column.label) for column in grid.columns) + " |  |"]
    lines.append("|" + "---|" * (len(grid.columns) + 2))
    for row in grid.rows[:limit]:
        cells = [cell_text(cell) for cell in row.cells]
        lines.append(f"| {_md(row.name)} | " + " | ".join([*cells, row_mark(row)]) + " |")
    if len(grid.rows) > limit:
        lines.append(f"\n…and {len(grid.rows) - limit} more evals.")
    return "\n".join(lines) + "\n"


def matrix_junit(documents: Sequence[tuple[str, str]]) -> str:
    """One JUnit document with a testsuite per variant: each (label, the variant's run as junit_xml) merged,
    its testsuite named after the variant so CI lists each model apart."""
    root = ET.Element("testsuites", name="evalsite matrix")
    counts = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    for label, document in documents:
        for suite in ET.fromstring(document).iter("testsuite"):
            suite.set("name", f"{suite.get('name')} [{label}]")
            for case in suite.iter("testcase"):
                case.set("classname", f"{case.get('classname')} [{label}]")
            for key in counts:
                counts[key] += int(suite.get(key, "0"))
            total_time += float(suite.get("time", "0") or 0)
            root.append(suite)
    for key, value in counts.items():
        root.set(key, str(value))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def grid_text(grid: Grid, limit: int = 50) -> str:
    """The terminal's table: each variant's figures, the differences beyond chance, how many evals end
    differently, then the grid, evals in the grid's order (verdicts that differ first, marked `differs`, then
    evals a variant has no verdict on, marked `incomplete`)."""
    summary = [summary_header(grid), *summary_rows(grid)]
    lines = _aligned(summary)
    differences = difference_lines(grid)
    lines += (
        ["", *differences] if differences else ["", "No difference between two variants is beyond chance."]
    )
    shown = grid.rows[:limit]
    if shown:
        lines += ["", agreement_line(grid)]
    # The last column, headed by nothing, is the row's mark: `differs` or `incomplete`, as on the page.
    table = [["eval", *(column.label for column in grid.columns), ""]]
    table += [[row.name, *(cell_text(cell) for cell in row.cells), row_mark(row)] for row in shown]
    lines += ["", *_aligned(table)]
    if len(grid.rows) > limit:
        lines.append(f"…and {len(grid.rows) - limit} more evals (--csv or --markdown has them all)")
    return "\n".join(lines)


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
