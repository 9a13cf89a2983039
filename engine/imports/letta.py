"""Letta Evals suite.yaml + dataset → evalsite.

What has an evalsite equivalent is converted:

- the dataset's rows (`input` string or list, `ground_truth` string or per-turn list, `id`, `tags`) become
  a JSONL dataset attached to the suite; `max_samples` and `sample_tags` are applied to it;
- one grader (the one the gate uses, else the first): tool graders `exact_match`, `contains`,
  `regex_match` keep their name; rubric / model_judge graders become `grader: llm_judge` with a `rubric`
  built like Letta's judge prompt (the rubric text, then the question, the ground truth and the
  submission) and `judge:` their model; `rubric_vars` are filled into per-row rubrics;
- the extractor (`last_assistant`, `first_assistant`, `all_assistant`, `last_turn`, `pattern`,
  `after_marker`, with their `extractor_config`);
- the gate (`avg_score`, `min`, `p95`, `accuracy` with ops gte/gt/lte/lt/eq; an AND of such conditions),
  accuracy values in percent becoming shares, and its per-sample `pass_threshold`.

Everything else is reported: the target (evalsite tests a chat model, not a Letta agent), other graders,
custom grader functions and extractors that read tool calls or agent memory, OR gates, `num_runs`, ...
"""

from __future__ import annotations

import csv
import io
import json
import re

from pydantic import ValidationError

from engine import patterns
from engine.bounds import loads_json
from engine.schema import Extractor
from engine.text import plural

from . import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_text,
    basename,
    dataset_too_big,
    find_file,
    safe_file_name,
    short,
    unique_id,
)

TOOL_GRADERS = ("exact_match", "contains", "regex_match")
JUDGE_KINDS = ("model_judge", "rubric", "letta_judge")
AGGREGATIONS = {"avg_score": "avg", "avg": "avg", "min": "min", "p95": "p95", "accuracy": "accuracy"}
OPS = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<", "eq": "==", ">=": ">=", ">": ">", "<=": "<=", "<": "<"}
OPS["=="] = "=="
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
HANDLED_TOP = ("name", "description", "dataset", "target", "graders", "grader", "gate", "reward",
               "max_samples", "sample_tags")  # fmt: skip
