"""AgentV eval YAML → evalsite: the v2 form (`evalcases` + `input_messages`) and today's form (`tests` +
`input` / `expected_output` / `criteria` / `assertions`, in `*.eval.yaml` or `EVAL.yaml` files).

Each eval case becomes a `messages` eval: `input_messages` is the given history, file parts
become attached files (they must be uploaded alongside, since the importer cannot read the user's disk),
and the model replies to it. Grading:

- no evaluators (AgentV's default judge) → one `llm_judge` check: "The reply should achieve: <outcome>"
  plus the reference answer from `expected_messages`;
- `llm_judge` evaluators → `llm_judge` checks; a custom prompt (inline, or a file uploaded alongside)
  becomes the criteria with AgentV's template variables filled in;
- `rubrics` → one `llm_judge` check with the checklist;
- code evaluators, tool trajectories and composites → not converted (reported).

Today's `assertions` become named graders of the eval (docs/suite-format.md, named graders), their
names kept: `llm-grader` → an `llm_judge` grader whose rubric is the prompt file (attached, AgentV's
template variables mapped to evalsite's placeholders) or its text; `contains` / `regex` / `equals` → a
`check` grader; `code-grader` is listed as not convertible with its command. An object `expected_output`
is compared as JSON: a `field_equals` check per top-level key (see `_json_checks`).

Targets are reported: evalsite tests the suite's `model`.
"""

from __future__ import annotations

import json
import re

from engine.history import INSTRUCTIONS_SUFFIX
from engine.transcript import format_transcript

from .common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_number,
    as_share,
    as_text,
    basename,
    find_file,
    non_finite,
    safe_file_name,
    short,
    unique_id,
)

TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
PROMPT_FILE_SUFFIXES = (".md", ".markdown", ".txt", ".prompt", ".j2", ".jinja", ".hbs")
CODE_SUFFIXES = (".ts", ".js", ".mjs", ".py")
CASE_KEYS = ("id", "outcome", "expected_outcome", "input_messages", "expected_messages", "evaluators", "execution",
             "conversation_id", "note", "rubrics", "input", "expected_output", "criteria", "assertions")  # fmt: skip
# AgentV judge-prompt variables → evalsite rubric placeholders (the same value at run time)
# AgentV judge-prompt variables → evalsite rubric placeholders (the same value at run time)
PLACEHOLDERS = {"candidate_answer": "{submission}", "output_messages": "{submission}", "answer": "{submission}",
                "reference_answer": "{ground_truth}", "expected_output": "{ground_truth}"}  # fmt: skip
# ... and those that differ per case: filled in, so the grader gets its own rubric text. {{question}} is
# one: evalsite's {input} holds the live user messages, and a history eval has none (the model replies to
# the given messages), so the last given user turn is written in.
CASE_VARIABLES = ("question", "criteria", "expected_outcome", "input_messages", "expected_messages")
CHECK_ASSERTIONS = {"contains": "contains", "regex": "regex", "equals": "equals"}
GRADER_NAME = re.compile(r"[^A-Za-z0-9_-]+")
UNCONVERTED_EVALUATORS = {
    "code": "runs a script",
    "code_judge": "runs a script",
    "tool_trajectory": "checks tool calls, which evalsite conversations do not make",
    "expected_tool_calls": "checks tool calls, which evalsite conversations do not make",
    "composite": "combines evaluators with weights",
    "field_accuracy": "compares fields of structured output",
    "latency": "checks timing",
    "cost": "checks cost",
    "token_usage": "checks token use",
}


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    from . import promptfoo

    if promptfoo.shared_shape(data):  # today's format: promptfoo's shape, read by the promptfoo reader
        return promptfoo.convert_agentv(name, data, files, report)
    key = "tests" if isinstance(data.get("tests"), list) else "evalcases"
    cases = data.get(key)
    if not isinstance(cases, list) or not cases:
        raise ImportProblem(
            f"{name} has no `tests` (or `evalcases`): an AgentV eval file lists its cases under `tests`"
        )
    stem = re.sub(r"\.(ya?ml)$", "", name, flags=re.IGNORECASE) or "imported-suite"
    if key == "tests":  # today's names: `<name>.eval.yaml`, or `EVAL.yaml` in a folder named for the suite
        stem = re.sub(r"\.eval$", "", stem, flags=re.IGNORECASE)
        if stem.lower() == "eval":
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
        report.map("tests → evals (today's AgentV format; `evalcases` is its older name)")
    if isinstance(data.get("$schema"), str):
        report.map(f"$schema: {data['$schema']} → recognised as an AgentV eval file")
    if as_text(data.get("description")):
        sections.append(Section("description", as_text(data["description"])))
        report.map("description → description")

    execution = data.get("execution") if isinstance(data.get("execution"), dict) else {}
    for where, target in (("target", data.get("target")), ("execution.target", execution.get("target"))):
        if target is not None:
            report.skip(
                f"{where}: {short(target)} — an AgentV target (targets.yaml); evalsite tests the suite's `model`: "
                "set it in the suite or when launching"
            )
    defaults = _evaluator_list(
        execution.get("evaluators", data.get("evaluators")), "execution.evaluators", report
    )
    for key in execution:
        if key not in ("target", "evaluators"):
            report.skip(f"execution.{key}: {short(execution[key], 50)} — not converted")
    for key in data:
        if key not in (
            "$schema",
            "name",
            "description",
            "target",
            "execution",
            "evaluators",
            "evalcases",
            "tests",
        ):
            report.skip(f"{key}: {short(data[key], 50)} — not an AgentV key evalsite knows")

    converter = _Cases(files, report, defaults)
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
    sections.append(Section("evals", evals, blank_before=True, item_comments=notes))
    report.map(
        f"{key}: {len(evals)} case{'s' if len(evals) != 1 else ''} → evals with a given history (`messages`); "
        "the model replies to the last message"
    )
    return header, sections, converter.attached


