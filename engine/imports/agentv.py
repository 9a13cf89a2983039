"""AgentV eval YAML → evalsite, the generations before promptfoo's shape: `tests` with `input` / `criteria`
/ `expected_output` / `assertions` (earlier `assert`), v2 `evalcases` with `input_messages` /
`expected_messages` / `evaluators`, and v1 `testcases` with `messages` (the first assistant message the
reference answer). docs/imports.md has the whole table.

A case becomes a `messages` eval the model replies to (file parts attached; they must be uploaded alongside,
since the importer cannot read the user's disk), or, in `mode: conversation`, a `turns` eval whose every
user turn is sent live and graded by its own assertions, with `aggregation` and `on_turn_failure` kept.

AgentV passes a case at a score of 0.8, the weighted mean of its assertions' scores; so the suite passes at
0.8, judges pass at 0.8, and `assertions` become named graders under a weighted pass rule at 0.8, with
`weight` and `required` kept. Text assertions are one rubric judge; `llm-grader` prompts become rubrics with
AgentV's template variables as evalsite placeholders or filled in per case; `contains` / `regex` / … become
check graders with AgentV's case rules; `code-grader` a `code` check in the agentv dialect; a weighted
composite its members. An object `expected_output` is the judge's reference answer, as JSON text. What
grades an agent's tool calls, timings or costs is a listed loss. Targets are reported: evalsite tests the
suite's `model`.
"""

from __future__ import annotations

import json
import math
import re

from engine.history import INSTRUCTIONS_SUFFIX
from engine.transcript import format_transcript

from .agentv_graders import (
    DEFAULT_THRESHOLD,
    Graders,
    default_criteria,
)
from .common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_share,
    as_text,
    attach_reference,
    basename,
    find_file,
    parse_yaml,
    short,
    unique_id,
)

CASE_KEYS = ("id", "outcome", "expected_outcome", "input_messages", "expected_messages", "evaluators", "execution",
             "conversation_id", "note", "rubrics", "input", "expected_output", "criteria", "assertions", "assert",
             "mode", "turns", "aggregation", "on_turn_failure", "reference_answer", "description",
             "metadata", "input_files")  # fmt: skip


def earlier_shape(data: object) -> bool:
    """AgentV's generations before promptfoo's shape: `tests` (a list, or a file of them) with no `prompts`,
    no `providers` and no test `vars` — read here rather than by the promptfoo reader."""
    if not isinstance(data, dict) or {"prompts", "providers"} & set(data):
        return False
    tests = data.get("tests")
    if isinstance(tests, str):
        return tests.startswith("file://") or tests.lower().endswith((".jsonl", ".yaml", ".yml", ".json"))
    if not isinstance(tests, list) or not tests or "evals" in data:
        return False
    cases = [t for t in tests if isinstance(t, dict)]
    return (
        len(cases) == len(tests)
        and not any("vars" in t for t in cases)
        and all(
            {"input", "input_messages", "criteria", "expected_output", "assertions"} & set(t) for t in cases
        )
    )