NOT_CONVERTED_TOP = {
    "num_runs": "evalsite runs each eval once per run: launch the suite several times instead",
    "max_concurrent": "concurrency is chosen when a run is launched",
    "output": "results are stored by evalsite",
    "cleanup": "evalsite creates no agents",
    "setup_script": "evalsite runs no setup scripts",
    "sandbox": "evalsite runs no sandboxes",
}


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    suite_name = as_text(data.get("name")) or re.sub(r"\.(ya?ml)$", "", name, flags=re.IGNORECASE)
    dataset_ref = data.get("dataset")
    if not isinstance(dataset_ref, str) or not dataset_ref.strip():
        raise ImportProblem(f"{name} names no `dataset`: a Letta suite needs its dataset file")
    if dataset_ref.startswith(("http://", "https://", "hf://")):
        raise ImportProblem(
            f"{name} reads its dataset from {dataset_ref}: download the file and upload it together with "
            f"{name}"
        )
    found = find_file(files, dataset_ref)
    if found is None:
        raise ImportProblem(
            f"{name} names the dataset `{dataset_ref}`, which was not uploaded: upload "
            f"{basename(dataset_ref)} together with {name}"
        )
    dataset_name, dataset_text = found
    dataset_too_big(dataset_name, dataset_text)

    top: list[Section] = []
    header = [
        f"Imported from Letta Evals {name} (+ {dataset_name}) by evalsite.",
    ]
    top.append(Section("name", suite_name[:200]))
    report.map("name → name" if data.get("name") else f"(no name) → name: {suite_name} (from the file name)")
    if as_text(data.get("description")):
        top.append(Section("description", as_text(data["description"])))
        report.map("description → description")

    top.extend(_target(data.get("target"), report))

    graders = _graders(data, report)
    gate = data.get("gate")
    preferred, named_by = _gate_metric(gate), "gate"
    if preferred is None:
        preferred, named_by = _reward_metric(data.get("reward")), "reward"
    primary, spec, grading = _choose_grader(graders, preferred, named_by, report)
    rubric_prompt: str | None = None
    if grading["grader"] == "llm_judge":
        rubric_prompt = _rubric_prompt(primary, spec, files, report)

    rows, total = _read_rows(dataset_name, dataset_text, report)
    rows = _select(rows, data, report)
    if not rows:
        raise ImportProblem(f"{dataset_name}: no row is left once sample_tags / max_samples are applied")
    out_rows = _convert_rows(rows, grading["grader"], rubric_prompt, files, report)
    if not out_rows:
        raise ImportProblem(f"{dataset_name}: no row could be converted — {'; '.join(report.problems())}")
    out_name = safe_file_name(
        re.sub(r"\.(jsonl|csv|json)$", "", dataset_name, flags=re.IGNORECASE) + ".jsonl"
    )
    dataset_out = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in out_rows)
    kept = f"{len(out_rows)} of {plural(total, 'row')}" if len(out_rows) != total else plural(total, "row")
    report.map(f"dataset: {dataset_ref} → dataset: {out_name} ({kept}, attached to the suite)")

    label = spec.get("display_name")
    named = f" (“{label}”)" if isinstance(label, str) and label else ""
    grader_comment = [f"graders.{primary}{named}: {grading['described']}"]
    if grading.get("judge"):
        top.append(
            Section("judge", grading["judge"], comments=[f"graders.{primary}.model"], blank_before=True)
        )
    top.append(Section("grader", grading["grader"], comments=grader_comment, blank_before=True))
    if grading.get("extractor") is not None:
        top.append(Section("extractor", grading["extractor"]))
    if rubric_prompt is not None:
        top.append(
            Section(
                "rubric",
                rubric_template(rubric_prompt, None, with_truth=True),
                comments=[
                    "Letta's judge prompt: the rubric, then the question, the ground truth and the submission"
                ],
            )
        )
    elif grading["grader"] == "llm_judge":
        top.append(
            Section(
                "rubric", None, comments=[f"rubric: the judge prompt of graders.{primary} was not uploaded"]
            )
        )

    reward = data.get("reward")
    if isinstance(reward, dict) and reward.get("metric_key") == primary:
        report.map(f"reward (metric {primary}) → the suite's grader; a row's score is that grader's score")
    elif reward is not None:
        report.skip(f"reward: {short(reward, 60)} — evalsite scores a row with its one grader")
    gates, threshold, gate_comment = _gates(gate, primary, report)
    if threshold is not None:
        top.append(
            Section("pass_threshold", threshold, comments=["a row passes when its score reaches this"])
        )
    top.append(
        Section(
            "dataset",
            out_name,
            comments=[f"rows of {dataset_name}; each row is one conversation"],
            blank_before=True,
        )
    )
    if gates:
        top.append(Section("gates", gates, comments=[gate_comment], blank_before=True))

    for key in data:
        if key in HANDLED_TOP:
            continue
        reason = NOT_CONVERTED_TOP.get(key, "not a Letta suite key evalsite knows")
        report.skip(f"{key}: {short(data[key], 60)} — {reason}")
    return header, top, {out_name: dataset_out}


# --- target ---------------------------------------------------------------------------------------------


def _target(target: object, report: Report) -> list[Section]:
    if target is None:
        return []
    if not isinstance(target, dict):
        report.skip(f"target: {short(target)} — evalsite tests a model, not a Letta target")
        return []
    parts = [
        f"{key} {short(target[key], 50)}"
        for key in ("kind", "agent_file", "agent_id", "agent_script", "base_url")
        if key in target
    ]
    report.skip(
        f"target ({', '.join(parts) or 'a Letta agent'}): evalsite sends the conversations straight to a chat "
        "model, not to a Letta agent — its system prompt, memory and tools are not reproduced; set `model` "
        "(and `system`) yourself"
    )
    listed = target.get("model_handles") or target.get("model_configs") or []
    models = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else []
    for key in target:
        if key not in (
            "kind",
            "agent_file",
            "agent_id",
            "agent_script",
            "base_url",
            "model_handles",
            "model_configs",
        ):
            report.skip(f"target.{key}: {short(target[key], 50)} — a Letta agent setting")
    if not models:
        return []
    source = "model_handles" if target.get("model_handles") else "model_configs"
    report.skip(
        f"target.{source} ({', '.join(models)}): the models Letta ran the agent on; evalsite tests one model "
        "per run — `model` is left commented out in the suite"
    )
    return [
        Section(
            "model",
            None,
            comments=[
                f"Letta ran the agent on target.{source}: {', '.join(models)}.",
                "Uncomment to test the bare model (without the agent's prompt, memory or tools):",
                f"model: {models[0]}",
            ],
        )
    ]


