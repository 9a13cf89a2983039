"""Datasets: JSONL or CSV files whose rows become evals (Letta's row format).

A row has `input` (a string, or a list of strings for several turns), optional `ground_truth` (a string,
or a list as long as `input`), `id`, `tags`, `rubric` and `messages` (a history before the input). Every row is validated like an eval written in
the suite; bad rows are all reported, each with its line number, and then nothing is loaded.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from pydantic import ValidationError

from .bounds import loads_json, unstorable
from .errors import readable_errors
from .schema import GROUND_TRUTH_KINDS, Eval, check_patterns

MAX_DATASET_BYTES = 20_000_000
MAX_ROWS = 100_000
MAX_REPORTED = 50  # problems listed per file; more would bury the first ones
ROW_KEYS = ("input", "ground_truth", "id", "tags", "rubric", "messages")


class DatasetProblem(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


def _jsonl_rows(text: str) -> Iterator[tuple[int, object]]:
    # Only "\n" ends a JSONL line: splitlines() would also split at U+2028, U+0085 or a form feed, which
    # JSON strings may hold unescaped, and break the row (and every line number after it).
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except ValueError as exc:
            yield number, DatasetProblem(number, f"not valid JSON: {exc}")
            continue
        yield number, row


def _cell(value: str) -> object:
    # A cell holding a JSON list means several turns; anything else is text as written.
    stripped = value.strip()
    if stripped.startswith("["):
        try:
            parsed = loads_json(stripped)
        except ValueError:
            return value
        if isinstance(parsed, list):
            return parsed
    return value


def _csv_rows(text: str) -> Iterator[tuple[int, object]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [key for key in ("input",) if key not in (reader.fieldnames or [])]
    if missing:
        yield (
            1,
            DatasetProblem(
                1, f"the header has no `{missing[0]}` column (columns: {', '.join(reader.fieldnames or [])})"
            ),
        )
        return
    unknown = [key for key in reader.fieldnames or [] if key not in ROW_KEYS]
    if unknown:
        # Said once, at the header, even when the column is empty in every row.
        yield 1, DatasetProblem(1, f"unknown column `{unknown[0]}` (expected {', '.join(ROW_KEYS)})")
        return
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            # E.g. a field over csv.field_size_limit(). DictReader's own line_num is only updated after a row
            # is read.
            line = reader.reader.line_num
            message = (
                f"a field is longer than {csv.field_size_limit():,} characters"
                if "field limit" in str(exc)
                else exc
            )
            yield line, DatasetProblem(line, f"not valid CSV: {message}")
            return
        line = reader.line_num
        data: dict[str, object] = {}
        for key, value in row.items():
            if key is None:
                yield line, DatasetProblem(line, "more cells than header columns")
                break
            if value in (None, ""):
                continue
            if key == "tags":
                data[key] = (
                    _cell(value)
                    if value.strip().startswith("[")
                    else [t.strip() for t in value.split(",") if t.strip()]
                )
            else:
                data[key] = _cell(value) if key in ("input", "ground_truth", "messages") else value
        else:
            yield line, data


def rows_to_evals(
    name: str, text: str, *, grader: str | None = None, rubric: str | None = None, graders=None
) -> tuple[list[Eval], list[DatasetProblem]]:
    """Parse a dataset file. Returns the evals, or the problems (at most MAX_REPORTED) if any row is bad.

    `grader` and `rubric` are the suite's defaults (rows cannot name a grader): with llm_judge every row
    needs a rubric, its own or the suite's; with regex_match every ground truth must be a valid regex.
    `graders` are the suite's named graders: they grade every row, and those that compare with a ground
    truth need one in each row."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DATASET_BYTES:
        return [], [DatasetProblem(0, f"larger than {MAX_DATASET_BYTES // 1_000_000} MB")]
    lowered = name.lower()
    if lowered.endswith(".jsonl"):
        rows = _jsonl_rows(text)
    elif lowered.endswith(".csv"):
        rows = _csv_rows(text)
    else:
        return [], [DatasetProblem(0, "a dataset is a .jsonl or .csv file")]
    evals: list[Eval] = []
    problems: list[DatasetProblem] = []
    for count, (line, row) in enumerate(rows, start=1):
        if count > MAX_ROWS:
            problems.append(DatasetProblem(line, f"more than {MAX_ROWS} rows"))
            break
        if isinstance(row, DatasetProblem):
            problems.append(row)
        elif not isinstance(row, dict):
            problems.append(DatasetProblem(line, "a row is a JSON object with `input` and `ground_truth`"))
        elif unknown := [key for key in row if key not in ROW_KEYS]:
            problems.append(
                DatasetProblem(line, f"unknown column `{unknown[0]}` (expected {', '.join(ROW_KEYS)})")
            )
        elif "input" not in row:
            problems.append(DatasetProblem(line, "missing `input`"))
        elif problem := unstorable(row):  # a NUL in a CSV cell, `"\u0000"` or `"\ud800"` in JSON
            problems.append(DatasetProblem(line, problem))
        else:
            try:
                ev = Eval.model_validate(row)
            except ValidationError as exc:
                error = readable_errors(exc, Eval, row)[0]
                where = ".".join(str(part) for part in error.loc)
                problems.append(DatasetProblem(line, f"{where}: {error.message}" if where else error.message))
            else:
                if problem := _row_grading_problem(ev, grader, rubric, graders or {}):
                    problems.append(DatasetProblem(line, problem))
                else:
                    evals.append(ev)
        if len(problems) >= MAX_REPORTED:
            problems.append(DatasetProblem(line, f"stopped after {MAX_REPORTED} problems"))
            break
    if not evals and not problems:
        problems.append(DatasetProblem(0, "the dataset has no rows"))
    return ([] if problems else evals), problems


def _row_grading_problem(ev: Eval, grader: str | None, rubric: str | None, graders) -> str | None:
    if not ev.graded_alone and not graders:
        return ev.ungraded
    for grader_name, named in graders.items():
        if named.kind in GROUND_TRUTH_KINDS:
            if ev.ground_truth is None:
                return f"graded by `{grader_name}` ({named.kind}), which needs a `ground_truth`"
            if named.kind == "regex_match":
                try:
                    check_patterns(ev.ground_truth)
                except ValueError as exc:
                    return f"{grader_name}: {exc}"
    if grader == "llm_judge" and ev.ground_truth is not None and not (ev.rubric or rubric):
        return "grades with llm_judge (the suite's grader) but has no `rubric`, nor does the suite"
    if grader == "regex_match":
        try:
            check_patterns(ev.ground_truth)
        except ValueError as exc:
            return str(exc)
    return None


def preview(
    name: str,
    text: str,
    limit: int = 5,
    *,
    grader: str | None = None,
    rubric: str | None = None,
    graders=None,
) -> dict:
    """Row count and the first rows, for the editor."""
    evals, problems = rows_to_evals(name, text, grader=grader, rubric=rubric, graders=graders)
    return {
        "rows": len(evals),
        "first": [ev.model_dump(exclude_none=True, exclude_defaults=True) for ev in evals[:limit]],
        "problems": [(problem.line, problem.message) for problem in problems],
    }
