"""promptfoo / AgentV `assert` items → evalsite named graders (a test's score) or checks (a turn's).

Each item becomes one or more named graders with a weight: a `check` grader for the deterministic types
(contains, regex, equals, is-json, their `not-` forms...), an `llm_judge` grader whose rubric shows the judge
the reply ({submission}) for rubric items, a `code` check for AgentV code graders and promptfoo `python`
assertions. A group (`assert-set`, AgentV `composite`, `field-accuracy`, a weighted rubric list) becomes
one grader per member, each weighted by its share of the group's weight, so the weighted mean of the test is
the same as the tool's. `judges` reads the judge assertions, `code` the code ones.

Plain Python: no Django here.
"""

from __future__ import annotations

import re

from ..common import as_number, as_share, as_text, short
from ..toolcalls import Declared, is_trajectory, trajectory_checks
from .checks import (
    BOUND_TYPES,
    CODE_TYPES,
    GRADER_NAME,
    GROUP_TYPES,
    JUDGE_TYPES,
    PROMPTFOO_JUDGE_PASS,
    TOOL_TYPES,
    WORD_TYPES,
    Context,
    Graded,
    field_accuracy,
    is_valid_check,
    negated_pattern,
    suite_vars_unescaped,
    texts_of,
    word_check,
)
from .code import CodeChecks
from .judges import Judges


class Assertions(Judges, CodeChecks):
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
        self.declared = Declared()  # the tools the trajectory checks name, offered to the model

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
        if self.agentv and required is True and as_share(item.get("min_score")) is not None:
            threshold = float(item["min_score"])  # AgentV gates a required grader at its min_score, if given
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
        if is_trajectory(kind):
            plain = {key: value for key, value in item.items() if key != "negate"}  # already in `kind`
            for suffix, check, part in trajectory_checks(plain, kind, where, report, self.declared):
                grader = {"kind": "check", "check": check}
                self.add(out, (metric or kind) + suffix, grader, check, weight * part, required, threshold,
                         ctx, where)  # fmt: skip
            return
        if kind.removeprefix("not-").split(":")[0] in TOOL_TYPES:
            report.lose(f"{where}: {kind} — checks the agent's skills or scores its calls in a way evalsite's "
                        "tool checks (tool_called, tool_sequence, ...) do not; not converted")  # fmt: skip
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
        texts = texts_of(value)
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
                check = {"regex": negated_pattern(pattern, flags)}
        elif base in ("contains-any", "icontains-any", "contains-all", "icontains-all") and texts:
            flags = "(?i)" if base.startswith("i") else ""
            escaped = [re.escape(text) for text in texts]
            if base.endswith("any"):
                pattern = "(?:" + "|".join(escaped) + ")"
            else:
                pattern = "".join(rf"(?=[\s\S]*{text})" for text in escaped)
            check = {
                "regex": negated_pattern(pattern, flags)
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
            check["regex"] = suite_vars_unescaped(check["regex"])
        if check is None or not is_valid_check(check):
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
