"""One AgentV assertion as evalsite's: a text assertion as a check with AgentV's case rules, `code-grader` as
a `code` check in the agentv dialect, an `llm-grader` prompt as a rubric with AgentV's template variables as
evalsite placeholders or filled in per case."""

from __future__ import annotations

import re
import shlex

from engine import patterns

from ..common import (
    as_number,
    as_share,
    as_text,
    attach,
    basename,
    find_file,
    non_finite,
    safe_file_name,
    short,
)
from ..promptfoo.checks import rubric_escape

JS_NAMED_GROUP = re.compile(
    r"\(\?<([A-Za-z_][A-Za-z0-9_]*)>"
)  # JavaScript's (?<name>…) is Python's (?P<name>…)
TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
PROMPT_FILE_SUFFIXES = (".md", ".markdown", ".txt", ".prompt", ".j2", ".jinja", ".hbs")
CODE_SUFFIXES = (".ts", ".js", ".mjs", ".py")
# AgentV passes a case, a turn and a required grader at this score unless told otherwise.
DEFAULT_THRESHOLD = 0.8
# AgentV judge-prompt variables → evalsite rubric placeholders (the same value at run time)
PLACEHOLDERS = {"candidate_answer": "{submission}", "output_messages": "{submission}", "answer": "{submission}",
                "output": "{submission}", "reference_answer": "{ground_truth}",
                "expected_output": "{ground_truth}"}  # fmt: skip
# ... and those that differ per case: filled in, so the grader gets its own rubric text. {{question}} is
# one: evalsite's {input} holds the live user messages, and a history eval has none (the model replies to
# the given messages), so the last given user turn is written in.
CASE_VARIABLES = ("question", "criteria", "expected_outcome", "input_messages", "expected_messages", "input",
                  "metadata", "metadata_json", "rubrics")  # fmt: skip
INTERPRETERS = {".py": ["python3"], ".ts": ["bun", "run"], ".js": ["node"], ".mjs": ["node"], ".sh": ["sh"]}
SCRIPT_SUFFIXES = (".ts", ".js", ".mjs", ".cjs", ".py", ".sh", ".rb")
CODE_KEYS = {"name", "id", "type", "command", "script", "cwd", "weight", "required", "threshold", "negate",
             "target", "config", "timeout", "description"}  # fmt: skip
# earlier names of today's assertion types
KIND_ALIASES = {"llm-judge": "llm-grader", "code-judge": "code-grader", "rubric": "rubrics"}


def kind_of(raw: object) -> str:
    kind = (as_text(raw) or "?").strip().lower().replace("_", "-")
    return KIND_ALIASES.get(kind, kind)


def regex_escape(text: str) -> str:
    return re.escape(text)


def criteria_template(criteria: list[str], context: dict, whole: bool = False) -> str:
    """AgentV's rubric grader for text assertions: each criterion met or not, the score the share met; the
    reply and the reference answer shown as its default grader shows them. `whole`: the criteria grade the
    whole conversation, which the judge is shown, its replies as the answer."""
    lines = "\n".join(f"- {text}" for text in criteria)
    if whole:
        return (
            "Grade the whole conversation above against each criterion below. The score is the share of the "
            f"criteria it meets.\n\nCriteria:\n{lines}\n\nThe assistant's replies, in order:\n{{{{output}}}}\n"
        )
    text = (
        "Grade the answer against each criterion below. The score is the share of the criteria it meets.\n\n"
        f"Criteria:\n{lines}\n"
    )
    if context.get("reference_answer"):
        text += "\nReference answer (the answer need not match it word for word):\n{{expected_output}}\n"
    return text + "\nAnswer:\n{{output}}\n"


def default_criteria(outcome: str | None, reference: str | None) -> str | None:
    parts = []
    if outcome and outcome.strip():
        parts.append(f"The reply should achieve: {outcome.strip()}")
    if reference and reference.strip():
        parts.append(f"A reference answer (the reply need not match it word for word):\n{reference.strip()}")
    return "\n\n".join(parts) or None


def is_path(text: str) -> bool:
    if "\n" in text or len(text) > 300:
        return False
    stripped = text.strip()
    return stripped.startswith(("./", "../", "/")) or stripped.lower().endswith(
        PROMPT_FILE_SUFFIXES + CODE_SUFFIXES
    )