class _Cases:
    def __init__(self, files: dict[str, str], report: Report, defaults: list[dict] | None):
        self.files = files
        self.report = report
        self.defaults = defaults
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
        label = as_text(case.get("id")) or where
        out: dict[str, object] = {}
        if as_text(case.get("id")):
            out["id"] = unique_id(as_text(case["id"]), self.taken, report, where)
        if as_text(case.get("conversation_id")):
            out["tags"] = [f"conversation:{case['conversation_id']}"]
            report.group("conversation_id → tag conversation:<id>", label, mapped=True)
        raw_input = case.get("input_messages", case.get("input"))
        if isinstance(raw_input, str):  # today's shorthand: one user message
            raw_input = [{"role": "user", "content": raw_input}]
            report.group("input (a string) → one user message", label, mapped=True)
        elif isinstance(raw_input, list) and "input" in case:
            raw_input = [{"role": "user", "content": m} if isinstance(m, str) else m for m in raw_input]
        messages = self.messages(raw_input, label)
        if not messages:
            report.skip(f"{label}: no input (or input_messages), left out")
            return None
        out["messages"] = messages
        outcome = as_text(case.get("criteria", case.get("outcome", case.get("expected_outcome"))))
        expected = case.get("expected_output", case.get("expected_messages"))
        json_expected = None
        if isinstance(expected, str):
            expected = [{"role": "assistant", "content": expected}]
        elif isinstance(expected, dict) and "role" not in expected:
            json_expected = expected  # an object: compared as JSON
            expected = [{"role": "assistant", "content": expected}]
        reference = self.reference(expected, label)
        context = {
            "question": _last_user_text(messages),
            "criteria": outcome or "",
            "expected_outcome": outcome or "",
            "reference_answer": reference or "",
            "candidate_answer": "[the assistant's final reply, shown in the conversation]",
            "output_messages": "[the conversation]",
            # AgentV's formatted question: the whole given conversation in `[Role]:` form (seed 004)
            "input_messages": _transcript(messages),
            "expected_messages": json.dumps(expected, ensure_ascii=False, default=str),
        }
        execution = case.get("execution") if isinstance(case.get("execution"), dict) else {}
        if "target" in execution:
            report.group(
                "execution.target (a per-case AgentV target): evalsite tests one model per run", label
            )
        notes = []
        self.used_criteria = False
        if "assertions" in case:
            graders = self.assertions(case["assertions"], context, label)
            if graders:
                out["graders"] = graders
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
        raw = execution.get("evaluators", case.get("evaluators"))
        evaluators = self.defaults if raw is None else _evaluator_list(raw, f"{label}.evaluators", report)
        if "assertions" in case:
            evaluators = []  # today's format grades with its assertions only
        checks = self.checks(evaluators, outcome, reference, context, label)
        if json_expected is not None:
            checks.extend(_json_checks(json_expected, label, report))
        if isinstance(case.get("rubrics"), list) and case["rubrics"]:
            checks.append(self.rubrics(case["rubrics"], label))
        if not checks and not out.get("graders"):
            default = _default_criteria(outcome, reference)
            if default is None:
                report.skip(f"{label}: no outcome, reference answer or evaluator evalsite can use, left out")
                return None
            report.skip(
                f"{label}: none of its evaluators can run in evalsite; graded instead by an llm_judge on its "
                "outcome and reference answer"
            )
            checks.append({"llm_judge": {"criteria": default}})
        if checks:
            out["checks"] = checks
        if as_text(case.get("criteria")):
            if checks and any("llm_judge" in check for check in checks) or self.used_criteria:
                report.group("criteria → what the judge grades against", label, mapped=True)
            else:
                notes.append(f"criteria: {case['criteria']}")
                report.group(
                    "criteria: no grader's prompt uses {{criteria}}, so it is kept as a comment above the eval",
                    label,
                )
        if as_text(case.get("note")):
            notes.append(f"note: {case['note']}")
            report.group("note → a comment above the eval", label, mapped=True)
        for key in case:
            if key not in CASE_KEYS:
                report.group(f"eval case key `{key}`: not converted", label)
        for key in execution:
            if key not in ("target", "evaluators"):
                report.group(f"execution.{key}: not converted", label)
        return out, notes

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
        name = safe_file_name(reference)
        found = find_file(self.files, reference)
        if found is None:
            self.report.need(name)
            self.report.group(f"file {reference} → attached file {name}: not uploaded — attach it", label)
        else:
            self.attached[name] = found[1]
            self.report.group(f"file {reference} → attached file {name}", label, mapped=True)
        return name

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

    # -- grading -------------------------------------------------------------------------------------

    def checks(
        self,
        evaluators: list[dict] | None,
        outcome: str | None,
        reference: str | None,
        context: dict,
        label: str,
    ) -> list[dict]:
        report = self.report
        if evaluators is None:
            criteria = _default_criteria(outcome, reference)
            if criteria is None:
                return []
            report.group(
                "outcome + expected_messages (AgentV's default judge; today's criteria + expected_output) → an llm_judge check",
                label,
                mapped=True,
            )
            return [{"llm_judge": {"criteria": criteria}}]
        out = []
        for evaluator in evaluators:
            kind = evaluator.get("type")
            kind = kind if isinstance(kind, str) else short(kind)
            title = f"evaluator {evaluator.get('name') or kind}"
            if kind == "llm_judge":
                criteria = self.judge_criteria(evaluator, outcome, reference, context, label)
                if criteria is None:
                    continue
                spec: dict[str, object] = {"criteria": criteria}
                if as_text(evaluator.get("model")):
                    spec["model"] = as_text(evaluator["model"])
                out.append({"llm_judge": spec})
                report.group(f"{title} (llm_judge) → an llm_judge check", label, mapped=True)
                for key in evaluator:
                    if key not in ("name", "type", "prompt", "model"):
                        report.group(f"{title}.{key}: not an llm_judge option evalsite has", label)
            elif kind == "rubric" and isinstance(evaluator.get("rubrics"), list):
                out.append(self.rubrics(evaluator["rubrics"], label))
            else:
                why = UNCONVERTED_EVALUATORS.get(kind, "has no evalsite equivalent")
                report.group(f"{title} ({kind}): not converted — it {why}", label)
        return out

    def judge_criteria(
        self, evaluator: dict, outcome: str | None, reference: str | None, context: dict, label: str
    ) -> str | None:
        prompt = evaluator.get("prompt")
        if prompt is None:
            return _default_criteria(outcome, reference)
        text = as_text(prompt)
        if text is None:
            self.report.group("llm_judge prompt that is not text: not converted", label)
            return _default_criteria(outcome, reference)
        if _is_path(text):
            if text.lower().endswith(CODE_SUFFIXES):
                self.report.group(
                    f"llm_judge prompt template {text} is code, not converted; the outcome judge is used",
                    label,
                )
                return _default_criteria(outcome, reference)
            found = find_file(self.files, text)
            if found is None:
                self.report.need(basename(text))
                self.report.group(
                    f"llm_judge prompt {text}: not uploaded — upload it and import again; meanwhile the outcome "
                    "judge is used",
                    label,
                )
                return _default_criteria(outcome, reference)
            self.report.group(f"llm_judge prompt {found[0]} → the check's criteria", label, mapped=True)
            text = found[1]
        return self.fill(text, context, label)

    def fill(self, template: str, context: dict, label: str) -> str:
        def replace(match: re.Match) -> str:
            name = match.group(1)
            if name in context:
                return context[name]
            self.report.group(
                f"template variable {{{{{name}}}}}: unknown to evalsite, left as written", label
            )
            return match.group(0)

        filled = TEMPLATE_VAR.sub(replace, template)
        if filled != template:
            self.report.group(
                "judge prompt variables ({{question}}, {{expected_outcome}}, {{reference_answer}}, …) → filled in; "
                "{{candidate_answer}} is the reply the judge sees in the conversation",
                label,
                mapped=True,
            )
        return filled.strip()

    def assertions(self, raw: object, context: dict, label: str) -> dict[str, dict]:
        """Today's `assertions` as named graders of the eval, in order, their names kept."""
        report = self.report
        if not isinstance(raw, list):
            report.group("assertions: not a list, ignored", label)
            return {}
        graders: dict[str, dict] = {}
        for number, item in enumerate(raw):
            if not isinstance(item, dict):
                report.group("assertions that are not mappings: left out", label)
                continue
            kind = as_text(item.get("type")) or "?"
            wanted = as_text(item.get("name")) or f"{kind}-{number + 1}"
            name = GRADER_NAME.sub("-", wanted).strip("-")[:60] or f"assertion-{number + 1}"
            while name in graders:
                name = f"{name[:56]}-{number + 1}"
            if name != wanted:
                report.group(
                    f"assertion name {wanted!r} → grader {name!r} (letters, digits, _ and -)",
                    label,
                    mapped=True,
                )
            title = f"assertion {wanted} ({kind})"
            known = {
                "name",
                "type",
                "value",
                "prompt",
                "model",
                "threshold",
                "temperature",
                "command",
                "script",
            }
            if kind == "llm-grader":
                grader = self.judge_grader(item, context, label, title)
            elif kind in CHECK_ASSERTIONS:
                value = as_text(item.get("value"))
                if value is None:
                    report.group(f"{title}: no `value`, left out", label)
                    continue
                grader = {"kind": "check", "check": {CHECK_ASSERTIONS[kind]: value}}
                report.group(f"{title} → a check grader `{CHECK_ASSERTIONS[kind]}`", label, mapped=True)
            elif kind == "code-grader":
                command = item.get("command", item.get("script"))
                shown = " ".join(map(str, command)) if isinstance(command, list) else short(command, 120)
                report.group(
                    f"{title}: not convertible — it runs a command (`{shown}`), which evalsite does not run",
                    label,
                )
                continue
            else:
                report.group(f"{title}: not converted — no evalsite equivalent", label)
                continue
            if grader is None:
                continue
            threshold = item.get("threshold")
            if as_share(threshold) is not None:
                grader["threshold"] = threshold
            for key in item:
                if key not in known:
                    report.group(f"{title}.{key}: not converted", label)
            graders[name] = grader
        return graders

    def judge_grader(self, item: dict, context: dict, label: str, title: str) -> dict | None:
        """An `llm-grader`: its prompt file attached as the rubric_file (variables → placeholders), or, when
        the prompt uses per-case values (criteria, input_messages, ...), the rubric text with them filled in."""
        report = self.report
        prompt = item.get("prompt")
        grader: dict[str, object] = {"kind": "llm_judge"}
        if as_text(item.get("model")):
            grader["model"] = as_text(item["model"])
        temperature = item.get("temperature")
        if as_number(temperature) is not None:
            grader["temperature"] = temperature
        file_name = None
        if prompt is None:
            text = "{{criteria}}"  # AgentV's default grader: the criteria and the reference answer
            if context.get("reference_answer"):
                text += "\n\nA reference answer (the reply need not match it word for word):\n{{reference_answer}}"
        elif as_text(prompt) is None:
            report.group(f"{title}: a prompt that is not text, left out", label)
            return None
        elif _is_path(as_text(prompt)):
            found = find_file(self.files, as_text(prompt))
            if found is None:
                report.need(basename(as_text(prompt)))
                report.group(f"{title}: prompt {prompt} was not uploaded — upload it and import again", label)
                return None
            file_name, text = safe_file_name(found[0]), found[1]
        else:
            text = as_text(prompt)
        rubric, per_case = self.rubric_text(text, context, label)
        if file_name and not per_case:
            self.attached[file_name] = rubric
            grader["rubric_file"] = file_name
            report.group(
                f"{title}: prompt {file_name} → an llm_judge grader, rubric_file {file_name} (attached, "
                "its variables as evalsite placeholders)",
                label,
                mapped=True,
            )
        else:
            grader["rubric"] = rubric
            source = (
                f"prompt {file_name}" if file_name else "its prompt" if prompt is not None else "criteria"
            )
            filled = " (per-case variables filled in)" if per_case else ""
            report.group(
                f"{title}: {source} → an llm_judge grader with the rubric text{filled}", label, mapped=True
            )
        return grader

    def rubric_text(self, template: str, context: dict, label: str) -> tuple[str, bool]:
        """An AgentV prompt as an evalsite rubric: literal braces doubled, `{{candidate_answer}}` →
        `{submission}`, `{{reference_answer}}` → `{ground_truth}`; per-case variables ({{question}},
        {{criteria}}, ...) filled in. Returns (rubric, whether it holds per-case values)."""
        per_case = False
        pieces: list[str] = []
        at = 0
        for match in TEMPLATE_VAR.finditer(template):
            pieces.append(template[at : match.start()].replace("{", "{{").replace("}", "}}"))
            name = match.group(1)
            if name in PLACEHOLDERS:
                pieces.append(PLACEHOLDERS[name])
            elif name in CASE_VARIABLES:
                per_case = True
                self.used_criteria |= name in ("criteria", "expected_outcome")
                pieces.append(str(context.get(name, "")).replace("{", "{{").replace("}", "}}"))
            else:
                self.report.group(
                    f"template variable {{{{{name}}}}}: unknown to evalsite, left as written", label
                )
                pieces.append(match.group(0).replace("{", "{{").replace("}", "}}"))
            at = match.end()
        pieces.append(template[at:].replace("{", "{{").replace("}", "}}"))
        return "".join(pieces).strip() + "\n", per_case

    def rubrics(self, items: list, label: str) -> dict:
        lines = []
        for item in items:
            if isinstance(item, str):
                lines.append(f"- {item}")
            elif isinstance(item, dict) and as_text(item.get("description") or item.get("outcome")):
                text = as_text(item.get("description") or item.get("outcome"))
                required = " (required)" if item.get("required") else ""
                lines.append(f"- {text}{required}")
                if "weight" in item:
                    self.report.group(
                        "rubric weights: evalsite's judge scores the checklist as a whole", label
                    )
        self.report.group("rubrics → one llm_judge check with the checklist", label, mapped=True)
        return {
            "llm_judge": {"criteria": "The reply meets every item of this checklist:\n" + "\n".join(lines)}
        }


