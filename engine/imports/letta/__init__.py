"""Letta Evals suite.yaml + dataset → evalsite.

What has an evalsite equivalent is converted:

- the dataset's rows (`input` string or list, `ground_truth` string or per-turn list, `id`, `tags`) become
  a JSONL dataset attached to the suite; `max_samples` and `sample_tags` are applied to it;
- several graders that convert: each becomes a named evalsite grader, its name kept (`graders:`): tool
  functions `exact_match`, `contains`, `regex_match` by kind, `ascii_printable_only` as a regex check,
  model_judge / rubric judges as `llm_judge` graders whose `rubric_file` is the attached prompt_path (as
  Letta's judge prompt: the rubric, then the question, ground truth and submission), with their model and
  temperature; the gate kept whole (simple on a grader, `weighted_average`, `logical` and / or, nested);
  rows with rubric_vars get their own version of the judge (written as evals: rows cannot carry graders);
- one grader that converts (the one the gate uses, else the first): tool graders `exact_match`,
  `contains`, `regex_match` keep their name; rubric / model_judge graders become `grader: llm_judge` with
  a `rubric` built like Letta's judge prompt and `judge:` / `judge_temperature:` their model and
  temperature; `rubric_vars` are filled into per-row rubrics;
- the extractor (`last_assistant`, `first_assistant`, `all_assistant`, `last_turn`, `pattern`,
  `after_marker`, with their `extractor_config`);
- the gate (`avg_score`, `min`, `p95`, `accuracy` with ops gte/gt/lte/lt/eq), accuracy values in percent
  becoming shares, and its per-sample `pass_threshold`;
- `num_runs` → `iterations`;
- a reward over rows with a ground truth per turn: named graders at threshold 1, the score at which Letta
  marks a turn passed, the reward still the eval's score with no pass line;
- an accuracy gate's pass_threshold over such rows: named graders whose threshold is that line (a row's)
  and whose turn_threshold is 1 (a turn's).

Everything else is reported: the target (evalsite tests a chat model, not a Letta agent), custom grader
functions and extractors that read tool calls or agent memory, `max_concurrent`, ...
"""

from __future__ import annotations

import json
import re

from engine.text import plural

from ..common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_number,
    as_share,
    as_text,
    basename,
    dataset_too_big,
    find_file,
    safe_file_name,
    short,
)
from .custom import agent_file_facts, agent_script_facts, reward_weights
from .dataset import convert_rows, read_rows, select_rows
from .gates import convert_gate, convert_named_gate, gate_text
from .graders import (
    choose_grader,
    find_rubric_prompt,
    gate_metric,
    none_converts,
    read_graders,
    reward_metric,
)
from .named import convertible, named_graders
from .rubrics import judge_sections, rubric_style, rubric_template
from .tools import tool_sections

HANDLED_TOP = ("name", "description", "dataset", "target", "graders", "grader", "gate", "reward",
               "max_samples", "sample_tags", "num_runs")  # fmt: skip
