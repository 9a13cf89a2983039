"""AgentV's graders as evalsite's: `assertions` (and v2 `evaluators`) as named graders, checks and `code`
checks, judge prompts as rubrics, a conversation turn's assertions as its checks. The case-level reading is
in engine.imports.agentv; this is its grading half (a mixin of its case converter)."""

from __future__ import annotations

import json
import re
import shlex

from engine import patterns

from .common import (
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
from .promptfoo.asserts import field_accuracy, rubric_escape, word_check

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
INTERPRETERS = {".py": ["python3"], ".ts": ["bun", "run"], ".js": ["node"], ".mjs": ["node"], ".sh": ["sh"]}
SCRIPT_SUFFIXES = (".ts", ".js", ".mjs", ".cjs", ".py", ".sh", ".rb")
CODE_KEYS = {"name", "id", "type", "command", "script", "cwd", "weight", "required", "threshold", "negate",
             "target", "config", "timeout", "description"}  # fmt: skip
TEXT_CHECKS = ("contains", "icontains", "contains-any", "icontains-any", "contains-all", "icontains-all",
               "starts-with", "ends-with", "regex", "equals")  # fmt: skip
# earlier names of today's assertion types
KIND_ALIASES = {"llm-judge": "llm-grader", "code-judge": "code-grader", "rubric": "rubrics"}


def _kind(raw: object) -> str:
    kind = (as_text(raw) or "?").strip().lower().replace("_", "-")
    return KIND_ALIASES.get(kind, kind)


def regex_escape(text: str) -> str:
    return re.escape(text)


def _criteria_template(criteria: list[str], context: dict) -> str:
    """AgentV's rubric grader for text assertions: each criterion met or not, the score the share met; the
    reply and the reference answer shown as its default grader shows them."""
    lines = "\n".join(f"- {text}" for text in criteria)
    text = (
        "Grade the answer against each criterion below. The score is the share of the criteria it meets.\n\n"
        f"Criteria:\n{lines}\n"
    )
    if context.get("reference_answer"):
        text += "\nReference answer (the answer need not match it word for word):\n{{expected_output}}\n"
    return text + "\nAnswer:\n{{output}}\n"


def _weighted_composite(item: dict) -> bool:
    aggregator = item.get("aggregator")
    kind = _kind(aggregator.get("type")) if isinstance(aggregator, dict) else "weighted-average"
    return kind in ("weighted-average", "?")


def default_criteria(outcome: str | None, reference: str | None) -> str | None:
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


class Graders:
    """The grading half of AgentV's case converter: it uses the converter's `files`, `report`, `attached`,
    `threshold`, `defaults` and `used_criteria`."""

    def turn_checks(
        self,
        items: object,
        turn: dict,
        outcome: str | None,
        context: dict,
        where: str,
        scope: str = "reply",
    ) -> list[dict]:
        """One turn's assertions as checks: its text assertions one judge with a criterion each (AgentV's
        rubric grader, the share met), typed ones as checks, the turn's `expected_output` the judge's
        reference answer."""
        report = self.report
        expected = turn.get("expected_output")
        reference = None
        if expected is not None:
            reference = (
                expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False, indent=2)
            )
            report.group(
                "turns[].expected_output → the turn judge's reference answer",
                where.split(".")[0],
                mapped=True,
            )
        items = items if isinstance(items, list) else []
        checks: list[dict] = []
        criteria = [as_text(item) for item in items if isinstance(item, str) and as_text(item)]
        if not items and reference is not None:
            criteria = [outcome] if outcome else []
        if criteria or reference is not None:
            judged: list[dict] | str = [{"criteria": text} for text in criteria]
            if len(criteria) == 1:
                judged = criteria[0]
            elif not criteria:
                judged = "The reply matches the reference answer."
            spec: dict[str, object] = {"criteria": judged, "threshold": self.threshold}
            if reference is not None:
                prefix = f"A reference answer (the reply need not match it word for word):\n{reference}\n\n"
                spec["criteria"] = (
                    [{"criteria": prefix + item["criteria"]} for item in judged]
                    if isinstance(judged, list)
                    else prefix + judged
                )
            if scope == "conversation":
                spec["scope"] = "conversation"
            checks.append({"llm_judge": spec})
        for number, item in enumerate(items):
            if isinstance(item, str):
                continue
            if not isinstance(item, dict):
                report.group("assertions that are neither text nor mappings: left out", where, lost=True)
                continue
            kind = _kind(item.get("type"))
            title = f"{where}[{number}] {as_text(item.get('name')) or kind}"
            if kind in TEXT_CHECKS:
                check = self.text_check(kind, item, where.split(".")[0], title)
                if check is not None:
                    checks.append(check)
            elif kind == "is-json":
                checks.append({"is_json": item.get("negate") is not True})
            elif kind == "code-grader":
                check = self.code_check(item, context, where.split(".")[0], title)
                if check is not None:
                    checks.append(check)
            elif kind in ("llm-grader", "rubrics"):
                criteria_text = self.judge_criteria(
                    {"prompt": item.get("prompt")} if item.get("prompt") is not None else {},
                    outcome, reference, context, where.split(".")[0],
                )  # fmt: skip
                listed = item.get("rubrics", item.get("criteria"))
                if isinstance(listed, list):
                    criteria_text = _criteria_template(
                        [str(x.get("outcome", x)) if isinstance(x, dict) else str(x) for x in listed], {}
                    )
                if not criteria_text:
                    report.group(f"{title}: no prompt or criteria, left out", where, lost=True)
                    continue
                spec = {"criteria": criteria_text, "threshold": self.threshold}
                if as_share(item.get("threshold")) is not None:
                    spec["threshold"] = float(item["threshold"])
                if scope == "conversation":
                    spec["scope"] = "conversation"
                checks.append({"llm_judge": spec})
                report.group(f"{title} (llm-grader) → an llm_judge check", where.split(".")[0], mapped=True)
            else:
                why = UNCONVERTED_EVALUATORS.get(kind.replace("-", "_"), "has no evalsite equivalent")
                report.group(f"{title} ({kind}): not converted — it {why}", where, lost=True)
        return checks

    def checks(
        self,
        evaluators: list[dict] | None,
        outcome: str | None,
        reference: str | None,
        context: dict,
        label: str,
    ) -> list[dict]:
        report = self.report
        self.evaluator_of = []  # the evaluator each returned check came from
        if evaluators is None:
            criteria = default_criteria(outcome, reference)
            if criteria is None:
                return []
            report.group(
                "outcome + expected_messages (AgentV's default judge; today's criteria + expected_output) → an llm_judge check",
                label,
                mapped=True,
            )
            return [{"llm_judge": {"criteria": criteria, "threshold": self.threshold}}]
        out = []
        for evaluator in evaluators:
            kind = evaluator.get("type")
            kind = kind if isinstance(kind, str) else short(kind)
            title = f"evaluator {evaluator.get('name') or kind}"
            before = len(out)
            if kind == "llm_judge":
                criteria = self.judge_criteria(evaluator, outcome, reference, context, label)
                if criteria is None:
                    continue
                spec: dict[str, object] = {"criteria": criteria, "threshold": self.threshold}
                if as_share(evaluator.get("threshold")) is not None:
                    spec["threshold"] = float(evaluator["threshold"])
                if as_text(evaluator.get("model")):
                    spec["model"] = as_text(evaluator["model"])
                out.append({"llm_judge": spec})
                report.group(f"{title} (llm_judge) → an llm_judge check", label, mapped=True)
                for key in evaluator:
                    if key not in ("name", "type", "prompt", "model", "threshold", "weight"):
                        report.group(f"{title}.{key}: not an llm_judge option evalsite has", label)
            elif kind == "rubric" and isinstance(evaluator.get("rubrics"), list):
                out.append(self.rubrics(evaluator["rubrics"], label))
            elif kind in ("code", "code_judge"):
                check = self.code_check(evaluator, context, label, title)
                if check is not None:
                    out.append(check)
            else:
                why = UNCONVERTED_EVALUATORS.get(kind, "has no evalsite equivalent")
                report.group(f"{title} ({kind}): not converted — it {why}", label, lost=True)
            self.evaluator_of += [evaluator] * (len(out) - before)
        return out

    def weighted(self, checks: list[dict], label: str) -> dict | None:
        """A case's v2 evaluators as AgentV scores them: the weighted mean of their scores (weight, default
        1) passing at the case's threshold. Each check becomes a named check grader under a weighted pass
        rule; None for a single unweighted evaluator (its check, at the threshold, is the same)."""
        sources = self.evaluator_of
        if len(sources) < 2 and not any("weight" in source for source in sources):
            return None
        graders: dict[str, dict] = {}
        weights: dict[str, float] = {}
        for number, (check, source) in enumerate(zip(checks, sources, strict=True)):
            kind = as_text(source.get("type")) or "evaluator"
            wanted = as_text(source.get("name")) or f"{kind}-{number + 1}"
            name = GRADER_NAME.sub("-", wanted).strip("-")[:60] or f"evaluator-{number + 1}"
            if not name[0].isalnum():
                name = f"e{name}"[:60]
            while name in graders:
                name = f"{name[:56]}-{number + 1}"
            weight = as_number(source.get("weight"))
            weight = 1.0 if weight is None else weight
            if weight <= 0:
                self.report.group(
                    f"evaluator {wanted}: weight {weight:g} — counts nothing in AgentV's score, left out",
                    label,
                )
                continue
            graders[name] = {"kind": "check", "check": check}
            weights[name] = weight
        if not graders:
            return None
        self.report.group(
            "evaluators → named check graders; AgentV's weighted mean of their scores (weight, default 1) "
            f"passes at {self.threshold:g} → pass_rule weighted_average",
            label,
            mapped=True,
        )
        return {"graders": graders, "pass_rule": {"weighted_average": weights, "threshold": self.threshold}}

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
        if _is_path(text):
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

    def assertions(self, raw: object, context: dict, label: str) -> tuple[dict, dict, list]:
        """`assertions` (earlier `assert`) as named graders of the eval, their names kept, with AgentV's weights
        (default 1) for the weighted pass rule, and the names of the `required` ones (AgentV fails a case
        whose required grader fails). Text items are one rubric judge, as AgentV groups them."""
        report = self.report
        if not isinstance(raw, list):
            report.group("assertions: not a list, left out", label, lost=True)
            return {}, {}, []
        graders: dict[str, dict] = {}
        weights: dict[str, float] = {}
        gates: list[str] = []
        criteria = [as_text(item) for item in raw if isinstance(item, str) and as_text(item)]
        if criteria:
            rubric, _ = self.rubric_text(_criteria_template(criteria, context), context, label)
            graders["criteria"] = {"kind": "llm_judge", "rubric": rubric, "threshold": self.threshold}
            weights["criteria"] = 1.0
            report.group(
                "assertions written as text → one llm_judge grader `criteria` scoring the share of them met "
                "(AgentV's rubric grader)",
                label,
                mapped=True,
            )
        for number, item in enumerate(raw):
            if isinstance(item, str):
                continue
            if not isinstance(item, dict):
                report.group("assertions that are neither text nor mappings: left out", label, lost=True)
                continue
            kind = _kind(item.get("type"))
            wanted = as_text(item.get("name")) or as_text(item.get("id")) or f"{kind}-{number + 1}"
            name = GRADER_NAME.sub("-", wanted).strip("-")[:60] or f"assertion-{number + 1}"
            if not name[0].isalnum():
                name = f"a{name}"[:60]
            while name in graders:
                name = f"{name[:56]}-{number + 1}"
            if name != wanted:
                report.group(
                    f"assertion name {wanted!r} → grader {name!r} (letters, digits, _ and -)",
                    label,
                    mapped=True,
                )
            title = f"assertion {wanted} ({kind})"
            weight = as_number(item.get("weight"))
            weight = 1.0 if weight is None else weight
            if weight <= 0:
                report.group(
                    f"{title}: weight {weight:g} — counts nothing in AgentV's score, left out", label
                )
                continue
            check = None
            if kind in ("llm-grader", "rubrics"):
                grader = self.judge_grader(item, context, label, title)
            elif kind in TEXT_CHECKS:
                check = self.text_check(kind, item, label, title)
                grader = None if check is None else {"kind": "check", "check": check}
            elif kind == "is-json":
                check = {"is_json": item.get("negate") is not True}
                grader = {"kind": "check", "check": check}
                report.group(f"{title} → a check grader `is_json`", label, mapped=True)
            elif kind == "code-grader":
                check = self.code_check(item, context, label, title)
                grader = None if check is None else {"kind": "check", "check": check}
            elif kind in ("min-words", "max-words", "word-count"):
                check = word_check(kind, item, self.files, report, f"{label}: {title}")
                grader = None if check is None else {"kind": "check", "check": check}
            elif kind == "field-accuracy":
                every = item.get("aggregation") == "all_or_nothing"
                for dotted, field_check, share in field_accuracy(
                    item, context["reference_answer"], report, label
                ):
                    field = GRADER_NAME.sub("-", f"{name}-{dotted}")[:60]
                    graders[field] = {"kind": "check", "check": field_check, "threshold": self.threshold}
                    weights[field] = weight * share
                    if every:
                        gates.append(field)
                continue
            elif kind == "composite" and _weighted_composite(item):
                self.composite(item, name, weight, context, label, title, graders, weights, gates)
                continue
            else:
                why = UNCONVERTED_EVALUATORS.get(kind.replace("-", "_"), "has no evalsite equivalent")
                if kind == "composite":
                    why = "combines its members by a program, a judge or a threshold, which evalsite cannot"
                report.group(f"{title}: not converted — it {why}", label, lost=True)
                continue
            if grader is None:
                continue
            threshold = as_share(item.get("threshold"))
            grader["threshold"] = float(item["threshold"]) if threshold is not None else self.threshold
            required = item.get("required")
            if required is True or (as_share(required) is not None and not isinstance(required, bool)):
                # AgentV fails the case when a required grader scores under its minimum: `min_score`, a
                # number given as `required`, else the case's threshold
                minimum = as_share(item.get("min_score"))
                minimum = float(required) if minimum is None and required is not True else minimum
                grader["threshold"] = self.threshold if minimum is None else float(minimum)
                if check is not None and "code" in check:
                    check["code"]["threshold"] = grader["threshold"]
                gates.append(name)
                report.group(
                    f"{title}.required → pass_rule.required: the eval fails when it scores under "
                    f"{grader['threshold']:g}, whatever the weighted mean",
                    label,
                    mapped=True,
                )
            known = {"name", "id", "type", "value", "prompt", "model", "threshold", "temperature", "weight",
                     "required", "negate", "flags", "criteria", "rubrics", "description", "min_score", "min", "max"}  # fmt: skip
            if kind == "code-grader":
                known |= set(item)  # its other keys are the program's config
            for key in item:
                if key not in known:
                    report.group(f"{title}.{key}: not converted", label)
            graders[name] = grader
            weights[name] = weight
        return graders, weights, gates

    def composite(
        self, item: dict, name: str, weight: float, context: dict, label: str, title: str,
        graders: dict, weights: dict, required: list,
    ) -> None:  # fmt: skip
        """A `composite` with a weighted-average aggregator: its members become graders of their own, named
        `<composite>-<member>`, weighted so the case's weighted mean is AgentV's (the composite's weight shared
        out by the members' weights)."""
        members = item.get("assertions", item.get("assert", item.get("evaluators")))
        if not isinstance(members, list) or not members:
            self.report.group(f"{title}: no members, left out", label, lost=True)
            return
        aggregator = item.get("aggregator") if isinstance(item.get("aggregator"), dict) else {}
        given = aggregator.get("weights") if isinstance(aggregator.get("weights"), dict) else {}
        weighted = []
        for member in members:
            if isinstance(member, dict) and as_text(member.get("name")) in given:
                member = {**member, "weight": given[as_text(member["name"])]}
            weighted.append(member)
        inner, inner_weights, inner_required = self.assertions(weighted, context, label)
        total = sum(inner_weights.values())
        for inner_name, grader in inner.items():
            full = f"{name}-{inner_name}"[:60]
            while full in graders:
                full = f"{full[:56]}-{len(graders)}"
            graders[full] = grader
            weights[full] = round(weight * inner_weights[inner_name] / total, 6)
            if inner_name in inner_required:
                required.append(full)
        if inner:
            self.report.group(
                f"{title} (weighted average) → its members as graders `{name}-…`, weighted by their share of it",
                label,
                mapped=True,
            )

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
            text = _criteria_template([t for t in texts if t], context)
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
            "llm_judge": {
                "criteria": "The reply meets every item of this checklist:\n" + "\n".join(lines),
                "threshold": self.threshold,
            }
        }