# AgentV's earlier interpolation of an environment variable, `${{ NAME }}` (empty when it is not set).
ENV_INTERPOLATION = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _environment(value: object, where: str, declared: dict, report: Report) -> object:
    """`${{ NAME }}` in every text as `{{var:NAME}}`, a suite variable given at launch: AgentV read it from the
    environment when it ran."""
    if isinstance(value, str):
        if "${{" not in value:
            return value

        def declare(found: re.Match) -> str:
            name = found.group(1)
            declared.setdefault(name, None)
            report.group(f"${{{{ {name} }}}} → {{{{var:{name}}}}}, a suite variable (no default: give it at launch; "
                         f"evalsite run --var {name}=…)", where, mapped=True)  # fmt: skip
            return f"{{{{var:{name}}}}}"

        return ENV_INTERPOLATION.sub(declare, value)
    if isinstance(value, dict):
        return {key: _environment(item, f"{where}.{key}", declared, report) for key, item in value.items()}
    if isinstance(value, list):
        return [_environment(item, f"{where}[{index}]", declared, report) for index, item in enumerate(value)]
    return value


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    from . import promptfoo

    if promptfoo.shared_shape(data) and not earlier_shape(data):  # today's format, promptfoo's shape
        return promptfoo.convert_agentv(name, data, files, report)
    if name.lower().endswith(".jsonl"):
        data = _with_sidecar(name, data, files, report)
    key = next(
        (k for k in ("tests", "evalcases", "testcases") if isinstance(data.get(k), (list, str))), "tests"
    )
    cases = _external_cases(data.get(key), key, files, report)
    declared: dict[str, None] = {}
    inline = cases is data.get(key)
    cases = _environment(cases, key, declared, report)
    data = {
        k: v if k in ("name", "description", key) else _environment(v, k, declared, report)
        for k, v in data.items()
    }
    if inline:
        data[key] = cases
    if not cases and report.needs:
        raise ImportProblem(
            f"{name} keeps its cases in {', '.join(report.needs)}, which was not uploaded: upload it with {name}"
        )
    if not isinstance(cases, list) or not cases:
        raise ImportProblem(
            f"{name} has no `tests` (or `evalcases`, `testcases`): an AgentV eval file lists its cases under `tests`"
        )
    stem = re.sub(r"\.(ya?ml|jsonl)$", "", name, flags=re.IGNORECASE) or "imported-suite"
    stem = re.sub(r"\.(eval|test)$", "", stem, flags=re.IGNORECASE)
    if stem.lower() in ("eval", "suite", "dataset"):  # `EVAL.yaml` / `evals/suite.yaml`: named by its folder
        stem = "agentv-eval"
    if as_text(data.get("name")):
        stem = as_text(data["name"])
    header = [
        f"Imported from AgentV {name} by evalsite.",
    ]
    sections = [Section("name", stem[:200])]
    if as_text(data.get("name")):
        report.map("name → name")
    else:
        report.map(f"(no name) → name: {stem} (from the file name)")
    if key == "tests":
        report.map(
            "tests → evals (AgentV's `tests` with input / criteria / assertions; `evalcases` and `testcases` are older names)"
        )
    elif key == "testcases":
        report.map(
            "testcases → evals (AgentV's first format: messages, outcome, the assistant message as the reference)"
        )
    if isinstance(data.get("$schema"), str):
        report.map(f"$schema: {data['$schema']} → recognised as an AgentV eval file")
    if as_text(data.get("description")):
        sections.append(Section("description", as_text(data["description"])))
        report.map("description → description")
    if declared:
        sections.append(Section("vars", declared))

    execution = data.get("execution") if isinstance(data.get("execution"), dict) else {}
    for where, target in (("target", data.get("target")), ("execution.target", execution.get("target")),
                          ("execution.targets", execution.get("targets"))):  # fmt: skip
        if target is not None:
            report.skip(
                f"{where}: {short(target)} — an AgentV target (targets.yaml); evalsite tests the suite's `model`: "
                "set it in the suite or when launching"
            )
    defaults = _evaluator_list(
        execution.get("evaluators", data.get("evaluators")), "execution.evaluators", report
    )
    threshold = DEFAULT_THRESHOLD
    if as_share(execution.get("threshold")) is not None:
        threshold = float(execution["threshold"])
        report.map(f"execution.threshold: {threshold:g} → pass_threshold and the pass rules' threshold")
    else:
        report.map(
            "(AgentV passes a case at a score of 0.8) → pass_threshold: 0.8, judges' threshold 0.8 and the "
            "weighted pass rules' threshold 0.8"
        )
    iterations = _trials(execution.get("trials"), "execution.trials", report)
    if iterations is None:
        iterations = _trials(data.get("repeat"), "repeat", report)
    for key_ in execution:
        if key_ not in ("target", "targets", "evaluators", "threshold", "trials"):
            report.skip(f"execution.{key_}: {short(execution[key_], 50)} — not converted")
    suite_assertions = data.get("assertions", data.get("assert"))
    suite_tags = (
        [as_text(t) for t in data.get("tags", []) if as_text(t)] if isinstance(data.get("tags"), list) else []
    )
    if suite_tags:
        report.map("tags → every eval's tags")
    known = ("$schema", "name", "description", "target", "execution", "evaluators", "evalcases", "tests",
             "testcases", "assertions", "assert", "tags", "repeat", "grader", "version", "input_files", "input")  # fmt: skip
    for key_ in data:
        if key_ not in known:
            report.skip(f"{key_}: {short(data[key_], 50)} — not an AgentV key evalsite knows")
    if key == "testcases" and data.get("grader") in (None, "llm_judge"):
        report.map("grader: llm_judge (AgentV v1's default) → an llm_judge check per case on its outcome")
    if key == "testcases" and data.get("grader") == "heuristic":
        report.lose(
            "grader: heuristic — AgentV's keyword-aspect score against the reference answer has no evalsite "
            "equivalent; every case is graded by an llm_judge on its outcome and reference answer instead"
        )

    suite_files = (
        [f for f in data.get("input_files", []) if isinstance(f, str)]
        if isinstance(data.get("input_files"), list)
        else []
    )
    if suite_files:
        report.map("input_files → file parts of every case's user message")
    suite_input = data.get("input")
    if isinstance(suite_input, str):
        suite_input = [{"role": "user", "content": suite_input}]
    elif isinstance(suite_input, dict):
        suite_input = [suite_input]
    suite_input = [m for m in suite_input if isinstance(m, dict)] if isinstance(suite_input, list) else []
    converter = _Cases(
        files, report, defaults, threshold, suite_assertions, suite_tags, suite_files, suite_input
    )
    evals: list[dict] = []
    notes: list[list[str]] = []
    for index, case in enumerate(cases):
        converted = converter.case(case, index, key)
        if converted is not None:
            evals.append(converted[0])
            notes.append(converted[1])
    if not evals:
        raise ImportProblem(f"{name}: no eval case could be converted — {'; '.join(report.problems())}")
    sections.append(
        Section("model", None, comments=["model: set the model under test (AgentV chose it with a target)"])
    )
    sections.append(Section("pass_threshold", threshold))
    if iterations is not None:
        sections.append(Section("iterations", iterations[0]))
        if iterations[1] is not None:
            sections.append(Section("pass_rate_threshold", iterations[1]))
    sections.append(Section("evals", evals, blank_before=True, item_comments=notes))
    live = sum(1 for ev in evals if "turns" in ev)
    report.map(
        f"{key}: {len(evals)} case{'s' if len(evals) != 1 else ''} → evals: "
        + (f"{live} conversation{'s' if live != 1 else ''} of live turns, " if live else "")
        + f"{len(evals) - live} with a given history (`messages`) the model replies to"
    )
    return header, sections, converter.attached