NOT_CONVERTED_TOP = {
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

    top.extend(_target(data.get("target"), files, report))

    graders = read_graders(data, report)
    top.extend(tool_sections(graders, data, files, report))
    threshold = 0.0 if _reward_only(data) else 1.0
    converted = convertible(graders, threshold)
    # Letta marks each turn of a per-turn row passed at a score of 1, whatever line the row passes at (none
    # under a reward, an accuracy gate's pass_threshold): only named graders hold a turn's line apart.
    per_turn = _has_per_turn_rows(dataset_name, dataset_text, data)
    turn_marks = _reward_only(data) and per_turn
    apart = per_turn and any(line != 1 for line in _accuracy_lines(data.get("gate")))
    if turn_marks or apart or len(converted) != 1 or any(g["grader"] == "code" for g in converted.values()):
        return _convert_named(
            name, data, files, report, graders, top, header, dataset_ref, found,
            turn_marks=turn_marks, per_turn=per_turn,
        )  # fmt: skip
    gate = data.get("gate")
    preferred, named_by = gate_metric(gate), "gate"
    if preferred is None:
        preferred, named_by = reward_metric(data.get("reward")), "reward"
    primary, spec, grading = choose_grader(graders, preferred, named_by, report)
    rubric_prompt: str | None = None
    if grading["grader"] == "llm_judge":
        rubric_prompt = find_rubric_prompt(primary, spec, files, report)

    rows, total = read_rows(dataset_name, dataset_text, report)
    rows = select_rows(rows, data, report)
    if not rows:
        raise ImportProblem(f"{dataset_name}: no row is left once sample_tags / max_samples are applied")
    out_rows = convert_rows(rows, grading["grader"], rubric_prompt, files, report, source=dataset_name)
    for index, row in enumerate(out_rows):
        row.pop("_sample", None)  # extra_vars and rubric_vars are for custom graders, and this suite has none
        out_rows[index] = _with_facts(row)
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
    temperature = spec.get("temperature")
    if grading["grader"] == "llm_judge" and _is_temperature(temperature):
        top.append(Section("judge_temperature", temperature))
        report.map(f"graders.{primary}.temperature → judge_temperature: {temperature:g} (the suite's judge)")
    top.append(Section("grader", grading["grader"], comments=grader_comment, blank_before=True))
    if grading.get("extractor") is not None:
        top.append(Section("extractor", grading["extractor"]))
    if rubric_prompt is not None:
        top.extend(judge_sections(rubric_prompt, spec, primary, report))
        top.append(
            Section(
                "rubric",
                rubric_template(rubric_prompt, None, with_truth=True),
                comments=[f"graders.{primary}"],
            )
        )
    elif grading["grader"] == "llm_judge":
        top.append(
            Section(
                "rubric", None, comments=[f"rubric: the judge prompt of graders.{primary} was not uploaded"]
            )
        )

    reward = data.get("reward")
    gates, threshold, gate_comment = convert_gate(gate, primary, report)
    if _reward_only(data):
        threshold = 0.0
        if isinstance(reward, dict) and reward.get("metric_key") not in (None, primary):
            report.map(
                f"reward (metric {reward.get('metric_key')}): names no grader of the suite; its one grader "
                f"{primary} gives the score"
            )
        report.map(
            f"reward → the eval's score is graders.{primary}'s; pass_threshold: 0 (Letta's reward is a score "
            "with no pass line, so no eval fails on it: compare scores)"
        )
    elif reward is not None:
        report.skip(f"reward: {short(reward, 60)} — the gate decides, as it did in Letta")
    if threshold is not None:
        note = (
            "Letta's reward has no pass line"
            if _reward_only(data)
            else "a row passes when its score reaches this"
        )
        top.append(Section("pass_threshold", threshold, comments=[note]))
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

    top.extend(_iterations(data, report))
    _rest(data, report)
    return header, top, {out_name: dataset_out}


def _reward_only(data: dict) -> bool:
    """Today's Letta: a `reward` (a score per sample) and no `gate` (a pass line), so nothing fails."""
    return data.get("reward") is not None and data.get("gate") is None


def _has_per_turn_rows(dataset_name: str, dataset_text: str, data: dict) -> bool:
    """Whether a row kept by sample_tags / max_samples has a ground truth per turn. Read apart, reporting
    nothing: the conversion reads the rows again, and says what is wrong with them where it always does."""
    try:
        rows, _ = read_rows(dataset_name, dataset_text, Report())
    except ImportProblem:
        return False
    return any(isinstance(row.get("ground_truth"), list) for _, _, row in select_rows(rows, data, Report()))


def _accuracy_lines(gate: object) -> list[float]:
    """The pass_thresholds of a gate's accuracy conditions, nested ones too: the score a row needs to count
    as passed."""
    if not isinstance(gate, dict):
        return []
    if gate.get("kind") == "logical":
        conditions = gate.get("conditions") if isinstance(gate.get("conditions"), list) else []
        return [line for condition in conditions for line in _accuracy_lines(condition)]
    line = as_share(gate.get("pass_threshold"))
    aggregation = gate.get("aggregation", gate.get("metric"))
    return [line] if line is not None and aggregation == "accuracy" else []


def _with_facts(row: dict) -> dict:
    """The row with its agent's facts (agent_args) as a system message before its input."""
    facts = row.pop("_system", None)
    if facts is None:
        return row
    return {"id": row["id"], "messages": [{"role": "system", "content": facts}], **row}


def _graders_comment(graders: dict[str, dict], named: dict[str, dict], report: Report) -> list[str]:
    """The comment above `graders:`: Letta's display names, which evalsite graders have no key for."""
    lines = ["Letta's graders, by name; every row is graded by each"]
    for key in named:
        label = graders[key].get("display_name")
        if isinstance(label, str) and label:
            lines.append(f"{key}: “{label}”")
            report.map(f"graders.{key}.display_name → a comment above `graders`")
    return lines


def _is_temperature(value: object) -> bool:
    number = as_number(value)
    return number is not None and 0 <= number <= 2


def _iterations(data: dict, report: Report) -> list[Section]:
    runs = data.get("num_runs")
    if runs is None:
        return []
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 1000:
        report.skip(f"num_runs: {short(runs)} — expected a number of runs from 1 to 1000")
        return []
    report.map(f"num_runs: {runs} → iterations: {runs} (every eval run {runs} times, with statistics)")
    return [Section("iterations", runs, blank_before=True)]


def _rest(data: dict, report: Report) -> None:
    for key in data:
        if key in HANDLED_TOP:
            continue
        reason = NOT_CONVERTED_TOP.get(key, "not a Letta suite key evalsite knows")
        report.skip(f"{key}: {short(data[key], 60)} — {reason}")


def _convert_named(
    name: str,
    data: dict,
    files: dict[str, str],
    report: Report,
    graders: dict[str, dict],
    top: list[Section],
    header: list[str],
    dataset_ref: str,
    found: tuple[str, str],
    *,
    turn_marks: bool = False,
    per_turn: bool = False,
) -> Converted:
    """Each grader that converts becomes a named grader (several, Python ones as code checks, or one whose
    rows need their own version of it), every row is graded by every grader, and the gate is kept whole
    (weighted averages, and / or of conditions) or the reward becomes the pass rule. `turn_marks`: a reward
    over rows graded turn by turn, whose turns each grader marks passed at 1, as Letta does. `per_turn`:
    rows graded turn by turn, whose turns a grader with another line (a gate's pass_threshold) still marks
    passed at 1."""
    dataset_name, dataset_text = found
    reward_only = _reward_only(data)
    grader_line = 1.0 if turn_marks or not reward_only else 0.0
    named, attached, prompts = named_graders(graders, files, report, grader_line)
    if not named:
        raise none_converts(graders)
    if turn_marks:
        for spec in named.values():
            spec["threshold"] = 1.0
        report.map(
            "rows with a ground truth per turn, under a reward → each grader's threshold: 1, the score at "
            "which Letta marks a turn passed; the eval's score is still the reward, which no eval fails on"
        )
    thresholds: dict[str, float] = {}
    gates = convert_named_gate(data.get("gate"), set(named), report, thresholds)
    for key, threshold in thresholds.items():
        named[key]["threshold"] = threshold
        code = named[key].get("check", {}).get("code") if named[key]["kind"] == "check" else None
        if isinstance(code, dict):
            code["threshold"] = threshold
        report.map(f"gate pass_threshold {threshold:g} on {key} → graders.{key}.threshold: {threshold:g}")
        if per_turn and threshold != 1:
            named[key]["turn_threshold"] = 1.0
            report.map(
                f"rows with a ground truth per turn → graders.{key}.turn_threshold: 1, the score at which Letta "
                f"marks a turn passed; the row passes at the gate's pass_threshold {threshold:g}"
            )
    reward_rule = _reward_rule(data, named, files, report) if reward_only else None
    if data.get("reward") is not None and not reward_only:
        report.skip(f"reward: {short(data['reward'], 60)} — the gate decides, as it did in Letta")
    judges = [key for key, spec in named.items() if spec["kind"] == "llm_judge"]
    written = [key for key in judges if key in prompts]
    if written:
        top.extend(judge_sections(prompts[written[0]], graders[written[0]], written[0], report))
        for key in written[1:]:
            if rubric_style(prompts[key]) != rubric_style(prompts[written[0]]):
                report.lose(
                    f"graders.{key}: its rubric is written for another Letta version than graders.{written[0]}'s; "
                    "evalsite sends every rubric of a suite one way, so the judge does not see it as Letta sent it"
                )
    kinds = {spec["kind"] for spec in named.values()}
    truth_kind = next((k for k in ("regex_match", "exact_match", "contains") if k in kinds), None)
    rows, total = read_rows(dataset_name, dataset_text, report)
    rows = select_rows(rows, data, report)
    if not rows:
        raise ImportProblem(f"{dataset_name}: no row is left once sample_tags / max_samples are applied")
    prompt = prompts.get(judges[0]) if len(judges) == 1 else None
    out_rows = convert_rows(
        rows, truth_kind or "named", prompt, files, report, named=True, source=dataset_name
    )
    if not out_rows:
        raise ImportProblem(f"{dataset_name}: no row could be converted — {'; '.join(report.problems())}")
    coded = [
        key for key, spec in named.items() if isinstance(spec.get("check"), dict) and "code" in spec["check"]
    ]
    for row in out_rows:
        sample = row.pop("_sample", None)
        if sample and coded:
            # Letta's Sample carries the row's agent_args, rubric_vars and extra_vars to a custom grader.
            row.setdefault("graders", {})
            for key in coded:
                own = json.loads(json.dumps(named[key]))
                own["check"]["code"].setdefault("config", {})["sample"] = sample
                row["graders"][key] = own
        elif sample and sample.get("extra_vars"):
            report.group(
                "extra_vars: read by custom graders only, and this suite has none", f"row {row['id']}"
            )
    comments = _graders_comment(graders, named, report)
    if turn_marks:
        comments.append("a turn passes at a score of 1 (threshold), as Letta marks it")
    elif any("turn_threshold" in spec for spec in named.values()):
        comments.append("a turn passes at a score of 1 (turn_threshold), as Letta marks it")
    top.append(Section("graders", named, comments=comments, blank_before=True))
    if reward_rule is not None:
        top.append(Section("pass_rule", reward_rule, comments=["Letta's reward"]))
        no_line = "no eval fails on it" if turn_marks else "no grader fails on it"
        top.append(Section("pass_threshold", 0.0, comments=[f"Letta's reward has no pass line: {no_line}"]))
    out_rows = [_with_facts(row) for row in out_rows]
    if any(key in row for row in out_rows for key in ("rubric", "graders")):
        # A row's own rubric (rubric_vars filled in, or its rubric / rubric_path), agent facts or grader
        # inputs make it an eval of its own; dataset rows carry none of these.
        evals = []
        for row in out_rows:
            rubric = row.pop("rubric", None)
            if rubric is not None:
                own = {k: v for k, v in named[judges[0]].items() if k not in ("rubric", "rubric_file")}
                row.setdefault("graders", {})[judges[0]] = {**own, "rubric": rubric}
            evals.append(row)
        report.map(
            f"rows with their own rubric or grader inputs → evals written in the suite (dataset rows carry no "
            f"graders); {plural(len(evals), 'row')}"
        )
        top.extend(_iterations(data, report))
        if gates:
            top.append(Section("gates", gates, comments=[gate_text(data.get("gate"))], blank_before=True))
        top.append(Section("evals", evals, comments=[f"the rows of {dataset_name}"], blank_before=True))
        _rest(data, report)
        return header, top, attached
    out_name = safe_file_name(
        re.sub(r"\.(jsonl|csv|json)$", "", dataset_name, flags=re.IGNORECASE) + ".jsonl"
    )
    dataset_out = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in out_rows)
    kept = f"{len(out_rows)} of {plural(total, 'row')}" if len(out_rows) != total else plural(total, "row")
    report.map(f"dataset: {dataset_ref} → dataset: {out_name} ({kept}, attached to the suite)")
    if judges:
        report.map("judge prompts → rubric files, sent to the judge as Letta sends them")
    top.append(
        Section("dataset", out_name, comments=[f"rows of {dataset_name}; each row is one conversation"])
    )
    top.extend(_iterations(data, report))
    if gates:
        top.append(Section("gates", gates, comments=[gate_text(data.get("gate"))], blank_before=True))
    _rest(data, report)
    return header, top, {**attached, out_name: dataset_out}