def _evaluator_list(raw: object, where: str, report: Report) -> list[dict] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        report.skip(f"{where}: not a list, ignored")
        return None
    return [item for item in raw if isinstance(item, dict)]


def _default_criteria(outcome: str | None, reference: str | None) -> str | None:
    parts = []
    if outcome and outcome.strip():
        parts.append(f"The reply should achieve: {outcome.strip()}")
    if reference and reference.strip():
        parts.append(f"A reference answer (the reply need not match it word for word):\n{reference.strip()}")
    return "\n\n".join(parts) or None


def _is_path(text: str) -> bool:
    if "\n" in text or len(text) > 300:
        return False
    stripped = text.strip()
    return stripped.startswith(("./", "../", "/")) or stripped.lower().endswith(
        PROMPT_FILE_SUFFIXES + CODE_SUFFIXES
    )


def _json_checks(expected: dict, label: str, report: Report) -> list[dict]:
    """An object expected_output, compared as JSON: a `field_equals` check per top-level key. evalsite
    compares JSON values with field_equals only (typed: true is not 1; nested objects and lists whole);
    there is no check on the whole reply object, so a reply with extra top-level keys still passes."""
    checks = []
    for key, value in expected.items():
        if "." in str(key) or not str(key):
            report.group(
                f"expected_output key {key!r}: not a path field_equals can name, not compared", label
            )
            continue
        if non_finite(value):
            report.group(
                f"expected_output key {key!r}: NaN or an infinity cannot be compared, not compared", label
            )
            continue
        checks.append({"field_equals": {"path": str(key), "value": value}})
    if checks:
        report.group(
            "expected_output (an object) → a field_equals check per top-level key (compared as JSON; extra "
            "keys in the reply are not refused)",
            label,
            mapped=True,
        )
    return checks


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