def _with_sidecar(name: str, data: dict, files: dict[str, str], report: Report) -> dict:
    """A JSONL eval file's cases with its sidecar `<name>.yaml` (AgentV reads `dataset` as the name, and
    `description`, `execution` and `evaluator` as every case's defaults)."""
    stem = name[: -len(".jsonl")]
    found = find_file(files, f"{stem}.yaml") or find_file(files, f"{stem}.yml")
    report.map(f"{name}: AgentV's JSONL eval file, a case a line → evals")
    if found is None:
        return data
    sidecar, text = found
    try:
        meta = parse_yaml(sidecar, text)
    except ImportProblem as problem:
        report.skip(f"{sidecar}: {problem} — its defaults left out")
        return data
    if not isinstance(meta, dict):
        report.skip(f"{sidecar}: not a mapping of defaults, left out")
        return data
    merged = dict(data)
    for key in ("description", "execution"):
        if key in meta:
            merged[key] = meta[key]
    if as_text(meta.get("dataset")):
        merged["name"] = meta["dataset"]
    evaluator = meta.get("evaluator")
    if evaluator not in (None, "llm_judge"):
        report.lose(f"{sidecar} evaluator: {short(evaluator, 50)} — only AgentV's default judge is read here")
    report.map(f"{sidecar} (the sidecar of {name}): dataset → name, description, execution → the suite's")
    return merged


def _external_cases(raw: object, key: str, files: dict[str, str], report: Report) -> object:
    """Cases kept in other files (`tests: ./dataset.jsonl`, `tests: file://cases.yaml`, or `- file://more.jsonl`
    among the cases): read from the uploaded files, a YAML list or JSON lines; one not uploaded is asked for."""
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        return raw
    cases: list[object] = []
    for number, item in enumerate(items):
        if not isinstance(item, str):
            cases.append(item)
            continue
        reference = item.removeprefix("file://")
        where = f"{key}[{number}]" if isinstance(raw, list) else key
        found = find_file(files, reference)
        if found is None:
            report.need(basename(reference))
            report.lose(f"{where}: the cases in {reference} were not uploaded — upload it and import again")
            continue
        name, text = found
        loaded: object = None
        try:
            if name.lower().endswith(".jsonl"):
                loaded = [json.loads(line) for line in text.splitlines() if line.strip()]
            else:
                loaded = parse_yaml(name, text)
        except (ValueError, ImportProblem) as exc:
            report.lose(f"{where}: {name} could not be read ({short(str(exc), 80)}), its cases left out")
            continue
        if isinstance(loaded, dict) and isinstance(loaded.get(key), list):
            loaded = loaded[key]
        if not isinstance(loaded, list):
            report.lose(f"{where}: {name} holds no list of cases, left out")
            continue
        report.map(f"{where}: {name} → its {len(loaded)} cases")
        cases.extend(loaded)
    return cases


