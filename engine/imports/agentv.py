"""AgentV (v2) eval YAML → evalsite.

Each eval case becomes a `messages` eval: `input_messages` is the given history, file parts
become attached files (they must be uploaded alongside, since the importer cannot read the user's disk),
and the model replies to it. Grading:

- no evaluators (AgentV's default judge) → one `llm_judge` check: "The reply should achieve: <outcome>"
  plus the reference answer from `expected_messages`;
- `llm_judge` evaluators → `llm_judge` checks; a custom prompt (inline, or a file uploaded alongside)
  becomes the criteria with AgentV's template variables filled in;
- `rubrics` → one `llm_judge` check with the checklist;
- code evaluators, tool trajectories and composites → not converted (reported).

Targets are reported: evalsite tests the suite's `model`.
"""

from __future__ import annotations

import json
import re

from .common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_text,
    basename,
    find_file,
    safe_file_name,
    short,
    unique_id,
)

TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
PROMPT_FILE_SUFFIXES = (".md", ".markdown", ".txt", ".prompt", ".j2", ".jinja", ".hbs")
CODE_SUFFIXES = (".ts", ".js", ".mjs", ".py")
CASE_KEYS = ("id", "outcome", "expected_outcome", "input_messages", "expected_messages", "evaluators", "execution",
             "conversation_id", "note", "rubrics")  # fmt: skip
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
    cases = data.get("evalcases")
    if not isinstance(cases, list) or not cases:
        raise ImportProblem(
            f"{name} has no `evalcases`: an AgentV eval file lists its cases under `evalcases`"
        )
    stem = re.sub(r"\.(ya?ml)$", "", name, flags=re.IGNORECASE) or "imported-suite"
    header = [
        f"Imported from AgentV {name} by evalsite.",
    ]
    sections = [Section("name", stem[:200])]
    report.map(f"(AgentV files have no name) → name: {stem} (from the file name)")
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
        if key not in ("$schema", "description", "target", "execution", "evaluators", "evalcases"):
            report.skip(f"{key}: {short(data[key], 50)} — not an AgentV key evalsite knows")

    converter = _Cases(files, report, defaults)
    evals: list[dict] = []
    notes: list[list[str]] = []
    for index, case in enumerate(cases):
        converted = converter.case(case, index)
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
        f"evalcases: {len(evals)} case{'s' if len(evals) != 1 else ''} → evals with a given history (`messages`); "
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

    # -- one case ------------------------------------------------------------------------------------

    def case(self, case: object, index: int) -> tuple[dict, list[str]] | None:
        report = self.report
        where = f"evalcases[{index}]"
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
        messages = self.messages(case.get("input_messages"), label)
        if not messages:
            report.skip(f"{label}: no input_messages, left out")
            return None
        out["messages"] = messages
        outcome = as_text(case.get("outcome", case.get("expected_outcome")))
        reference = self.reference(case.get("expected_messages"), label)
        context = {
            "question": _first_user_text(messages),
            "expected_outcome": outcome or "",
            "reference_answer": reference or "",
            "candidate_answer": "[the assistant's final reply, shown in the conversation]",
            "output_messages": "[the conversation]",
            "input_messages": json.dumps(case.get("input_messages"), ensure_ascii=False, default=str),
            "expected_messages": json.dumps(case.get("expected_messages"), ensure_ascii=False, default=str),
        }
        execution = case.get("execution") if isinstance(case.get("execution"), dict) else {}
        if "target" in execution:
            report.group(
                "execution.target (a per-case AgentV target): evalsite tests one model per run", label
            )
        raw = execution.get("evaluators", case.get("evaluators"))
        evaluators = self.defaults if raw is None else _evaluator_list(raw, f"{label}.evaluators", report)
        checks = self.checks(evaluators, outcome, reference, context, label)
        if isinstance(case.get("rubrics"), list) and case["rubrics"]:
            checks.append(self.rubrics(case["rubrics"], label))
        if not checks:
            default = _default_criteria(outcome, reference)
            if default is None:
                report.skip(f"{label}: no outcome, reference answer or evaluator evalsite can use, left out")
                return None
            report.skip(
                f"{label}: none of its evaluators can run in evalsite; graded instead by an llm_judge on its "
                "outcome and reference answer"
            )
            checks.append({"llm_judge": {"criteria": default}})
        out["checks"] = checks
        notes = []
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
            out.append({"role": as_text(message["role"]), "content": content})
            for key in message:
                if key not in ("role", "content"):
                    self.report.group(f"message key `{key}` (e.g. tool calls): not converted", label)
        if out:
            self.report.group("input_messages → messages (the given history)", label, mapped=True)
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
                "outcome + expected_messages (AgentV's default judge) → an llm_judge check",
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


def _first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "\n".join(part["value"] for part in content if part["type"] == "text")
    return ""