def _reward_rule(data: dict, named: dict[str, dict], files: dict[str, str], report: Report) -> dict:
    """Letta's reward as the pass rule: the eval's score is the reward (one grader's score, or a weighted sum
    of them), and no eval fails on it (threshold 0: Letta's reward has no pass line)."""
    reward = data["reward"]
    if not isinstance(reward, dict):
        report.lose(f"reward: {short(reward)} — not a Letta reward (kind metric or custom); the eval's score is "
                    "the mean of its graders")  # fmt: skip
        return {"weighted_average": {k: 1.0 for k in named}, "threshold": 0.0}
    kind = reward.get("kind")
    key = reward.get("metric_key")
    if kind == "custom" or (kind is None and "function" in reward):
        weights, why = reward_weights(reward, files, set(named))
        if weights is not None:
            total = sum(weights.values())
            mix = " + ".join(f"{w:g}×{k}" for k, w in weights.items())
            report.map(f"reward.function {reward['function']} ({mix}) → pass_rule: weighted_average")
            # A score that differs from Letta's: said where every import says it, the suite's header too.
            if abs(total - 1) >= 1e-9:
                report.skip(
                    f"reward.function {reward['function']}: its weights sum to {total:g} and evalsite divides by "
                    f"their sum, so each eval's score is Letta's reward divided by {total:g}"
                )
            return {"weighted_average": weights, "threshold": 0.0}
        report.lose(
            f"reward.function {short(reward.get('function'))}: a custom reward composer evalsite cannot carry — "
            f"{why}; the eval's score is the mean of its graders instead"
        )
        return {"weighted_average": {k: 1.0 for k in named}, "threshold": 0.0}
    if key not in named:
        if len(named) == 1:
            key = next(iter(named))
            report.map(
                f"reward (metric {reward.get('metric_key')}): names no grader; the suite's one grader {key} gives the score"
            )
        else:
            report.lose(
                f"reward.metric_key {short(reward.get('metric_key'))}: not a converted grader; the eval's score is "
                "the mean of its graders instead"
            )
            return {"weighted_average": {k: 1.0 for k in named}, "threshold": 0.0}
    else:
        report.map(f"reward (metric {key}) → pass_rule: the eval's score is graders.{key}'s")
    return {"weighted_average": {key: 1.0}, "threshold": 0.0}