def _trials(raw: object, where: str, report: Report) -> tuple[int, float | None] | None:
    """`execution.trials` (later `repeat`): {count, strategy} → iterations and the share of passes needed.
    pass@k (`pass_at_k`, `pass_any`) passes when one trial passes; `pass_all` when all do."""
    if raw is None:
        return None
    count = raw.get("count") if isinstance(raw, dict) else raw
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        report.skip(f"{where}: {short(raw, 50)} — no trial count evalsite can read, runs once")
        return None
    count = min(count, 1000)
    strategy = as_text(raw.get("strategy")) if isinstance(raw, dict) else None
    strategy = strategy or "pass_at_k"
    if strategy in ("pass_at_k", "pass_any"):
        share = math.floor(1000 / count) / 1000  # one passing trial of `count` is enough
        report.map(
            f"{where}: {count} trials, {strategy} → iterations: {count}, pass_rate_threshold {share:g} (pass@{count})"
        )
    elif strategy == "pass_all":
        share = 1.0
        report.map(f"{where}: {count} trials, pass_all → iterations: {count}, pass_rate_threshold 1")
    else:
        share = None
        report.skip(
            f"{where}.strategy: {strategy} — AgentV passes on the trials' {strategy.replace('_', ' ')} score; "
            "evalsite passes an iterated eval on the share of passing iterations (pass_rate_threshold, 0.5)"
        )
        report.map(f"{where}: {count} trials → iterations: {count}")
    for key in raw if isinstance(raw, dict) else ():
        if key not in ("count", "strategy"):
            report.skip(f"{where}.{key}: {short(raw[key], 40)} — not converted")
    return count, share


