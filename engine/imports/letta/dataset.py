"""A Letta dataset's rows (JSONL or CSV): read, selected by `sample_tags` / `max_samples`, and converted to
evalsite dataset rows, each with its own rubric when the grader is a judge."""

from __future__ import annotations

import csv
import io

from engine import patterns
from engine.bounds import loads_json
from engine.text import plural

from ..common import ImportProblem, Report, as_text, basename, find_file, short, unique_id
from .custom import agent_args_text, finite
from .rubrics import rubric_style, rubric_template

ROW_KEYS = (
    "id",
    "input",
    "ground_truth",
    "tags",
    "agent_args",
    "rubric_vars",
    "extra_vars",
    "rubric",
    "rubric_path",
)


def read_rows(name: str, text: str, report: Report) -> tuple[list[tuple[int, int, dict]], int]:
    """(line, Letta's sample id, row) for every row."""
    rows: list[tuple[int, int, dict]] = []
    if name.lower().endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text))
        if "input" not in (reader.fieldnames or []):
            raise ImportProblem(
                f"{name}: the header has no `input` column (columns: {', '.join(reader.fieldnames or [])})"
            )
        try:
            for row in reader:
                rows.append((reader.line_num, len(rows), _csv_row(row)))
        except csv.Error as exc:  # e.g. a field over csv.field_size_limit()
            raise ImportProblem(f"{name} line {reader.reader.line_num} is not valid CSV: {exc}") from None
        report.map(f"{name}: CSV rows → JSONL rows")
    else:
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                row = loads_json(line)
            except ValueError as exc:
                raise ImportProblem(f"{name} line {number} is not valid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ImportProblem(f"{name} line {number}: a row is a JSON object with `input`")
            rows.append((number, len(rows), row))
    if not rows:
        raise ImportProblem(f"{name} has no rows")
    return rows, len(rows)


def _csv_row(row: dict) -> dict:
    out: dict = {}
    extra: dict = {}
    for key, value in row.items():
        if key is None or value in (None, ""):
            continue
        stripped = value.strip()
        parsed: object = value
        if stripped.startswith(("[", "{")):
            try:
                parsed = loads_json(stripped)
            except ValueError:
                parsed = value
        if key in ROW_KEYS:
            if key == "tags" and isinstance(parsed, str):
                parsed = [tag.strip() for tag in parsed.split(",") if tag.strip()]
            out[key] = parsed
        else:
            extra[key] = value  # Letta reads other CSV columns as rubric variables
    if extra:
        out["rubric_vars"] = {**extra, **(out.get("rubric_vars") or {})}
    return out


def select_rows(rows: list[tuple[int, int, dict]], data: dict, report: Report) -> list[tuple[int, int, dict]]:
    tags = data.get("sample_tags")
    if isinstance(tags, list) and tags:
        wanted = {str(tag) for tag in tags}
        before = len(rows)
        rows = [entry for entry in rows if wanted & _tags(entry[2])]
        report.map(
            f"sample_tags {sorted(wanted)} → kept the {len(rows)} of {plural(before, 'row')} tagged so "
            "(evalsite has no run-time tag filter)"
        )
    elif tags is not None:
        report.skip(f"sample_tags: {short(tags)} — expected a list of tags")
    limit = data.get("max_samples")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        if len(rows) > limit:
            report.map(f"max_samples: {limit} → kept the first {limit} of {len(rows)} rows")
            rows = rows[:limit]
        else:
            report.map(f"max_samples: {limit} → all {plural(len(rows), 'row')} kept")
    elif limit is not None:
        report.skip(f"max_samples: {short(limit)} — expected a positive number")
    return rows


def _tags(row: dict) -> set[str]:
    tags = row.get("tags")
    if isinstance(tags, str):
        return {tags}
    return {str(tag) for tag in tags} if isinstance(tags, list) else set()


def _texts(value: object) -> str | list[str] | None:
    if isinstance(value, list):
        texts = [as_text(item) for item in value]
        return None if not texts or any(text is None for text in texts) else texts
    return as_text(value)


def _group(report: Report, source: str, message: str, where: str, **kinds: bool) -> None:
    """A per-row report line, naming the dataset file it comes from."""
    report.group(f"{source}: {message}", where, **kinds)


def convert_rows(
    rows: list[tuple[int, int, dict]],
    grader: str,
    rubric_prompt: str | None,
    files: dict[str, str],
    report: Report,
    *,
    named: bool = False,
    source: str = "dataset",
) -> list[dict]:
    """Rows as evalsite rows. `grader` is the suite's one grader; with several named graders (`named`) it
    is the one needing a ground truth, if any (regex_match first: its truths must compile)."""
    out: list[dict] = []
    taken: set[str] = set()
    per_turn = 0
    generated_ids = 0
    # with several graders, rows get their own rubric for the one judge (rubric_prompt) that has a prompt
    judge = grader == "llm_judge" or (named and rubric_prompt is not None)
    for line, sample_id, row in rows:
        where = f"line {line}"
        text_input = _texts(row.get("input"))
        if text_input is None:
            _group(
                report,
                source,
                "rows whose `input` is not text or a list of texts were left out",
                where,
                lost=True,
            )
            continue
        truth = _texts(row.get("ground_truth")) if row.get("ground_truth") is not None else None
        if row.get("ground_truth") is not None and truth is None:
            _group(
                report,
                source,
                "rows whose `ground_truth` is not text or a list of texts were left out",
                where,
                lost=True,
            )
            continue
        if isinstance(truth, list) and (not isinstance(text_input, list) or len(truth) != len(text_input)):
            _group(
                report,
                source,
                "rows whose `ground_truth` list is not as long as `input` were left out",
                where,
                lost=True,
            )
            continue
        if grader == "regex_match" and not _patterns_compile(truth):
            _group(
                report,
                source,
                "rows whose ground_truth is not a valid regular expression were left out (Letta scores them 0)",
                where,
                lost=True,
            )
            continue
        if truth is None and grader in ("exact_match", "contains", "regex_match"):
            _group(
                report,
                source,
                "rows without `ground_truth` were left out (Letta scores them 0 with a tool grader)",
                where,
                lost=True,
            )
            continue
        converted: dict = {}
        wanted = as_text(row.get("id"))
        if wanted is None:
            wanted = f"sample-{sample_id}"
            generated_ids += 1
        converted["id"] = unique_id(wanted, taken, report, where)
        converted["input"] = text_input
        converted["ground_truth"] = truth if truth is not None else ""
        if isinstance(truth, list):
            per_turn += 1
        tags = row.get("tags")
        if isinstance(tags, list) and tags:
            converted["tags"] = [str(tag) for tag in tags]
        elif isinstance(tags, str) and tags:
            converted["tags"] = [tags]
        rubric = _row_rubric(
            source,
            "named" if named and not judge else "llm_judge" if judge else grader,
            row,
            truth is not None,
            rubric_prompt,
            judge,
            files,
            where,
            report,
        )
        if rubric is not None:
            converted["rubric"] = rubric
        elif judge and rubric_prompt is None and not report.needs:
            _group(
                report,
                source,
                "rows without a rubric were left out (the grader has no prompt either)",
                where,
                lost=True,
            )
            continue
        facts = agent_args_text(row.get("agent_args"))
        if facts is not None:
            converted["_system"] = facts
            _group(
                report,
                source,
                "agent_args → a system message before the row's input (the facts its agent was created with)",
                where,
                mapped=True,
            )
        elif row.get("agent_args"):
            _group(report, source, "agent_args holding only the agent's tags: nothing its agent reads", where)
        extras = {key: row[key] for key in ("agent_args", "rubric_vars", "extra_vars") if row.get(key)}
        if isinstance(
            truth, list
        ):  # a custom grader grades each turn on its own, as Letta's per-turn grading
            extras["per_turn"] = True
        if extras:
            converted["_sample"] = {"id": converted["id"], **finite(extras)}
        for key in row:
            if key not in ROW_KEYS:
                _group(report, source, f"row key `{key}`: not a Letta row field evalsite knows", where)
        out.append(converted)
    if generated_ids:
        report.map(
            f"rows without `id` → id sample-<n>, n being Letta's sample id (the row's 0-based position); {plural(generated_ids, 'row')}"
        )
    if per_turn:
        report.map(
            f"{plural(per_turn, 'row')} with per-turn ground truths (input and ground_truth lists) → per-turn grading: "
            "each turn graded on its own reply, the row's score is the mean"
        )
    multi = sum(
        1 for row in out if isinstance(row["input"], list) and not isinstance(row["ground_truth"], list)
    )
    if multi:
        report.map(f"{multi} multi-turn rows with one ground truth → graded once, on the whole conversation")
    return out


def _patterns_compile(truth: str | list[str] | None) -> bool:
    for pattern in [truth] if isinstance(truth, str) else truth or []:
        try:
            patterns.validate(pattern)
        except patterns.InvalidPattern:
            return False
    return True


def _row_rubric(
    source: str,
    grader: str,
    row: dict,
    has_truth: bool,
    prompt: str | None,
    judge: bool,
    files: dict[str, str],
    where: str,
    report: Report,
) -> str | None:
    variables = row.get("rubric_vars") if isinstance(row.get("rubric_vars"), dict) else None
    own = row.get("rubric") if isinstance(row.get("rubric"), str) else None
    if isinstance(row.get("rubric_path"), str):
        found = find_file(files, row["rubric_path"])
        if found is None:
            report.need(basename(row["rubric_path"]))
            _group(report, source, f"rubric_path {row['rubric_path']} was not uploaded", where, lost=True)
        else:
            own = found[1]
    if grader == "named":
        if variables or own:
            _group(
                report,
                source,
                "rubric_vars / rubric / rubric_path: with several graders a judge's rubric file is shared by every "
                "row, so a row's own rubric or variables are not used ({var} stays as written)",
                where,
                lost=True,
            )
        return None
    if not judge:
        if variables or own:
            _group(
                report,
                source,
                "rubric_vars / rubric: the suite's grader is not a rubric judge, so they are unused",
                where,
            )
        return None
    base = own if own is not None else prompt
    if base is None:
        return None
    if variables:
        _group(report, source, "rubric_vars → filled into the row's own rubric", where, mapped=True)
    if own is not None:
        _group(report, source, "the row's own rubric → its rubric", where, mapped=True)
    as_written = rubric_style(base) == "as_written"
    missing: set[str] = set()
    rubric = rubric_template(base, variables, with_truth=has_truth, missing=missing)
    for name in sorted(missing):
        _group(
            report,
            source,
            f"rubric placeholder {{{name}}}: the row has no rubric_vars.{name}; Letta stops on it, evalsite sends "
            "it as written",
            where,
            lost=True,
        )
    if own is None and not variables and (has_truth or as_written):
        return None  # the suite's rubric applies as is
    if not has_truth and not as_written:
        _group(
            report,
            source,
            'rows without ground_truth → a rubric without the ground-truth section and ground_truth ""',
            where,
            mapped=True,
        )
    return rubric
