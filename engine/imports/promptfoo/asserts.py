"""promptfoo / AgentV `assert` items → evalsite named graders (a test's score) or checks (a turn's).

Each item becomes one or more named graders with a weight: a `check` grader for the deterministic types
(contains, regex, equals, is-json, their `not-` forms...), an `llm_judge` grader whose rubric shows the judge
the reply ({submission}) for rubric items, a `code` check for AgentV code graders and promptfoo `python`
assertions. A group (`assert-set`, AgentV `composite`, `field-accuracy`, a weighted rubric list) becomes
one grader per member, each weighted by its share of the group's weight, so the weighted mean of the test is
the same as the tool's.

Plain Python: no Django here.
"""

from __future__ import annotations

import ast
import json
import math
import re
import textwrap
from dataclasses import dataclass, field

from engine import patterns
from engine.schema.checks import DATE_TOKEN

from ..common import as_number, as_share, as_text, attach, basename, find_file, safe_file_name, short

# AgentV judge-prompt and promptfoo rubricPrompt variables → evalsite rubric placeholders
PLACEHOLDERS = {
    "output": "{submission}",
    "answer": "{submission}",
    "candidate_answer": "{submission}",
    "input": "{input}",
    "question": "{input}",
    "expected_output": "{ground_truth}",
    "reference_answer": "{ground_truth}",
}
TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
JUDGE_TYPES = (
    "llm-rubric",
    "llm-grader",
    "llm_judge",
    "factuality",
    "model-graded-factuality",
    "rubric",
    "rubrics",
    "g-eval",
    "model-graded-closedqa",
)
TOOL_TYPES = ("tool-trajectory", "trajectory", "skill-trigger", "skill-used", "tool-call-f1", "is-valid-openai-tools-call",
              "is-valid-openai-function-call", "tool_trajectory", "expected_tool_calls", "trace-span-count")  # fmt: skip
BOUND_TYPES = ("latency", "cost", "execution-metrics", "token-usage", "token_usage")
ESCAPED_SUITE_VAR = re.compile(r"\\\{\\\{var:((?:[A-Za-z0-9_]|\\[.\-])+)\\\}\\\}")
WORD_TYPES = ("min-words", "max-words", "word-count")
# How an AgentV assertion script (`.agentv/assertions/min-words.ts`) writes its bound: `const minWords = 3`.
SCRIPT_WORD_BOUND = re.compile(r"\b(min|max)[_ ]?words\s*[:=]\s*(\d+)", re.IGNORECASE)
CODE_TYPES = ("code-grader", "script", "code", "code_judge", "code-judge")
GROUP_TYPES = ("assert-set", "composite")
GRADER_NAME = re.compile(r"[^A-Za-z0-9_-]+")
PROMPTFOO_JUDGE_PASS = 0.5
# The formats AgentV's field-accuracy reads a date in when a field names none.
AGENTV_DATE_FORMATS = ("YYYY-MM-DDTHH:mm:ssZ", "YYYY-MM-DDTHH:mm:ss", "YYYY-MM-DD", "DD-MMM-YYYY", "MM/DD/YYYY",
                       "DD/MM/YYYY", "MM-DD-YYYY", "DD-MM-YYYY")  # fmt: skip
NOT_REGEX_SAFE = re.compile(r"^\(\?[aiLmsux]+\)")


@dataclass
class Graded:
    """What a test's assertions became: named graders, their weights (0: reported only), the names that must
    pass whatever the mean, and, for a turn, the same as checks."""

    graders: dict[str, dict] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    check_weights: list[float] = field(default_factory=list)


@dataclass
class Context:
    """What an assertion may need from its test: its variables, the reference answer, the criteria text, the
    rubric prompt the suite gives the judge, the rendered prompt and where it is (for the report)."""

    variables: dict
    reference: str | None
    criteria: str
    rubric_prompt: str | None
    prompt: str
    where: str
    threshold: float | None  # the case's pass threshold (AgentV), which a grader's own defaults to
    live: bool = True  # the user message is sent live, so the judge's {input} holds it