# --- graders -------------------------------------------------------------------------------------------


def _graders(data: dict, report: Report) -> dict[str, dict]:
    graders = data.get("graders")
    if isinstance(graders, dict) and graders:
        out = {str(key): spec for key, spec in graders.items() if isinstance(spec, dict)}
        for key, spec in graders.items():
            if not isinstance(spec, dict):
                report.skip(f"graders.{key}: not a mapping, left out")
        if out:
            return out
    legacy = data.get("grader")
    if isinstance(legacy, dict):
        return {"grader": legacy}
    raise ImportProblem("the suite has no `graders`: evalsite needs to know how rows are graded")


def _gate_metric(gate: object) -> str | None:
    if not isinstance(gate, dict):
        return None
    if isinstance(gate.get("metric_key"), str):
        return gate["metric_key"]
    weights = gate.get("weights")
    if isinstance(weights, dict) and weights:
        return str(max(weights, key=lambda key: weights[key] if isinstance(weights[key], int | float) else 0))
    conditions = gate.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        found = _gate_metric(condition)
        if found:
            return found
    return None


def _reward_metric(reward: object) -> str | None:
    if isinstance(reward, dict) and isinstance(reward.get("metric_key"), str):
        return reward["metric_key"]
    return None


def _grading(key: str, spec: dict) -> tuple[dict | None, str]:
    """How evalsite grades like this Letta grader, or (None, why not)."""
    kind = spec.get("kind", "tool")
    problems: list[str] = []
    if kind == "tool":
        function = spec.get("function")
        if function not in TOOL_GRADERS:
            return None, (
                f"tool function {short(function)} is custom Python; evalsite graders are "
                f"{', '.join(TOOL_GRADERS)} and rubric judges"
            )
        grader, described = function, f"tool {function}"
    elif kind in JUDGE_KINDS:
        grader, described = "llm_judge", f"{kind} (LLM judge with a rubric)"
    else:
        return None, f"kind {short(kind)} has no evalsite equivalent"
    extractor, note = _extractor(spec, problems)
    if extractor is _UNSUPPORTED:
        return None, problems[0]
    result = {"grader": grader, "extractor": extractor, "described": f"{described}, extractor {note}"}
    if grader == "llm_judge" and isinstance(spec.get("model"), str):
        result["judge"] = spec["model"]
    result["notes"] = problems
    return result, ""


_UNSUPPORTED = object()


def _extractor(spec: dict, notes: list[str]) -> tuple[object, str]:
    name = spec.get("extractor", "last_assistant")
    if not isinstance(name, str):
        notes.append(f"extractor {short(name)}: not an extractor name")
        return _UNSUPPORTED, short(name)
    config = spec.get("extractor_config") or {}
    if not isinstance(config, dict):
        config = {}
    value: object
    if name in ("last_assistant", "first_assistant"):
        value = name
    elif name == "all_assistant":
        separator = config.get("separator")
        value = (
            {"all_assistant": {"separator": separator}}
            if isinstance(separator, str) and separator != "\n"
            else name
        )
    elif name == "last_turn":
        value = name
        if "separator" in config:
            notes.append(
                "extractor_config.separator of last_turn: an evalsite turn has one reply, nothing to join"
            )
    elif name == "pattern":
        value = {"pattern": config.get("pattern"), "group": config.get("group", 0)}
        if config.get("search_all"):
            notes.append(
                "extractor_config.search_all: evalsite takes the first match in the reply, not all matches"
            )
    elif name == "after_marker":
        value = {"after_marker": config.get("marker")}
        if config.get("include_marker"):
            notes.append(
                "extractor_config.include_marker: evalsite returns the text after the marker, without it"
            )
    else:
        what = {
            "tool_arguments": "tool-call arguments",
            "tool_output": "tool results",
            "memory_block": "the agent's memory blocks",
            "last_compaction": "the agent's compaction messages",
        }.get(name, "custom Python")
        notes.append(f"extractor {short(name)} reads {what}, which evalsite does not have")
        return _UNSUPPORTED, str(name)
    try:
        Extractor.model_validate(value)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        notes.insert(0, f"extractor {name} with {short(config)}: {message}")
        return _UNSUPPORTED, str(name)
    for key in config:
        if key not in ("separator", "pattern", "group", "search_all", "marker", "include_marker"):
            notes.append(f"extractor_config.{key}: not an option evalsite has")
    described = name if not config else f"{name} {short(config, 60)}"
    return (None if value == "last_assistant" else value), described