class _Cases(Graders):
    def __init__(
        self,
        files: dict[str, str],
        report: Report,
        defaults: list[dict] | None,
        threshold: float = DEFAULT_THRESHOLD,
        suite_assertions: object = None,
        suite_tags: list[str] | None = None,
        suite_files: list[str] | None = None,
        suite_input: list | None = None,
    ):
        self.files = files
        self.report = report
        self.defaults = defaults
        self.evaluator_of: list[dict] = []  # the evaluator each check of `checks()` came from
        self.threshold = threshold
        self.suite_assertions = suite_assertions if isinstance(suite_assertions, list) else []
        self.suite_tags = suite_tags or []
        self.suite_files = suite_files or []
        self.suite_input = suite_input or []
        self.attached: dict[str, str] = {}
        self.taken: set[str] = set()
        self.used_criteria = False  # the case's criteria went into a grader's rubric

    # -- one case ------------------------------------------------------------------------------------

    def case(self, case: object, index: int, key: str = "evalcases") -> tuple[dict, list[str]] | None:
        report = self.report
        where = f"{key}[{index}]"
        if not isinstance(case, dict):
            report.skip(f"{where}: not a mapping, left out")
            return None
        if key == "testcases":
            case = self.first_format(case, where)
        label = as_text(case.get("id")) or where
        out: dict[str, object] = {}
        if as_text(case.get("id")):
            out["id"] = unique_id(as_text(case["id"]), self.taken, report, where)
        tags = list(self.suite_tags)
        if as_text(case.get("conversation_id")):
            tags.append(f"conversation:{case['conversation_id']}")
            report.group("conversation_id → tag conversation:<id>", label, mapped=True)
        if tags:
            out["tags"] = tags
        conversation = case.get("mode") == "conversation" or isinstance(case.get("turns"), list)
        raw_input = case.get("input_messages", case.get("input"))
        execution = case.get("execution") if isinstance(case.get("execution"), dict) else {}
        input_files = [] if execution.get("skip_defaults") else list(self.suite_files)
        if isinstance(case.get("input_files"), list):
            input_files += [f for f in case["input_files"] if isinstance(f, str)]
        if input_files:
            raw_input = _with_files(raw_input, input_files)
            report.group("input_files → file parts before the user message's text", label, mapped=True)
        if isinstance(raw_input, str):  # the shorthand: one user message
            raw_input = [{"role": "user", "content": raw_input}]
            report.group("input (a string) → one user message", label, mapped=True)
        elif isinstance(raw_input, dict) and "role" in raw_input:
            raw_input = [raw_input]
        elif isinstance(raw_input, list) and "input" in case:
            raw_input = [{"role": "user", "content": m} if isinstance(m, str) else m for m in raw_input]
        if self.suite_input and not execution.get("skip_defaults"):
            raw_input = [*self.suite_input, *(raw_input if isinstance(raw_input, list) else [])]
            report.group("the suite's input → the messages before every case's", label, mapped=True)
        messages = self.messages(raw_input, label)
        if not messages and not conversation:
            report.lose(f"{where}: no input (or input_messages): nothing to send, left out")
            return None
        if messages:
            out["messages"] = messages
        outcome = as_text(case.get("criteria", case.get("outcome", case.get("expected_outcome"))))
        expected = case.get("expected_output", case.get("expected_messages"))
        if isinstance(expected, str):
            expected = [{"role": "assistant", "content": expected}]
        elif isinstance(expected, dict) and "role" not in expected:
            # an object: AgentV hands it to the judge as the reference answer, as JSON text
            expected = [{"role": "assistant", "content": expected}]
            report.group(
                "expected_output (an object) → the judge's reference answer (its JSON text)",
                label,
                mapped=True,
            )
        elif isinstance(expected, dict):
            expected = [expected]
        reference = self.reference(expected, label)
        if reference is None and as_text(case.get("reference_answer")):
            reference = as_text(case["reference_answer"])
            report.group("reference_answer → the judge's reference answer", label, mapped=True)
        metadata = case.get("metadata") if isinstance(case.get("metadata"), dict) else {}
        context = {
            "question": _last_user_text(messages),
            "criteria": outcome or "",
            "expected_outcome": outcome or "",
            "reference_answer": reference or "",
            "candidate_answer": "[the assistant's final reply, shown in the conversation]",
            "output_messages": "[the conversation]",
            "output": "[the assistant's final reply, shown in the conversation]",
            # AgentV's formatted question: the whole given conversation in `[Role]:` form (seed 004)
            "input_messages": _transcript(messages),
            "input": _transcript(messages),
            "expected_messages": json.dumps(expected, ensure_ascii=False, default=str),
            "metadata": json.dumps(metadata, ensure_ascii=False, indent=2, default=str),
            "metadata_json": json.dumps(metadata, ensure_ascii=False, default=str),
            "rubrics": "",
        }
        if "target" in execution or "targets" in execution:
            report.group(
                "execution.target (a per-case AgentV target): evalsite tests one model per run", label
            )
        items = case.get("assertions", case.get("assert"))
        if not execution.get("skip_defaults") and self.suite_assertions:
            items = (items if isinstance(items, list) else []) + self.suite_assertions
            report.group("suite assertions → added to every case's", label, mapped=True)
        elif execution.get("skip_defaults"):
            report.group("execution.skip_defaults → the suite's assertions are not added", label, mapped=True)
        if conversation:
            converted = self.conversation(case, out, items, outcome, reference, context, label)
            if converted is None:
                return None
            return converted, self.case_notes(case, execution, label, [], judged=self.used_criteria)
        notes: list[str] = []
        self.used_criteria = False
        checks: list[dict] = []
        if items is not None and key != "evalcases":
            graders, weights, gates = self.assertions(items, context, label)
            if graders:
                out["graders"] = graders
                out["pass_rule"] = {"weighted_average": weights, "threshold": self.threshold}
                if gates:
                    out["pass_rule"]["required"] = gates
                report.group(
                    "assertions → named graders; AgentV's weighted mean of their scores (weight, default 1) "
                    f"passes at {self.threshold:g} → pass_rule weighted_average",
                    label,
                    mapped=True,
                )
                if any(
                    "{ground_truth}" in str(g.get("rubric", "")) or g.get("rubric_file")
                    for g in graders.values()
                ):
                    out["ground_truth"] = reference or ""
                    report.group(
                        "expected_output → ground_truth (what {ground_truth} shows the judge)",
                        label,
                        mapped=True,
                    )
            evaluators: list[dict] | None = []  # it grades with its assertions only
        else:
            raw = execution.get("evaluators", case.get("evaluators"))
            evaluators = self.defaults if raw is None else _evaluator_list(raw, f"{label}.evaluators", report)
        evaluated = self.checks(evaluators, outcome, reference, context, label)
        weighted = self.weighted(evaluated, label) if evaluated and not out.get("graders") else None
        if weighted:
            out.update(weighted)
        else:
            checks.extend(evaluated)
        if isinstance(case.get("rubrics"), list) and case["rubrics"]:
            checks.append(self.rubrics(case["rubrics"], label))
        if not checks and not out.get("graders"):
            default = default_criteria(outcome, reference)
            if default is None:
                report.lose(f"{label}: no criteria, reference answer or grader evalsite can use, left out")
                return None
            report.group(
                "none of its graders can run in evalsite; graded instead by an llm_judge on its criteria and "
                "reference answer",
                label,
            )
            checks.append({"llm_judge": {"criteria": default, "threshold": self.threshold}})
        if checks:
            out["checks"] = checks
        judged = any("llm_judge" in check for check in checks) or self.used_criteria
        return out, self.case_notes(case, execution, label, notes, judged)

    def conversation(
        self,
        case: dict,
        out: dict,
        items: object,
        outcome: str | None,
        reference: str | None,
        context: dict,
        label: str,
    ) -> dict | None:
        """`mode: conversation`: every turn's `input` is sent live, in order, after the case's `input` (its
        system message and any history), and graded by its own assertions; the top-level assertions grade the
        whole conversation. AgentV combines the turn scores by `aggregation` and passes at 0.8."""
        report = self.report
        self.used_criteria = False
        raw_turns = case.get("turns")
        if not isinstance(raw_turns, list) or not raw_turns:
            report.lose(f"{label}: mode: conversation without `turns` — no user turn to send, left out")
            return None
        turns: list[dict] = []
        ungraded: list[dict] = []
        for number, raw in enumerate(raw_turns):
            where = f"{label}.turns[{number}]"
            if not isinstance(raw, dict):
                raw = {"input": raw}
            text = _turn_text(raw.get("input"))
            if not text:
                report.lose(f"{where}: no user input evalsite can send, left out")
                continue
            turn: dict[str, object] = {"input": text}
            checks = self.turn_checks(raw.get("assertions", raw.get("assert")), raw, outcome, context, where)
            if checks:
                turn["checks"] = checks
            elif not raw.get("assertions", raw.get("assert")) and raw.get("expected_output") is None:
                ungraded.append(turn)  # a turn whose assertions were all lost stays ungraded (listed)
            for key in raw:
                if key not in ("input", "assertions", "assert", "expected_output"):
                    report.group(f"turns[].{key}: not converted", label)
            turns.append(turn)
        if not turns:
            report.lose(f"{label}: no turn could be converted, left out")
            return None
        out["turns"] = turns
        report.group(
            "mode: conversation + turns → turns (each input sent live, its assertions as the turn's checks)",
            label,
            mapped=True,
        )
        if isinstance(items, list) and items:
            checks = self.turn_checks(
                items, {}, outcome, context, f"{label}.assertions", scope="conversation"
            )
            if checks:
                out["checks"] = checks
                report.group(
                    "conversation-level assertions → the eval's checks, judged on the whole conversation "
                    "(graded with the last turn)",
                    label,
                    mapped=True,
                )
        if not out.get("checks") and not any(turn.get("checks") for turn in turns):
            default = default_criteria(outcome, reference)
            if default is None:
                report.lose(f"{label}: no turn or conversation assertion evalsite can use, left out")
                return None
            out["checks"] = [
                {"llm_judge": {"criteria": default, "threshold": self.threshold, "scope": "conversation"}}
            ]
            self.used_criteria = True
        for turn in ungraded:
            # AgentV scores a turn with no assertions 1.0 and counts it in the aggregate; evalsite counts
            # only turns with checks, so such a turn gets one that any reply passes.
            turn["checks"] = [{"match": "*"}]
            report.group(
                'turns without assertions → a `match: "*"` check, which any reply passes: AgentV scores '
                "them 1.0 in the aggregate",
                label,
                mapped=True,
            )
        for key in ("aggregation", "on_turn_failure"):
            value = case.get(key)
            if value in (("mean", "min", "max") if key == "aggregation" else ("continue", "stop")):
                out[key] = value
                report.group(f"{key} → {key}", label, mapped=True)
            elif value is not None:
                report.group(
                    f"{key}: {short(value, 30)} — not an option evalsite has, left out", label, lost=True
                )
        if case.get("window_size") is not None:
            report.group(
                "window_size: AgentV sends only the last turns; evalsite sends the whole conversation",
                label,
                lost=True,
            )
        return out

    def case_notes(
        self, case: dict, execution: dict, label: str, notes: list[str], judged: bool
    ) -> list[str]:
        report = self.report
        if as_text(case.get("criteria")):
            if judged:
                report.group("criteria → what the judge grades against", label, mapped=True)
            else:
                notes.append(f"criteria: {case['criteria']}")
                report.group(
                    "criteria: no grader's prompt uses {{criteria}}, so it is kept as a comment above the eval",
                    label,
                )
        for key in ("note", "description"):
            if as_text(case.get(key)):
                notes.append(f"{key}: {case[key]}")
                report.group(f"{key} → a comment above the eval", label, mapped=True)
        for key in case:
            if key not in CASE_KEYS:
                report.group(f"eval case key `{key}`: not converted", label)
        for key in execution:
            if key not in ("target", "targets", "evaluators", "skip_defaults"):
                report.group(f"execution.{key}: not converted", label)
        return notes

    def first_format(self, case: dict, where: str) -> dict:
        """A v1 `testcases` case as a v2 one: `messages` up to the first assistant message are the input
        (AgentV v1 sends the system and user messages), that assistant message is the reference answer."""
        report = self.report
        messages = case.get("messages") if isinstance(case.get("messages"), list) else []
        given, expected = [], []
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "assistant" and not expected:
                expected.append(message)
            elif isinstance(message, dict) and message.get("role") == "assistant":
                report.group(
                    "testcases messages: an assistant message after the first (AgentV v1 used the first as the "
                    "reference answer) is left out",
                    as_text(case.get("id")) or where,
                )
            elif isinstance(message, dict):
                given.append(message)
        if expected:
            report.group(
                "testcases: the first assistant message → the reference answer",
                as_text(case.get("id")) or where,
                mapped=True,
            )
        converted = {k: v for k, v in case.items() if k not in ("messages", "grader")}
        converted["input_messages"] = given
        converted["expected_messages"] = expected
        if case.get("grader") == "heuristic":
            report.lose(
                f"{where}.grader: heuristic — AgentV's keyword-aspect score has no evalsite equivalent; graded by "
                "an llm_judge on its outcome and reference answer instead"
            )
        return converted

    # -- messages ------------------------------------------------------------------------------------

    def messages(self, raw: object, label: str) -> list[dict]:
        if not isinstance(raw, list):
            return []
        out = []
        for number, message in enumerate(raw):
            if not isinstance(message, dict) or not as_text(message.get("role")):
                self.report.skip(f"{label}.input_messages[{number}]: needs a role, left out")
                continue
            content = self.content(message.get("content"), f"{label}.input_messages[{number}]", label)
            if not (
                content.strip() if isinstance(content, str) else any(p["value"].strip() for p in content)
            ):
                # evalsite refuses an empty message (endpoints do too): say so rather than send nothing
                self.report.group("messages with no content (e.g. only tool calls): left out", label)
                continue
            out.append({"role": as_text(message["role"]), "content": content})
            for key in message:
                if key not in ("role", "content"):
                    self.report.group(f"message key `{key}` (e.g. tool calls): not converted", label)
        if out:
            self.report.group("input / input_messages → messages (the given history)", label, mapped=True)
        return out

    def content(self, raw: object, where: str, label: str) -> str | list[dict]:
        if isinstance(raw, str):
            return raw
        if raw is None:
            return ""
        if isinstance(raw, list):
            parts = []
            for number, part in enumerate(raw):
                if isinstance(part, str):
                    parts.append({"type": "text", "value": part})
                elif (
                    isinstance(part, dict)
                    and part.get("type") == "text"
                    and as_text(part.get("value")) is not None
                ):
                    parts.append({"type": "text", "value": as_text(part["value"])})
                elif isinstance(part, dict) and part.get("type") == "file" and as_text(part.get("value")):
                    parts.append({"type": "file", "value": self.attach(as_text(part["value"]), label)})
                else:
                    self.report.skip(
                        f"{where}.content[{number}]: {short(part, 50)} — not a text or file part, left out"
                    )
            return parts
        self.report.group("structured content (a mapping) → its JSON text", label)
        return json.dumps(raw, ensure_ascii=False, indent=2, default=str)

    def attach(self, reference: str, label: str) -> str:
        return attach_reference(self.files, self.attached, self.report, reference, label)

    def reference(self, raw: object, label: str) -> str | None:
        """The reference answer: the last expected message, as text."""
        if not isinstance(raw, list) or not raw:
            return None
        messages = [m for m in raw if isinstance(m, dict)]
        if not messages:
            return None
        last = messages[-1]
        if len(messages) > 1:
            self.report.group(
                "expected_messages before the last: only the last one is the reference answer", label
            )
        content = last.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            pieces = []
            for part in content:
                if isinstance(part, dict) and part.get("type") == "file" and as_text(part.get("value")):
                    found = find_file(self.files, part["value"])
                    if found is None:
                        self.report.need(basename(part["value"]))
                        self.report.group(
                            f"expected_messages file {part['value']}: not uploaded, so the reference answer is "
                            "incomplete — upload it and import again",
                            label,
                        )
                        pieces.append(f"[the reference answer in {basename(part['value'])}, not uploaded]")
                    else:
                        pieces.append(found[1].rstrip())
                        self.report.group(
                            f"expected_messages file {found[0]} → inlined in the reference answer",
                            label,
                            mapped=True,
                        )
                elif isinstance(part, dict) and as_text(part.get("value")) is not None:
                    pieces.append(as_text(part["value"]))
                elif isinstance(part, str):
                    pieces.append(part)
            return "\n".join(pieces) or None
        if content is None:
            if last.get("tool_calls"):
                self.report.group(
                    "expected tool calls: evalsite conversations make no tool calls, not converted", label
                )
            return None
        return json.dumps(content, ensure_ascii=False, indent=2, default=str)