class Assertions:
    """Converts assertion lists; `agentv` chooses AgentV's meanings (plain strings are rubric criteria, code
    graders read AgentV's payload) over promptfoo's."""

    def __init__(self, files, report, attached: dict[str, str], agentv: bool, render) -> None:
        self.files = files
        self.report = report
        self.attached = attached
        self.agentv = agentv
        self.render = render  # (template, variables, where) -> text, reporting what could not be rendered
        self.inline_code = 0
        self.plain_criteria: str | None = None  # the criterion of the judge grader being added, in words

    # -- a list of items ----------------------------------------------------------------------------------

    def convert(self, items: list, ctx: Context) -> Graded:
        out = Graded()
        if not isinstance(items, list):
            self.report.lose(
                f"{ctx.where}.assert: {short(items, 40)} — not a list of assertions, not converted"
            )
            return out
        strings = [item.strip() for item in items if isinstance(item, str) and item.strip()]
        rest = [(number, item) for number, item in enumerate(items) if not isinstance(item, str)]
        if strings:
            # AgentV groups plain strings into one rubric, weighted by how many there are.
            self.rubric_items(out, [{"outcome": text} for text in strings], float(len(strings)), ctx,
                              "criteria", required=False, threshold=None)  # fmt: skip
            self.report.group(
                "plain-string assert items → llm_judge graders (a rubric criterion each; the judge sees the reply)",
                ctx.where,
                mapped=True,
            )
        for number, item in rest:
            if not isinstance(item, dict):
                self.report.group(
                    f"assert item {short(item, 40)}: not a mapping, left out", ctx.where, lost=True
                )
                continue
            self.item(out, item, 1.0, ctx, f"{ctx.where}.assert[{number}]")
        return out

    def item(self, out: Graded, item: dict, share: float, ctx: Context, where: str) -> None:
        report = self.report
        kind = as_text(item.get("type")) or ""
        if item.get("negate") is True and kind not in JUDGE_TYPES and kind not in CODE_TYPES + ("python",):
            kind = kind.removeprefix("not-") if kind.startswith("not-") else f"not-{kind}"  # AgentV's negate
        weight = as_number(item.get("weight"))
        weight = 1.0 if weight is None or weight < 0 else float(weight)
        weight *= share
        required = item.get("required")
        threshold = as_share(item.get("threshold"))
        metric = as_text(item.get("metric")) or as_text(item.get("name"))
        negate = item.get("negate") is True and (kind in JUDGE_TYPES or kind in CODE_TYPES + ("python",))
        if negate:
            report.lose(f"{where}: negate: true on {kind} — evalsite cannot invert a judge's or a program's score; "
                        "not converted")  # fmt: skip
            return
        for key in ("provider", "target", "model"):
            if key in item:
                report.group(
                    f"an assertion's `{key}` (its judge): evalsite's judge is the suite's `judge`", where
                )
        for key in ("transform", "contextTransform"):
            if key in item:
                report.lose(f"{where}.{key}: the output is transformed before this assertion grades it — "
                            "evalsite grades the reply as it is, so the assertion is left out")  # fmt: skip
                return
        if kind in GROUP_TYPES:
            self.group(out, item, weight, ctx, where, kind)
            return
        if kind in JUDGE_TYPES:
            self.judge(out, item, weight, ctx, where, kind, metric, required, threshold)
            return
        if kind == "field-accuracy":
            self.field_accuracy(out, item, weight, ctx, where, metric)
            return
        if kind.removeprefix("not-").split(":")[0] in TOOL_TYPES:
            report.lose(f"{where}: {kind} — checks the agent's tool calls, which evalsite conversations do not "
                        "record yet; not converted")  # fmt: skip
            return
        if kind in BOUND_TYPES:
            check = self.bound(item, kind)
            if check is None:
                report.lose(f"{where}: {kind} {short({k: v for k, v in item.items() if k != 'type'}, 60)} — "
                            "evalsite has no latency or cost check; not converted")  # fmt: skip
                return
            self.add(out, metric or kind, {"kind": "check", "check": check}, check, weight, required,
                     threshold, ctx, where)  # fmt: skip
            return
        if kind in CODE_TYPES or kind == "python":
            check = self.code(item, ctx, where, kind)
            if check is not None:
                self.add(out, metric or kind, {"kind": "check", "check": check}, check, weight, required,
                         threshold, ctx, where)  # fmt: skip
            return
        check = self.simple(kind, item, ctx, where)
        if check is None:
            return
        self.add(out, metric or kind, {"kind": "check", "check": check}, check, weight, required, threshold,
                 ctx, where)  # fmt: skip

    # -- adding a grader ------------------------------------------------------------------------------------

    def add(self, out: Graded, wanted: str, grader: dict, check: dict | None, weight: float, required,
            threshold: float | None, ctx: Context, where: str) -> None:  # fmt: skip
        name = GRADER_NAME.sub("-", wanted).strip("-_")[:50] or "assert"
        if not name[0].isalnum():
            name = "a" + name
        base, number = name, 2
        while name in out.graders:
            name = f"{base}-{number}"
            number += 1
        own = threshold
        if isinstance(required, (int, float)) and not isinstance(required, bool) and as_share(required):
            own = float(required)  # AgentV: `required: 0.6` is the score this item must reach
        elif own is None:
            own = ctx.threshold
        if own is None and grader.get("kind") == "llm_judge":
            own = PROMPTFOO_JUDGE_PASS  # promptfoo's judge answers pass or fail; evalsite's scores 0-1
        if own is not None:
            grader["threshold"] = own
        out.graders[name] = grader
        out.weights[name] = weight
        if required is True or (as_share(required) and not isinstance(required, bool)):
            out.required.append(name)
        if check is not None:
            out.checks.append(check)
            out.check_weights.append(weight)
        elif grader.get("kind") == "llm_judge":
            out.checks.append(self.turn_judge(grader, ctx))
            out.check_weights.append(weight)
        self.plain_criteria = None

    def turn_judge(self, grader: dict, ctx: Context) -> dict:
        """A rubric grader as a check on one turn: its criterion (and reference answer), or a judge prompt with
        its placeholders in words (the judge is shown the conversation, the reply last)."""
        if self.plain_criteria is not None:
            spec = {"criteria": self.plain_criteria.strip()}
            if grader.get("threshold") is not None:
                spec["threshold"] = grader["threshold"]
            return {"llm_judge": spec}
        text = grader.get("rubric") or self.attached.get(grader.get("rubric_file", ""), "")
        words = {
            "{submission}": "[the assistant's last reply, shown in the conversation]",
            "{input}": "[the user's last message, shown in the conversation]",
            "{ground_truth}": ctx.reference or "",
        }
        for placeholder, said in words.items():
            text = text.replace(placeholder, said)
        text = text.replace("{{", "{").replace("}}", "}")
        spec: dict[str, object] = {"criteria": text.strip()}
        if grader.get("threshold") is not None:
            spec["threshold"] = grader["threshold"]
        return {"llm_judge": spec}

    # -- judges ---------------------------------------------------------------------------------------------

    def judge(self, out: Graded, item: dict, weight: float, ctx: Context, where: str, kind: str,
              metric: str | None, required, threshold: float | None) -> None:  # fmt: skip
        report = self.report
        value = item.get("value", item.get("rubrics", item.get("criteria")))
        prompt = item.get("prompt", item.get("rubricPrompt", item.get("rubric_prompt")))
        if isinstance(value, list):
            entries = []
            for entry in value:
                if isinstance(entry, str):
                    entries.append({"outcome": entry})
                elif isinstance(entry, dict) and isinstance(entry.get("score_ranges"), dict):
                    entries.append({**entry, "outcome": _ranges(entry), "required": entry.get("min_score")})
                elif isinstance(entry, dict) and as_text(entry.get("outcome") or entry.get("criteria")
                                                          or entry.get("description")):  # fmt: skip
                    entries.append(entry)
                else:
                    report.group(
                        f"{kind} item {short(entry, 40)}: not a criterion, left out", where, lost=True
                    )
            if entries:
                self.rubric_items(
                    out, entries, weight, ctx, metric or kind, required, threshold, prompt, where
                )
            return
        criteria = as_text(value) if value is not None else None
        if criteria is None and prompt is None:
            criteria = ctx.criteria or None
            if criteria is None:
                report.lose(f"{where}: {kind} with no rubric and no criteria — not converted")
                return
        if criteria is not None:
            criteria = self.load_text(criteria, where) or criteria
            criteria = self.render(criteria, ctx.variables, where)
        if kind == "model-graded-closedqa":
            criteria = f"The reply meets this criterion: {criteria}"
        elif kind in ("factuality", "model-graded-factuality"):
            criteria = f"The reply is factually consistent with this (it may say less, but must not contradict it): {criteria}"
        grader = self.judge_grader(criteria or ctx.criteria, prompt, ctx, where)
        if grader is None:
            return
        self.add(out, metric or kind, grader, None, weight, required, threshold, ctx, where)
        report.group(f"{kind} → an llm_judge grader (the judge sees the reply as {{submission}})", where,
                     mapped=True)  # fmt: skip

    def rubric_items(self, out: Graded, entries: list[dict], weight: float, ctx: Context, base: str, required,
                     threshold: float | None, prompt=None, where: str | None = None) -> None:  # fmt: skip
        """A weighted list of rubric criteria: one judge grader each, weighted by its share of the list's
        weight (their weighted mean is the list's score)."""
        weights = []
        for entry in entries:
            own = as_number(entry.get("weight"))
            weights.append(1.0 if own is None or own <= 0 else float(own))
        total = sum(weights)
        for entry, own in zip(entries, weights, strict=True):
            text = as_text(entry.get("outcome") or entry.get("criteria") or entry.get("description")) or ""
            text = self.render(text, ctx.variables, where or ctx.where)
            grader = self.judge_grader(text, prompt, ctx, where or ctx.where)
            if grader is None:
                return
            entry_required = entry.get("required", required)
            name = as_text(entry.get("id")) or (
                base if len(entries) == 1 else f"{base}-{len(out.graders) + 1}"
            )
            self.add(out, name, grader, None, weight * own / total, entry_required,
                     as_share(entry.get("threshold")) or threshold, ctx, where or ctx.where)  # fmt: skip

    def judge_grader(self, criteria: str | None, prompt, ctx: Context, where: str) -> dict | None:
        """An llm_judge grader: the given judge prompt (a file, inline text, or the suite's rubric prompt)
        with the tool's variables as evalsite's placeholders, else a rubric in the tool's own words that
        shows the judge the criterion, the reference answer and the reply."""
        template = None
        if prompt is not None:
            text = as_text(prompt)
            if text is None:
                self.report.lose(f"{where}: a judge prompt built by {short(prompt, 60)} — evalsite cannot run "
                                 "it; not converted")  # fmt: skip
                return None
            loaded = self.load_text(text, where)
            if loaded is None and _is_path(text):
                return None
            template = loaded if loaded is not None else text
        elif ctx.rubric_prompt:
            template = ctx.rubric_prompt
        if template is None:
            grader_criteria = criteria or ""
            if ctx.reference:
                grader_criteria += (
                    f"\n\nA reference answer (the reply need not match it word for word):\n{ctx.reference}"
                )
            self.plain_criteria = grader_criteria
            parts = ["Grade the reply against this criterion:", rubric_escape(criteria or "")]
            if ctx.reference:
                parts += ["A reference answer (the reply need not match it word for word):", "{ground_truth}"]
            parts += ["The reply:", "{submission}"]
            return {"kind": "llm_judge", "rubric": "\n\n".join(parts) + "\n"}
        return {"kind": "llm_judge", "rubric": self.rubric_text(template, criteria or "", ctx, where)}

    def rubric_text(self, template: str, criteria: str, ctx: Context, where: str) -> str:
        pieces, at = [], 0
        for match in TEMPLATE_VAR.finditer(template):
            pieces.append(rubric_escape(template[at : match.start()]))
            name = match.group(1)
            if name in ("input", "question") and not ctx.live:
                pieces.append(rubric_escape(ctx.prompt))  # a given history: evalsite's {input} would be empty
            elif name in PLACEHOLDERS:
                pieces.append(PLACEHOLDERS[name])
            elif name in ("rubric", "rubrics", "criteria", "expected_outcome"):
                pieces.append(rubric_escape(criteria))
            elif name.split(".")[0] in ctx.variables:
                pieces.append(rubric_escape(self.render(match.group(0), ctx.variables, where)))
            else:
                self.report.group(
                    f"judge prompt variable {match.group(0)}: unknown, left out of the prompt",
                    where,
                    lost=True,
                )
            at = match.end()
        pieces.append(rubric_escape(template[at:]))
        text = "".join(pieces).strip()
        if "{submission}" not in text:
            text += "\n\nThe reply:\n{submission}"
        return text + "\n"

    # -- groups ---------------------------------------------------------------------------------------------

    def group(self, out: Graded, item: dict, weight: float, ctx: Context, where: str, kind: str) -> None:
        members = item.get("assert", item.get("assertions", item.get("graders")))
        if not isinstance(members, list) or not members:
            self.report.lose(f"{where}: {kind} with no members — not converted")
            return
        aggregator = item.get("aggregator")
        weights = aggregator.get("weights") if isinstance(aggregator, dict) else None
        if isinstance(aggregator, dict) and aggregator.get("type") not in (None, "weighted_average"):
            self.report.lose(f"{where}: {kind} aggregator {short(aggregator, 60)} — a custom aggregation "
                             "evalsite cannot run; the group is left out")  # fmt: skip
            return
        if as_share(item.get("threshold")) is not None:
            # The test's weighted mean is the same; a group that passes on its own share of passes is not.
            self.report.group(f"{kind} threshold: its members are weighed into the test's mean instead of "
                              "passing as a group", where, lost=not self.agentv)  # fmt: skip
        shares = []
        for member in members:
            own = None
            if isinstance(member, dict):
                name = as_text(member.get("metric") or member.get("name"))
                own = as_number(weights.get(name)) if isinstance(weights, dict) and name else None
                own = as_number(member.get("weight")) if own is None else own
            shares.append(1.0 if own is None or own <= 0 else float(own))
        total = sum(shares)
        for number, (member, own) in enumerate(zip(members, shares, strict=True)):
            at = f"{where}.assert[{number}]"
            if isinstance(member, str):
                self.rubric_items(out, [{"outcome": member}], weight * own / total, ctx, "criteria",
                                  item.get("required"), None, None, at)  # fmt: skip
            elif isinstance(member, dict):
                member = {**member, "weight": 1.0}
                if item.get("required") and "required" not in member:
                    member["required"] = item["required"]
                self.item(out, member, weight * own / total, ctx, at)
        self.report.group(f"{kind} → its members as graders, each weighted by its share", where, mapped=True)

    def field_accuracy(self, out: Graded, item: dict, weight: float, ctx: Context, where: str,
                       metric: str | None) -> None:  # fmt: skip
        fields = field_accuracy(item, ctx.reference, self.report, where)
        every = item.get("aggregation") == "all_or_nothing"
        for dotted, check, share in fields:
            self.add(out, f"{metric or 'field'}-{dotted}", {"kind": "check", "check": check}, check,
                     weight * share, True if every else None, None, ctx, where)  # fmt: skip

    # -- deterministic checks -------------------------------------------------------------------------------

    def simple(self, kind: str, item: dict, ctx: Context, where: str) -> dict | None:
        report = self.report
        value = item.get("value")
        if isinstance(value, str):
            value = self.render(value, ctx.variables, where)
        elif isinstance(value, list):
            value = [self.render(v, ctx.variables, where) if isinstance(v, str) else v for v in value]
        negated = kind.startswith("not-")
        base = kind.removeprefix("not-")
        texts = _texts(value)
        check: dict | None = None
        if base == "is-json":
            check = {"is_json": not negated}
            if value is not None:
                report.group("is-json schema: the reply is checked to be JSON, not against the schema", where,
                             lost=True)  # fmt: skip
        elif base in ("contains", "icontains", "equals", "starts-with", "ends-with", "regex") and texts:
            text = texts[0]
            if base == "regex":
                pattern = text
            elif base == "equals":
                pattern = rf"^\s*{re.escape(text)}\s*\Z"
            elif base == "starts-with":
                pattern = rf"^{re.escape(text)}"
            elif base == "ends-with":
                pattern = rf"{re.escape(text)}\s*\Z"
            else:
                pattern = re.escape(text)
            flags = "(?i)" if base == "icontains" else ""
            if not negated and base == "icontains":
                check = {"contains": text}
            elif not negated and base == "equals":
                check = {"equals": text}
            elif not negated:
                check = {"regex": flags + pattern}
            else:
                check = {"regex": _negated(pattern, flags)}
        elif base in ("contains-any", "icontains-any", "contains-all", "icontains-all") and texts:
            flags = "(?i)" if base.startswith("i") else ""
            escaped = [re.escape(text) for text in texts]
            if base.endswith("any"):
                pattern = "(?:" + "|".join(escaped) + ")"
            else:
                pattern = "".join(rf"(?=[\s\S]*{text})" for text in escaped)
            check = {
                "regex": _negated(pattern, flags)
                if negated
                else flags + (pattern if base.endswith("any") else "^" + pattern)
            }
        elif base == "similar" and texts and not negated:
            spec: dict[str, object] = {
                "expected": texts[0],
                "threshold": as_share(item.get("threshold")) or 0.75,
            }
            check = {"semantic": spec}
            if len(texts) > 1:
                check = {"or": [{"semantic": {**spec, "expected": text}} for text in texts]}
        elif base in WORD_TYPES and not negated:
            check = self.words(base, item, where)
            if check is None:
                return None
        elif base in ("max-length", "min-length"):
            report.lose(f"{where}: {kind} — evalsite counts tokens and words, not characters; not converted")
            return None
        elif base in ("javascript", "webhook"):
            report.lose(f"{where}: {kind} assertion ({short(value, 60)}) — evalsite runs programs and Python "
                        "graders, not JavaScript callables or webhooks; not converted")  # fmt: skip
            return None
        else:
            shown = f" {short(value, 40)}" if value is not None else ""
            report.lose(
                f"{where}: {kind or 'an item without a type'}{shown} — no evalsite equivalent; not converted"
            )
            return None
        if check is not None and isinstance(check.get("regex"), str):
            check["regex"] = _suite_vars_unescaped(check["regex"])
        if check is None or not _valid(check):
            report.lose(f"{where}: {kind} {short(value, 60)} — no value, or a pattern evalsite cannot run; "
                        "not converted")  # fmt: skip
            return None
        report.group(f"{kind} → a check grader", where, mapped=True)
        return check

    def words(self, kind: str, item: dict, where: str) -> dict | None:
        return word_check(kind, item, self.files if self.agentv else {}, self.report, where)

    def bound(self, item: dict, kind: str) -> dict | None:
        """Token bounds evalsite checks: the reply's completion tokens."""
        for key in ("max_output", "max_output_tokens", "max_completion_tokens"):
            number = as_number(item.get(key))
            if number is not None and number >= 0:
                return {"max_tokens": int(number)}
        return None

    # -- code -----------------------------------------------------------------------------------------------

    def code(self, item: dict, ctx: Context, where: str, kind: str) -> dict | None:
        report = self.report
        if kind == "python":
            value = as_text(item.get("value"))
            if value is None:
                report.lose(f"{where}: python assertion without code — not converted")
                return None
            spec = self.python(value, where)
            if spec is None:
                return None
            spec["dialect"] = "promptfoo"
            spec["config"] = {"vars": _jsonable(ctx.variables), "prompt": ctx.prompt,
                              "config": item.get("config") if isinstance(item.get("config"), dict) else {}}  # fmt: skip
        else:
            command = item.get("command", item.get("script", item.get("path", item.get("value"))))
            if isinstance(command, str):
                command = command.removeprefix("file://").split()
            if not isinstance(command, list) or not command or not all(isinstance(p, str) for p in command):
                report.lose(f"{where}: {kind} without a command — not converted")
                return None
            if command[:2] == ["uv", "run"] and len(command) > 2:
                # uv runs a Python script in its environment; evalsite's grader runs it with python3
                rest = command[2:]
                command = ["python3", *(rest[1:] if rest[0] in ("python", "python3") else rest)]
                report.group(
                    "`uv run` grader command → python3 (uv is not assumed installed)", where, mapped=True
                )
            spec = {"command": [self.attach_arg(part, where) for part in command], "dialect": "agentv"}
            config = {k: v for k, v in item.items() if k not in ("type", "command", "script", "path", "value",
                      "metric", "name", "weight", "required", "threshold", "cwd", "target")}  # fmt: skip
            spec["config"] = {"criteria": ctx.criteria, "config": _jsonable(config.get("config", config))}
            if item.get("cwd") not in (None, "."):
                report.group(
                    f"{kind} cwd {short(item['cwd'])}: the command runs in the suite's folder", where
                )
        threshold = as_share(item.get("threshold")) or ctx.threshold
        if threshold is not None:
            spec["threshold"] = threshold
        report.group(f"{kind} → a code check ({spec['dialect']} dialect: the grader is handed what "
                     f"{'AgentV' if spec['dialect'] == 'agentv' else 'promptfoo'} hands it)", where, mapped=True)  # fmt: skip
        return {"code": spec}

    def python(self, value: str, where: str) -> dict | None:
        if value.startswith("file://"):
            path, _, function = value.removeprefix("file://").partition(":")
            found = find_file(self.files, path)
            module = re.sub(r"\W", "_", basename(path).removesuffix(".py")) or "assertion"
            if module[0].isdigit():
                module = "m" + module
            if found is None:
                self.report.need(basename(path))
                self.report.group(
                    f"python assertion {path}: not uploaded — upload it and import again", where
                )
            else:
                module = attach(self.attached, f"{module}.py", found[1]).removesuffix(".py")
            return {"function": f"{module}:{function or 'get_assert'}"}
        self.inline_code += 1
        module = f"promptfoo_assert_{self.inline_code}"
        module = attach(self.attached, f"{module}.py", _inline_python(value)).removesuffix(".py")
        self.report.group(f"inline python assertion → attached {module}.py (get_assert)", where, mapped=True)
        return {"function": f"{module}:get_assert"}

    def attach_arg(self, part: str, where: str) -> str:
        """A command's argument naming a file of the project: the attached copy's name, the file attached."""
        if not re.search(r"\.(py|ts|js|mjs|cjs|sh|rb)$", part):
            return part
        found = find_file(self.files, part)
        name = safe_file_name(part)
        if found is None:
            self.report.need(name)
            self.report.group(f"grader script {part}: not uploaded — upload it and import again", where)
        else:
            name = attach(self.attached, name, found[1])
        return name

    # -- files ----------------------------------------------------------------------------------------------

    def load_text(self, text: str, where: str) -> str | None:
        """The text of a file a value names (`file://x.md`, `../prompts/x.md`), or None when it names none."""
        if not _is_path(text):
            return None
        path = text.removeprefix("file://")
        if path.lower().endswith((".py", ".js", ".ts", ".mjs", ".cjs")):
            self.report.lose(f"{where}: judge prompt {path} is code — evalsite cannot run it; not converted")
            return None
        found = find_file(self.files, path)
        if found is None:
            self.report.need(basename(path))
            self.report.group(f"{path}: not uploaded — upload it and import again", where, lost=True)
            return None
        self.report.group(f"{found[0]} → the judge's prompt", where, mapped=True)
        return found[1]


