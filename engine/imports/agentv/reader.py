"""An AgentV eval file of the generations before promptfoo's shape: its suite-wide keys (name, execution,
trials, suite assertions and inputs), cases kept in other files, a JSONL file's sidecar, and `${{ NAME }}`
environment interpolation; each case goes to `Cases`."""

from __future__ import annotations

import json
import math
import re

from ..common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_share,
    as_text,
    basename,
    find_file,
    find_folder,
    glob_files,
    is_glob,
    parse_yaml,
    short,
)
from ..settings import agentv_target_settings
from ..toolcalls import tool_sections
from .cases import Cases, evaluator_list
from .checks import DEFAULT_THRESHOLD

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


def convert_file(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    if name.lower().endswith(".jsonl"):
        data = _with_sidecar(name, data, files, report)
    key = next(
        (k for k in ("tests", "evalcases", "testcases") if isinstance(data.get(k), (list, str))), "tests"
    )
    cases, unmatched = _external_cases(data.get(key), key, files, report, name)
    declared: dict[str, None] = {}
    inline = cases is data.get(key)
    cases = _environment(cases, key, declared, report)
    data = {
        k: v if k in ("name", "description", key) else _environment(v, k, declared, report)
        for k, v in data.items()
    }
    if inline:
        data[key] = cases
    if not cases and unmatched:
        raise ImportProblem(
            f"{name} keeps its cases in the files the glob {', '.join(unmatched)} names, and none of the files "
            "given matches it: import the folder that holds them (on the Import page, a zip of it)"
        )
    if not cases and report.needs:
        if any(need.endswith("/") for need in report.needs):
            raise ImportProblem(
                f"{name} keeps its cases in the folder {', '.join(report.needs)} (a case.yaml in each of its "
                "folders), which was not given: import the folder that holds both (on the Import page, a zip "
                "of it)"
            )
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
    defaults = evaluator_list(
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
    converter = Cases(
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
    settings = agentv_target_settings(execution.get("target", data.get("target")), files, report)
    if settings:
        sections.append(Section("model_settings", settings))
    sections.append(Section("pass_threshold", threshold))
    if iterations is not None:
        sections.append(Section("iterations", iterations[0]))
        if iterations[1] is not None:
            sections.append(Section("pass_rate_threshold", iterations[1]))
    sections.extend(tool_sections(converter.declared, report))
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


def _external_cases(
    raw: object, key: str, files: dict[str, str], report: Report, suite: str = ""
) -> tuple[object, list[str]]:
    """Cases kept in other files (`tests: ./dataset.jsonl`, `tests: file://cases.yaml`, `- file://more.jsonl`
    among the cases, or a glob, `tests: ./cases/*.yaml`): read from the uploaded files, a YAML list or JSON
    lines; one not uploaded is asked for. Also the globs that matched no file given."""
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        return raw, []
    cases: list[object] = []
    unmatched: list[str] = []
    for number, item in enumerate(items):
        if not isinstance(item, str):
            cases.append(item)
            continue
        reference = item.removeprefix("file://")
        where = f"{key}[{number}]" if isinstance(raw, list) else key
        if is_glob(reference):
            cases.extend(_glob_cases(reference.strip(), where, key, files, report, suite, unmatched))
            continue
        found = None if reference.rstrip().endswith("/") else find_file(files, reference)
        folder = find_folder(files, reference) if found is None else None
        if folder is not None:
            cases.extend(_folder_cases(folder, where, files, report))
            continue
        if found is None and folder_like(reference):
            report.need(reference.strip().rstrip("/") + "/")
            report.lose(
                f"{where}: {reference} is a folder of cases (a case.yaml in each of its folders) that was not "
                "given — import the folder that holds both (on the Import page, a zip of it) and import again"
            )
            continue
        if found is None:
            report.need(basename(reference))
            report.lose(f"{where}: the cases in {reference} were not uploaded — upload it and import again")
            continue
        cases.extend(_file_cases(*found, where, key, report))
    return cases, unmatched


def _glob_cases(
    pattern: str,
    where: str,
    key: str,
    files: dict[str, str],
    report: Report,
    suite: str,
    unmatched: list[str],
) -> list[object]:
    """A glob of case files, as AgentV reads `tests: ./cases/*.yaml` (yaml-parser.ts resolveIncludePaths):
    every file it matches, in path order, each a file of cases. An eval file among them is refused, as AgentV
    refuses it: `tests` names raw cases, and an eval file is a suite of its own."""
    names = glob_files(files, pattern, leave_out={suite})
    if not names:
        unmatched.append(pattern)
        report.lose(f"{where}: the glob {pattern} matches none of the files given — give the files it names "
                    "(import the folder that holds them) and import again")  # fmt: skip
        return []
    suites = [name for name in names if re.search(r"\.eval\.ya?ml$", name, re.IGNORECASE)]
    if suites:
        raise ImportProblem(
            f"{where}: the glob {pattern} matches {', '.join(suites)}, an AgentV eval file — `tests` reads raw "
            "case files only, as AgentV does (an eval file is a suite of its own: import it as one)"
        )
    cases: list[object] = []
    for name in names:
        cases.extend(_file_cases(name, files[name], where, key, report))
    report.map(f"{where}: the glob {pattern} → {len(names)} file{'s' if len(names) != 1 else ''} of cases, in "
               "path order")  # fmt: skip
    return cases


def _file_cases(name: str, text: str, where: str, key: str, report: Report) -> list[object]:
    """The cases of one file: JSON lines, a JSON or YAML list (or a mapping holding one under `key`)."""
    loaded: object = None
    try:
        if name.lower().endswith(".jsonl"):
            loaded = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            loaded = parse_yaml(name, text)
    except (ValueError, ImportProblem) as exc:
        report.lose(f"{where}: {name} could not be read ({short(str(exc), 80)}), its cases left out")
        return []
    if isinstance(loaded, dict) and isinstance(loaded.get(key), list):
        loaded = loaded[key]
    if not isinstance(loaded, list):
        report.lose(f"{where}: {name} holds no list of cases, left out")
        return []
    report.map(f"{where}: {name} → its {len(loaded)} cases")
    return loaded


def folder_like(reference: str) -> bool:
    """A `tests` path naming a folder, as AgentV reads it when it is one: it ends with `/`, or its last part
    has no extension (`./cases`)."""
    text = reference.strip().removeprefix("file://")
    last = text.rstrip("/").rsplit("/", 1)[-1]
    return bool(last) and last not in (".", "..") and (text.endswith("/") or "." not in last)


CASE_FILES = ("case.yaml", "case.yml")


def _folder_cases(folder: str, where: str, files: dict[str, str], report: Report) -> list[object]:
    """AgentV's `tests: ./cases/` (loadCasesFromDirectory): each folder right under it is one case, read from
    its case.yaml (else case.yml), its id the folder's name unless the file gives one; a folder without
    either is skipped, as AgentV skips it. In name order, as AgentV sorts them."""
    inside: dict[str, set[str]] = {}
    for name in files:
        if name.startswith(folder + "/"):
            parts = name[len(folder) + 1 :].split("/")
            if len(parts) > 1:
                inside.setdefault(parts[0], set()).add("/".join(parts[1:]))
    cases: list[object] = []
    for sub in sorted(inside):
        own = next((f for f in CASE_FILES if f in inside[sub]), None)
        path = f"{folder}/{sub}"
        if own is None:
            report.skip(f"{where}: {path}/ has no case.yaml — skipped, as AgentV skips it")
            continue
        try:
            case = parse_yaml(f"{path}/{own}", files[f"{path}/{own}"])
        except ImportProblem as problem:
            report.lose(f"{path}/{own}: {short(str(problem), 80)} — this case is left out")
            continue
        if not isinstance(case, dict):
            report.lose(f"{path}/{own}: not a mapping of one case — left out")
            continue
        if case.get("id") is None:
            case = {"id": sub, **case}
        if any(rest.startswith("workspace/") for rest in inside[sub]) and "workspace" not in case:
            report.skip(f"{path}/workspace/: AgentV's workspace template for the case — evalsite has no "
                        "workspace, not converted")  # fmt: skip
        cases.append(case)
    report.map(
        f"{where}: the folder {folder}/ → {len(cases)} cases, one per folder's case.yaml (its id the folder's name)"
    )
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