class ItemChecks:
    """One assertion at a time, for AgentV's case converter: it uses the converter's `files`, `report`,
    `attached`, `threshold`, `defaults` and `used_criteria`."""

    def judge_criteria(
        self, evaluator: dict, outcome: str | None, reference: str | None, context: dict, label: str
    ) -> str | None:
        prompt = evaluator.get("prompt")
        if prompt is None:
            return default_criteria(outcome, reference)
        text = as_text(prompt)
        if text is None:
            self.report.group("llm_judge prompt that is not text: not converted", label)
            return default_criteria(outcome, reference)
        if is_path(text):
            if text.lower().endswith(CODE_SUFFIXES):
                self.report.group(
                    f"llm_judge prompt template {text} is code, not converted; the outcome judge is used",
                    label,
                )
                return default_criteria(outcome, reference)
            found = find_file(self.files, text)
            if found is None:
                self.report.need(basename(text))
                self.report.group(
                    f"llm_judge prompt {text}: not uploaded — upload it and import again; meanwhile the outcome "
                    "judge is used",
                    label,
                )
                return default_criteria(outcome, reference)
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

    def text_check(self, kind: str, item: dict, label: str, title: str) -> dict | None:
        """contains / icontains / -any / -all, starts-with, ends-with, regex, equals (and `negate`) as one evalsite
        check, with AgentV's case rules: `contains` is case-sensitive, `icontains` is not."""
        report = self.report
        value = item.get("value")
        values = [as_text(v) for v in value] if isinstance(value, list) else [as_text(value)]
        values = [v for v in values if v is not None]
        if not values:
            report.group(f"{title}: no `value`, left out", label, lost=True)
            return None
        negate = item.get("negate") is True
        escaped = [regex_escape(v) for v in values]
        if kind == "regex":
            flags = "".join(f for f in str(item.get("flags") or "") if f in "ims")
            source = JS_NAMED_GROUP.sub(r"(?P<\1>", values[0]).replace(r"\k<", "(?P=")
            source = re.sub(r"\(\?P=([A-Za-z_][A-Za-z0-9_]*)>", r"(?P=\1)", source)
            pattern = f"(?{flags}:{source})" if flags else source
            try:
                patterns.validate(pattern)
            except patterns.InvalidPattern as exc:
                report.group(
                    f"{title}: /{short(values[0], 60)}/ is not a regular expression Python runs ({exc.reason}), "
                    "left out",
                    label,
                    lost=True,
                )
                return None
        elif kind in ("contains", "icontains"):
            pattern = f"(?i:{escaped[0]})" if kind == "icontains" else escaped[0]
        elif kind.endswith("-any"):
            pattern = ("(?i:{})" if kind.startswith("i") else "(?:{})").format("|".join(escaped))
        elif kind.endswith("-all"):
            pattern = ("(?is:{})" if kind.startswith("i") else "(?s:{})").format(
                "".join(f"(?=.*{v})" for v in escaped)
            )
        elif kind == "starts-with":
            pattern = r"\A\s*" + regex_escape(values[0].strip())
        elif kind == "ends-with":
            pattern = regex_escape(values[0].strip()) + r"\s*\Z"
        else:  # equals
            pattern = r"\A\s*" + regex_escape(values[0].strip()) + r"\s*\Z"
        if negate:
            report.group(f"{title} with negate → a regex check that it does not match", label, mapped=True)
            return {"regex": rf"\A(?![\s\S]*?(?:{pattern}))"}
        if kind == "icontains":
            check = {"contains": values[0]}
        elif kind == "contains" and values[0].lower() == values[0].upper():
            check = {"contains": values[0]}  # nothing to case-fold
        elif kind == "starts-with":
            check = {"starts_with": values[0].strip()}
        elif kind == "equals":
            check = {"equals": values[0]}
        else:
            check = {"regex": pattern}
        report.group(f"{title} → a check grader `{next(iter(check))}`", label, mapped=True)
        return check

    def code_check(self, item: dict, context: dict, label: str, title: str) -> dict | None:
        """A `code-grader` (v2: `code` / `code_judge` evaluators with a `script`) as a `code` check in the
        agentv dialect: its program gets AgentV's payload and answers {score, hits, misses}. Files its command
        names are attached by their name and the command rewritten to it (a code check runs in the suite's
        folder); the assertion's other keys are its `config`, as AgentV hands them over."""
        report = self.report
        command = item.get("command", item.get("script"))
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError:
                command = command.split()
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(a, (str, int, float)) for a in command)
        ):
            report.group(f"{title}: no command to run, left out", label, lost=True)
            return None
        args = []
        for arg in map(str, command):
            if ("/" in arg or "\\" in arg or arg.lower().endswith(SCRIPT_SUFFIXES)) and not arg.startswith(
                "-"
            ):
                name = safe_file_name(arg)
                found = find_file(self.files, arg)
                if found is None:
                    self.report.need(name)
                    report.group(f"{title}: {arg} was not uploaded — attach {name}", label)
                else:
                    name = attach(self.attached, name, found[1])
                arg = name
            args.append(arg)
        if len(args) == 1 and args[0].lower().endswith(tuple(INTERPRETERS)):
            # a script named alone: AgentV ran it by its interpreter
            args = [*INTERPRETERS[next(x for x in INTERPRETERS if args[0].lower().endswith(x))], args[0]]
        config = dict(item["config"]) if isinstance(item.get("config"), dict) else {}
        config.update({k: v for k, v in item.items() if k not in CODE_KEYS})
        for key in [key for key, value in config.items() if non_finite(value)]:
            del config[key]
            report.group(f"{title}.{key}: NaN or an infinity cannot be handed over as JSON, left out", label)
        spec: dict[str, object] = {"command": args, "dialect": "agentv", "threshold": self.threshold}
        spec["config"] = {"criteria": context.get("criteria", ""), "config": config}
        if as_share(item.get("threshold")) is not None:
            spec["threshold"] = float(item["threshold"])
        if isinstance(item.get("timeout"), (int, float)) and item["timeout"] > 0:
            spec["timeout"] = min(float(item["timeout"]), 600.0)
        report.group(
            f"{title} → a `code` check running `{' '.join(args)}` (agentv dialect: AgentV's payload in, "
            "{score, hits, misses} out)",
            label,
            mapped=True,
        )
        if item.get("cwd") is not None:
            report.group(f"{title}.cwd: the command runs in the suite's folder instead", label)
        return {"code": spec}

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
        listed = item.get("criteria", item.get("rubrics"))
        if prompt is None and isinstance(listed, list) and listed:
            texts = [as_text(x.get("outcome") or x.get("description")) if isinstance(x, dict) else as_text(x)
                     for x in listed]  # fmt: skip
            text = criteria_template([t for t in texts if t], context)
        elif prompt is None:
            if not context.get("criteria") and not context.get("reference_answer"):
                report.group(
                    f"{title}: no prompt, criteria or reference answer to grade by, left out",
                    label,
                    lost=True,
                )
                return None
            # AgentV's default grader: the criteria, the reference answer and the reply
            text = "Criteria:\n{{criteria}}\n"
            if context.get("reference_answer"):
                text += (
                    "\nReference answer (the answer need not match it word for word):\n{{reference_answer}}\n"
                )
            text += "\nAnswer:\n{{output}}\n"
        elif as_text(prompt) is None:
            report.group(f"{title}: a prompt that is not text, left out", label)
            return None
        elif is_path(as_text(prompt)):
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
            file_name = attach(self.attached, file_name, rubric)
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
            pieces.append(rubric_escape(template[at : match.start()]))
            name = match.group(1)
            if name in PLACEHOLDERS:
                pieces.append(PLACEHOLDERS[name])
            elif name in CASE_VARIABLES:
                per_case = True
                self.used_criteria |= name in ("criteria", "expected_outcome")
                pieces.append(rubric_escape(str(context.get(name, ""))))
            else:
                self.report.group(
                    f"template variable {{{{{name}}}}}: unknown to evalsite, left as written", label
                )
                pieces.append(match.group(0).replace("{", "{{").replace("}", "}}"))
            at = match.end()
        pieces.append(rubric_escape(template[at:]))
        return "".join(pieces).strip() + "\n", per_case