_NOTHING = object()


def _inline_python(code: str) -> str:
    """promptfoo's inline python as a module: one line is an expression returned; several lines are the body
    of the function, with `json` imported as promptfoo does. A body whose last line is a bare expression (no
    `return` anywhere) returns it, as its authors mean."""
    body = textwrap.dedent(code.strip("\n"))
    lines = body.splitlines()
    if len(lines) == 1 and not lines[0].lstrip().startswith("return"):
        lines = [f"return ({lines[0].strip()})"]
    elif not re.search(r"^\s*return\b", body, re.MULTILINE):
        last = max((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")),
                   default=None)  # fmt: skip
        if last is not None and not lines[last][:1].isspace():
            try:
                ast.parse(lines[last].strip(), mode="eval")
                lines[last] = f"return ({lines[last].strip()})"
            except SyntaxError:
                pass
    indented = "\n".join(f"    {line}" if line.strip() else "" for line in lines)
    return f"import json\n\n\ndef get_assert(output, context):\n{indented}\n"


def _ranges(entry: dict) -> str:
    """A criterion written as score levels (AgentV's `score_ranges`, 0 to 10), in words for the judge."""
    levels = sorted(entry["score_ranges"].items(), key=lambda pair: as_number(_float(pair[0])) or 0)
    lines = [f"- {level}/10: {text}" for level, text in levels]
    name = as_text(entry.get("id")) or "criterion"
    return (
        f"{name}: score the reply by these levels (the score is the level reached, divided by 10):\n"
        + "\n".join(lines)
    )


def _float(text: object) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def field_accuracy(item: dict, reference: str | None, report, where: str) -> list[tuple[str, dict, float]]:
    """AgentV's field-accuracy as one check per field, each with its share of the item's weight: (dotted path,
    check, share). A field the expected output does not hold scores 1 in AgentV, so it stays as a check that
    always passes; a required field the reply lacks fails; an optional one it lacks passes (AgentV leaves it
    out of the average). `all_or_nothing` makes each field required (the caller's part)."""
    fields = item.get("fields")
    try:
        expected = json.loads(reference) if reference else None
    except ValueError:
        expected = None
    if not isinstance(fields, list) or not isinstance(expected, dict):
        report.lose(f"{where}: field-accuracy without fields or an expected_output object — not converted")
        return []
    every = item.get("aggregation") == "all_or_nothing"
    if item.get("required") and not every:
        report.group("required on a weighted field-accuracy: AgentV gates on the fields' average, evalsite's "
                     "graders are its fields one by one; the gate is not kept", where, lost=True)  # fmt: skip
    usable = []
    for index, spec in enumerate(fields):
        path = as_text(spec.get("path")) if isinstance(spec, dict) else None
        weight = as_number(spec.get("weight")) if isinstance(spec, dict) else None
        weight = 1.0 if weight is None else weight
        if path is None or weight <= 0:
            continue  # a field without a path or a weight counts nothing in AgentV's average
        dotted = re.sub(r"\[(\d+)\]", r".\1", path).strip(".")
        check = _field_check(spec, dotted, _dig(expected, dotted), report, f"{where}.fields[{index}]")
        if check is not None:
            usable.append((dotted, check, weight))
    total = sum(weight for _, _, weight in usable)
    if usable:
        report.group("field-accuracy fields → field_equals graders, each with its share of the weight"
                     + (" and required (all_or_nothing)" if every else ""), where, mapped=True)  # fmt: skip
    return [(dotted, check, weight / total) for dotted, check, weight in usable]


def _field_check(spec: dict, dotted: str, value: object, report, where: str) -> dict | None:
    match = spec.get("match", "exact")
    if value is _NOTHING:
        report.group("field-accuracy field the expected output does not hold: AgentV scores it 1 → a check "
                     "that always passes (min_words: 0), keeping its weight", where, mapped=True)  # fmt: skip
        return {"min_words": 0}
    if not _finite(value):
        report.lose(f"{where}: field {dotted} — its expected value holds NaN or an infinity, which no JSON "
                    "reply can; not converted")  # fmt: skip
        return None
    compare: dict = {"path": dotted, "value": value}
    if match == "numeric_tolerance":
        compare["tolerance"] = abs(as_number(spec.get("tolerance")) or 0.0)
        if spec.get("relative") is True:
            compare["relative"] = True
    elif match == "date":
        formats = spec.get("formats")
        written = formats if isinstance(formats, list) else []
        readable = [f for f in written if isinstance(f, str) and DATE_TOKEN.search(f)]
        compare["date_formats"] = readable or list(AGENTV_DATE_FORMATS)
    elif match != "exact":
        report.lose(f"{where}: field {dotted} (match: {short(match, 30)}) — AgentV scores an unknown match 0; "
                    "not converted")  # fmt: skip
        return None
    if spec.get("required") is False:
        compare["optional"] = True
    return {"field_equals": compare}


def _suite_vars_unescaped(pattern: str) -> str:
    """`{{var:NAME}}` as written in a pattern built with re.escape, so the run still fills it in."""
    return ESCAPED_SUITE_VAR.sub(lambda found: "{{var:" + found.group(1).replace("\\", "") + "}}", pattern)


def _finite(value: object) -> bool:
    """No NaN or infinity anywhere in a YAML value (`.nan`, `.inf`)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


def word_check(kind: str, item: dict, files, report, where: str) -> dict | None:
    """Word bounds: `min-words` / `max-words` (AgentV, the bound given or written in its assertion script
    `.agentv/assertions/<type>.ts`, found among `files`) and `word-count` (promptfoo: a number is the exact
    count, or `{min, max}`; AgentV's own was a script). Words are runs of non-whitespace in every tool."""
    low, high = _word_bounds(kind, item)
    script = None
    if low is None and high is None:
        for suffix in (".ts", ".js", ".mts", ".mjs"):
            script = find_file(files, f".agentv/assertions/{kind}{suffix}")
            if script is not None:
                break
        for side, number in SCRIPT_WORD_BOUND.findall(script[1] if script else ""):
            if side.lower() == "min" and low is None and kind != "max-words":
                low = int(number)
            elif side.lower() == "max" and high is None and kind != "min-words":
                high = int(number)
    if low is None and high is None:
        report.lose(f"{where}: {kind} — no word bound given (nor an assertion script that writes one); "
                    "not converted")  # fmt: skip
        return None
    if script is not None:
        report.group(f"{kind}: its bound read from its assertion script {script[0]} (a reply under it scores "
                     "0, not the script's partial score)", where, mapped=True)  # fmt: skip
    if high is None:
        return {"min_words": low}
    if low is None or low == 0 and high == 0:
        return {"max_words": high}
    # Both bounds in one check: a reply of `low` to `high` whitespace-separated words, whole.
    words = rf"(?:\S+\s+){{{max(low - 1, 0)},{max(high - 1, 0)}}}\S+"
    pattern = rf"\A\s*{words}\s*\Z"
    return {"regex": pattern if low > 0 else rf"\A\s*(?:{words})?\s*\Z"}


def _word_bounds(kind: str, item: dict) -> tuple[int | None, int | None]:
    """The (min, max) words an item gives: `value` (a number, or `{min, max}`), or `min` / `max` keys."""
    value = item.get("value")
    given = (
        value
        if isinstance(value, dict)
        else item.get("config")
        if isinstance(item.get("config"), dict)
        else item
    )
    low = _count(given.get("min")) if isinstance(given, dict) else None
    high = _count(given.get("max")) if isinstance(given, dict) else None
    number = _count(value)
    if number is not None and kind == "min-words":
        low = number
    elif number is not None and kind == "max-words":
        high = number
    elif number is not None:
        low = high = number
    if low is not None and high is not None and low > high:
        return None, None
    return low, high


def _count(value: object) -> int | None:
    number = as_number(value)
    return int(number) if number is not None and number >= 0 and number == int(number) else None


def _dig(value: object, path: str) -> object:
    for step in path.split("."):
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return _NOTHING
    return value


def _is_path(text: str) -> bool:
    stripped = text.strip()
    if "\n" in stripped or len(stripped) > 300:
        return False
    return stripped.startswith(("file://", "./", "../")) or bool(
        re.fullmatch(r"[\w./-]+\.(md|txt|prompt|j2|jinja|hbs|json|yaml|yml|py|js|ts)", stripped)
    )


def rubric_escape(text: str) -> str:
    """Braces made literal for a rubric (a str.format template), but for suite variables, which evalsite
    fills before the rubric is formatted."""
    pieces = re.split(r"(\{\{\s*var:[^{}\s]+\s*\}\})", text)
    return "".join(
        piece if index % 2 else piece.replace("{", "{{").replace("}", "}}")
        for index, piece in enumerate(pieces)
    )


def _texts(value: object) -> list[str]:
    if isinstance(value, list):
        return [t for t in (as_text(v) for v in value) if t]
    text = as_text(value)
    return [text] if text else []


def _negated(pattern: str, flags: str) -> str:
    found = NOT_REGEX_SAFE.match(pattern)
    if found:
        flags, pattern = flags + found.group(0), pattern[found.end() :]
    return rf"{flags}^(?![\s\S]*?(?:{pattern}))"


def _valid(check: dict) -> bool:
    pattern = check.get("regex")
    if pattern is None:
        return True
    try:
        patterns.validate(pattern)
    except patterns.InvalidPattern:
        return False
    return True


def _jsonable(value: object) -> object:
    """Data handed to a grader as it is, with what JSON cannot hold (dates, NaN, infinities) as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return json.loads(json.dumps(value, default=str))