def _choose_grader(
    graders: dict[str, dict], preferred: str | None, named_by: str, report: Report
) -> tuple[str, dict, dict]:
    """The one grader evalsite keeps: the gate's, else the first that converts."""
    converted: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    for key, spec in graders.items():
        grading, why = _grading(key, spec)
        if grading is None:
            reasons[key] = why
        else:
            converted[key] = grading
    if not converted:
        listed = "; ".join(f"graders.{key}: {why}" for key, why in reasons.items())
        raise ImportProblem(f"no grader of this suite has an evalsite equivalent — {listed}")
    primary = preferred if preferred in converted else next(iter(converted))
    grading = converted[primary]
    why_this = f" (the one the {named_by} uses)" if primary == preferred else ""
    report.map(f"graders.{primary} ({grading['described']}) → grader: {grading['grader']}{why_this}")
    if grading.get("extractor") is not None:
        report.map(f"graders.{primary}.extractor → extractor: {short(grading['extractor'])}")
    if grading.get("judge"):
        report.map(
            f"graders.{primary}.model → judge: {grading['judge']} (a model reference on evalsite's endpoints)"
        )
    for note in grading["notes"]:
        report.skip(f"graders.{primary}: {note}")
    spec = graders[primary]
    for option in ("temperature", "provider", "max_retries", "timeout", "system_prompt", "agent_file", "agent_id",
                   "judge_tool_name"):  # fmt: skip
        if option in spec:
            report.skip(
                f"graders.{primary}.{option}: {short(spec[option], 40)} — evalsite's judge settings apply"
            )
    if preferred and preferred != primary and preferred in graders:
        report.skip(
            f"graders.{preferred}: the {named_by}'s grader — {reasons.get(preferred, 'not converted')}"
        )
    for key in graders:
        if key in (primary, preferred):
            continue
        why = reasons.get(key) or "evalsite grades a dataset with one grader"
        report.skip(f"graders.{key} ({_describe(graders[key])}): not converted — {why}")
    return primary, spec, grading


def _describe(spec: dict) -> str:
    kind = spec.get("kind", "tool")
    return f"tool {spec.get('function')}" if kind == "tool" else str(kind)


def _rubric_prompt(key: str, spec: dict, files: dict[str, str], report: Report) -> str | None:
    if isinstance(spec.get("prompt"), str):
        report.map(
            f"graders.{key}.prompt → rubric (with Letta's question / ground truth / submission sections)"
        )
        return spec["prompt"]
    path = spec.get("prompt_path")
    if isinstance(path, str):
        found = find_file(files, path)
        if found is None:
            report.need(basename(path))
            report.skip(
                f"graders.{key}.prompt_path: {path} was not uploaded — upload it with the suite to build the rubric"
            )
            return None
        report.map(
            f"graders.{key}.prompt_path ({found[0]}) → rubric (with Letta's question / ground truth / submission sections)"
        )
        return found[1]
    report.skip(f"graders.{key}: no `prompt` or `prompt_path`; rows need their own `rubric`")
    return None


def rubric_template(prompt: str, variables: dict | None, *, with_truth: bool) -> str:
    """Letta's judge prompt as an evalsite rubric: rubric_vars filled in, braces kept literal, then the
    question, the ground truth (when the row has one) and the submission."""
    text = prompt
    for name, value in (variables or {}).items():
        text = text.replace("{" + str(name) + "}", value if isinstance(value, str) else json.dumps(value))
    text = text.replace("{", "{{").replace("}", "}}").rstrip()
    parts = [text, "", "## Original question given to the model", "{input}"]
    if with_truth:
        parts += ["", "## Expected answer (ground truth)", "{ground_truth}"]
    parts += ["", "## The submission to evaluate", "{submission}"]
    return "\n".join(parts) + "\n"


# --- the dataset ---------------------------------------------------------------------------------------