def _with_files(raw: object, paths: list[str]) -> object:
    """`input_files`: file parts before the text of the (first) user message, as AgentV expands them."""
    parts = [{"type": "file", "value": path} for path in paths]
    if raw is None:
        return [{"role": "user", "content": parts}]
    if isinstance(raw, str):
        return [{"role": "user", "content": [*parts, {"type": "text", "value": raw}]}]
    if isinstance(raw, list):
        out, done = [], False
        for message in raw:
            if not done and isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                content = [{"type": "text", "value": content}] if isinstance(content, str) else content
                message = {**message, "content": [*parts, *(content if isinstance(content, list) else [])]}
                done = True
            out.append(message)
        return out if done else [*out, {"role": "user", "content": parts}]
    return raw


def _turn_text(raw: object) -> str | None:
    """A turn's user input as the text evalsite sends: a string, the user messages of a list, or JSON."""
    if isinstance(raw, str):
        return raw if raw.strip() else None
    if isinstance(raw, dict) and "content" in raw:
        return _turn_text(raw["content"])
    if isinstance(raw, list):
        texts = [
            _turn_text(m.get("content")) if isinstance(m, dict) and "content" in m else _turn_text(m)
            for m in raw
            if not (isinstance(m, dict) and m.get("role") not in (None, "user"))
        ]
        return "\n\n".join(t for t in texts if t) or None
    if raw is None:
        return None
    return json.dumps(raw, ensure_ascii=False, default=str)


def _evaluator_list(raw: object, where: str, report: Report) -> list[dict] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        report.skip(f"{where}: not a list, ignored")
        return None
    return [item for item in raw if isinstance(item, dict)]


def _transcript(messages: list[dict]) -> str:
    """The given conversation in AgentV's `[Role]:` form (its formatted question); a file part shows as its
    name, and `*.instructions.md` files not at all: AgentV sends them as guidelines, apart (seed 004)."""

    def text(content: str | list[dict]) -> str:
        if isinstance(content, str):
            return content
        return "\n".join(
            part["value"] if part["type"] == "text" else f"[file {part['value']}]"
            for part in content
            if part["type"] == "text" or not part["value"].endswith(INSTRUCTIONS_SUFFIX)
        )

    plain = [{"role": m["role"], "content": text(m["content"])} for m in messages]
    return format_transcript(plain)


def _last_user_text(messages: list[dict]) -> str:
    """The last user turn: the question the model answers (AgentV's {{question}}), not the first one."""
    for message in reversed(messages):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "\n".join(part["value"] for part in content if part["type"] == "text")
    return ""