# --- target ---------------------------------------------------------------------------------------------


AGENT_KEYS = ("kind", "agent_file", "agent_id", "agent_script", "base_url", "model_handles", "model_configs")


def _target(target: object, files: dict[str, str], report: Report) -> list[Section]:
    """The Letta agent becomes the model it ran on, with the plain-text facts of its agent file (system
    prompt, memory blocks) as the system message: evalsite talks to a chat model, not to an agent."""
    if target is None:
        return []
    if not isinstance(target, dict):
        report.skip(f"target: {short(target)} — evalsite tests a model, not a Letta target")
        return []
    parts = [f"{key} {short(target[key], 50)}" for key in AGENT_KEYS[:5] if key in target]
    report.skip(
        f"target ({', '.join(parts) or 'a Letta agent'}): evalsite cannot run a Letta agent; it sends the "
        "conversations to the agent's model instead, with the agent's plain-text facts (system prompt, memory "
        "blocks, agent_args) as system messages — its tools, tool rules and memory edits are not reproduced"
    )
    for key in target:
        if key not in AGENT_KEYS:
            report.skip(f"target.{key}: {short(target[key], 50)} — a Letta agent setting")
    system = file_model = None
    if isinstance(target.get("agent_script"), str):
        report.skip(
            f"target.agent_script {target['agent_script']}: evalsite runs no agent factory; the rows' agent_args "
            "it read go in each eval's system message"
        )
        system, file_model = agent_script_facts(target["agent_script"], files, report)
    if isinstance(target.get("agent_id"), str):
        report.skip(
            f"target.agent_id {target['agent_id']}: an agent on a Letta server; its prompt is not carried"
        )
    sections: list[Section] = []
    agent_file = target.get("agent_file")
    if isinstance(agent_file, str):
        found = find_file(files, agent_file)
        if found is None:
            report.skip(
                f"target.agent_file: {agent_file} was not uploaded — upload it to carry its system prompt and "
                "memory blocks"
            )
        else:
            system, file_model = agent_file_facts(found[0], found[1], report)
    origin = basename(agent_file) if isinstance(agent_file, str) else str(target.get("agent_script"))
    listed = target.get("model_handles") or target.get("model_configs") or []
    models = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else []
    source = "model_handles" if target.get("model_handles") else "model_configs"
    if models:
        sections.append(
            Section("model", models[0], comments=[f"target.{source}: the model Letta ran the agent on"])
        )
        report.map(f"target.{source}[0] → model: {models[0]} (the agent's model, without the agent)")
        if len(models) > 1:
            report.skip(
                f"target.{source}[1:] ({', '.join(models[1:])}): evalsite tests one model per run — run the suite "
                "again with --model for each"
            )
    elif file_model is not None:
        sections.append(Section("model", file_model, comments=[f"the model of {origin}"]))
        report.map(f"{origin} → model: {file_model} (the agent's model, without the agent)")
    if system is not None:
        sections.append(Section("system", system, comments=[f"{origin}: system prompt and memory blocks"]))
    return sections