def _read_rows(name: str, text: str, report: Report) -> tuple[list[tuple[int, int, dict]], int]:
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


def _select(rows: list[tuple[int, int, dict]], data: dict, report: Report) -> list[tuple[int, int, dict]]:
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


def _convert_rows(
    rows: list[tuple[int, int, dict]],
    grader: str,
    rubric_prompt: str | None,
    files: dict[str, str],
    report: Report,
) -> list[dict]:
    out: list[dict] = []
    taken: set[str] = set()
    per_turn = 0
    generated_ids = 0
    judge = grader == "llm_judge"
    for line, sample_id, row in rows:
        where = f"line {line}"
        text_input = _texts(row.get("input"))
        if text_input is None:
            report.group("rows whose `input` is not text or a list of texts were left out", where)
            continue
        truth = _texts(row.get("ground_truth")) if row.get("ground_truth") is not None else None
        if row.get("ground_truth") is not None and truth is None:
            report.group("rows whose `ground_truth` is not text or a list of texts were left out", where)
            continue
        if isinstance(truth, list) and (not isinstance(text_input, list) or len(truth) != len(text_input)):
            report.group("rows whose `ground_truth` list is not as long as `input` were left out", where)
            continue
        if grader == "regex_match" and not _patterns_compile(truth):
            report.group(
                "rows whose ground_truth is not a valid regular expression were left out (Letta scores them 0)",
                where,
            )
            continue
        if truth is None and not judge:
            report.group(
                "rows without `ground_truth` were left out (Letta scores them 0 with a tool grader)", where
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
        rubric = _row_rubric(row, truth is not None, rubric_prompt, judge, files, where, report)
        if rubric is not None:
            converted["rubric"] = rubric
        elif judge and rubric_prompt is None and not report.needs:
            report.group("rows without a rubric were left out (the grader has no prompt either)", where)
            continue
        if row.get("agent_args"):
            report.group("agent_args (per-row agent settings): evalsite creates no agents", where)
        if row.get("extra_vars"):
            report.group("extra_vars (inputs of custom graders and extractors): not used by evalsite", where)
        for key in row:
            if key not in ROW_KEYS:
                report.group(f"row key `{key}`: not a Letta row field evalsite knows", where)
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
            report.group(f"rubric_path {row['rubric_path']} was not uploaded", where)
        else:
            own = found[1]
    if not judge:
        if variables or own:
            report.group(
                "rubric_vars / rubric: the suite's grader is not a rubric judge, so they are unused", where
            )
        return None
    base = own if own is not None else prompt
    if base is None:
        return None
    if own is None and not variables and has_truth:
        return None  # the suite's rubric applies as is
    if variables:
        report.group("rubric_vars → filled into the row's own rubric", where, mapped=True)
    if own is not None:
        report.group(
            "the row's own rubric → its rubric (with the question / ground truth / submission sections)",
            where,
            mapped=True,
        )
    if not has_truth:
        report.group(
            'rows without ground_truth → a rubric without the ground-truth section and ground_truth ""',
            where,
            mapped=True,
        )
    return rubric_template(base, variables, with_truth=has_truth)


# --- the gate ------------------------------------------------------------------------------------------


def gate_text(gate: object) -> str:
    """A Letta gate in a few words: `answer_check avg_score gte 0.6`, `all of (...)`."""
    if not isinstance(gate, dict):
        return short(gate)
    if gate.get("kind") == "logical":
        conditions = gate.get("conditions") if isinstance(gate.get("conditions"), list) else []
        joined = f" {gate.get('operator', 'and')} ".join(gate_text(c) for c in conditions)
        return f"({joined})"
    if gate.get("kind") == "weighted_average":
        weights = gate.get("weights") if isinstance(gate.get("weights"), dict) else {}
        mix = " + ".join(f"{w}×{k}" for k, w in weights.items())
        return (
            f"weighted {gate.get('aggregation', 'avg_score')} of {mix} {gate.get('op')} {gate.get('value')}"
        )
    aggregation = gate.get("aggregation", gate.get("metric", "avg_score"))
    text = f"{gate.get('metric_key', '')} {aggregation} {gate.get('op')} {gate.get('value')}".strip()
    if gate.get("pass_threshold") is not None:
        text += f" (pass_threshold {gate['pass_threshold']})"
    return text


def _gates(gate: object, primary: str, report: Report) -> tuple[list[dict], float | None, str]:
    if gate is None:
        return [], None, ""
    if not isinstance(gate, dict):
        report.skip(f"gate: {short(gate)} — not a mapping")
        return [], None, ""
    kind = gate.get("kind", "simple")
    described = f"Letta gate: {gate_text(gate)}"
    gates: list[dict] = []
    thresholds: list[float] = []
    if kind == "simple":
        converted = _condition(gate, primary, "gate", report)
        if converted:
            gates.append(converted[0])
            if converted[1] is not None:
                thresholds.append(converted[1])
    elif kind == "weighted_average":
        weights = gate.get("weights")
        if isinstance(weights, dict) and set(weights) == {primary}:
            converted = _condition({**gate, "metric_key": primary}, primary, "gate", report)
            if converted:
                gates.append(converted[0])
        else:
            report.skip(
                f"{described} — a weighted average of several graders' scores has no evalsite equivalent"
            )
    elif kind == "logical":
        conditions = gate.get("conditions") if isinstance(gate.get("conditions"), list) else []
        operator = gate.get("operator", "and")
        if operator != "and" and len(conditions) > 1:
            report.skip(
                f"{described} — evalsite gates must all hold (AND); an OR of conditions cannot be expressed"
            )
        else:
            for index, condition in enumerate(conditions):
                where = f"gate.conditions[{index}]"
                if isinstance(condition, dict) and condition.get("kind") == "logical":
                    report.skip(f"{where}: a nested logical gate has no evalsite equivalent")
                    continue
                converted = _condition(condition, primary, where, report)
                if converted:
                    gates.append(converted[0])
                    if converted[1] is not None:
                        thresholds.append(converted[1])
            if len(gates) < len(conditions):
                report.skip(
                    "gate: only some conditions were converted, so the evalsite gates are more lenient than Letta's"
                )
    else:
        report.skip(f"{described} — gate kind {short(kind)} has no evalsite equivalent")
    threshold = None
    if thresholds:
        threshold = thresholds[0]
        report.map(
            f"gate pass_threshold {threshold:g} → pass_threshold: {threshold:g} (what counts as a passed row)"
        )
        for other in thresholds[1:]:
            if other != threshold:
                report.skip(
                    f"gate pass_threshold {other:g}: evalsite has one pass threshold; kept {threshold:g}"
                )
    return gates, threshold, described


def _condition(
    condition: object, primary: str, where: str, report: Report
) -> tuple[dict, float | None] | None:
    if not isinstance(condition, dict):
        report.skip(f"{where}: not a mapping")
        return None
    metric_key = condition.get("metric_key")
    if metric_key is not None and metric_key != primary:
        report.skip(
            f"{where} on graders.{metric_key}: that grader was not converted, so neither was this condition"
        )
        return None
    aggregation = condition.get("aggregation", condition.get("metric", "avg_score"))
    metric = AGGREGATIONS.get(aggregation) if isinstance(aggregation, str) else None
    if metric is None:
        report.skip(
            f"{where}: aggregation {short(aggregation)} — evalsite gates have avg_score (avg), min, p95 and accuracy"
        )
        return None
    op = OPS.get(condition.get("op", "gte")) if isinstance(condition.get("op", "gte"), str) else None
    value = condition.get("value")
    if op is None or isinstance(value, bool) or not isinstance(value, int | float):
        report.skip(f"{where}: needs an op (gte, gt, lte, lt, eq) and a numeric value")
        return None
    shown = gate_text({**condition, "kind": "simple"})
    if metric == "accuracy":
        if value > 1:
            report.map(
                f"{where} ({shown}) → gates: accuracy {op} {value / 100:g} (Letta counts percent, evalsite a share)"
            )
            value = value / 100
        else:
            report.map(f"{where} ({shown}) → gates: accuracy {op} {value:g} (read as a share of rows)")
    else:
        report.map(f"{where} ({shown}) → gates: {metric} {op} {value:g}")
    threshold = condition.get("pass_threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1
    ):
        report.skip(f"{where}.pass_threshold: {short(threshold)} — expected a score from 0 to 1, ignored")
        threshold = None
    if threshold is not None and metric != "accuracy":
        report.skip(f"{where}.pass_threshold: only used by accuracy gates in Letta, ignored")
        threshold = None
    return {"metric": metric, "op": op, "value": value}, threshold
