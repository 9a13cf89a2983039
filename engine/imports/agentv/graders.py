"""AgentV's grader lists as evalsite's: `assertions` (and v2 `evaluators`) as named graders under a weighted
pass rule, a composite as its members, `rubrics` as one judge, a conversation turn's assertions as its
checks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from ..common import Report, as_number, as_share, as_text, short
from ..promptfoo.checks import field_accuracy, word_check
from ..toolcalls import is_trajectory, trajectory_checks
from .checks import ItemChecks, criteria_template, default_criteria, kind_of

GRADER_NAME = re.compile(r"[^A-Za-z0-9_-]+")
UNCONVERTED_EVALUATORS = {
    "code": "runs a script",
    "code_judge": "runs a script",
    "expected_tool_calls": "checks the tool_calls of expected_messages, and the case's have none",
    "composite": "combines evaluators with weights",
    "field_accuracy": "compares fields of structured output",
    "latency": "checks timing",
    "cost": "checks cost",
    "token_usage": "checks token use",
}
TEXT_CHECKS = ("contains", "icontains", "contains-any", "icontains-any", "contains-all", "icontains-all",
               "starts-with", "ends-with", "regex", "equals")  # fmt: skip


def weighted_composite(item: dict) -> bool:
    aggregator = item.get("aggregator")
    kind = kind_of(aggregator.get("type")) if isinstance(aggregator, dict) else "weighted-average"
    return kind in ("weighted-average", "?")


def typed_items(items: list, where: str, report: Report) -> Iterator[tuple[int, dict, str]]:
    """The mappings of an assertions list with their index and kind; text items are read as one judge
    apart, and anything else is a loss."""
    for number, item in enumerate(items):
        if isinstance(item, str):
            continue
        if not isinstance(item, dict):
            report.group("assertions that are neither text nor mappings: left out", where, lost=True)
            continue
        yield number, item, kind_of(item.get("type"))


def expected_calls(context: dict) -> list[dict]:
    """The `tool_calls` ({tool, input}) of a case's expected assistant messages, in order: what AgentV's
    `expected_tool_calls` evaluator matches against the trace, one after another."""
    calls = []
    for message in context.get("_expected_messages") or []:
        listed = message.get("tool_calls") if isinstance(message, dict) else None
        for call in listed if isinstance(listed, list) else []:
            if isinstance(call, dict):
                args = call.get("input", call.get("args"))
                calls.append(
                    {
                        "tool": call.get("tool", call.get("name")),
                        **({"args": args} if isinstance(args, dict) else {}),
                    }
                )
    return calls


class Graders(ItemChecks):
    """The grading half of AgentV's case converter, each list item read by `ItemChecks`."""

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
        for number, item, kind in typed_items(items, where, report):
            title = f"{where}[{number}] {as_text(item.get('name')) or kind}"
            if kind in TEXT_CHECKS:
                check = self.text_check(kind, item, where.split(".")[0], title)
                if check is not None:
                    checks.append(check)
            elif kind == "is-json":
                checks.append({"is_json": item.get("negate") is not True})
            elif is_trajectory(kind):
                found = trajectory_checks(item, kind, title, report, self.declared)
                checks += [check for _, check, _ in found]
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
                    criteria_text = criteria_template(
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
            elif kind in ("expected_tool_calls", "expected_messages") and expected_calls(context):
                found = trajectory_checks(
                    {"mode": "in_order", "expected": expected_calls(context)}, "tool-trajectory",
                    f"{label}: {title}", report, self.declared,
                )  # fmt: skip
                out += [check for _, check, _ in found]
                report.group(f"{title} ({kind}): the tool_calls of expected_messages, matched in order → "
                              "tool_sequence in_order", label, mapped=True)  # fmt: skip
            elif is_trajectory(kind_of(kind)):
                found = trajectory_checks(
                    evaluator, kind_of(kind), f"{label}: {title}", report, self.declared
                )
                out += [check for _, check, _ in found]
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

    def assertions(
        self, raw: object, context: dict, label: str, whole: bool = False
    ) -> tuple[dict, dict, list]:
        """`assertions` (earlier `assert`) as named graders of the eval, their names kept, with AgentV's weights
        (default 1) for the weighted pass rule, and the names of the `required` ones (AgentV fails a case
        whose required grader fails). Text items are one rubric judge, as AgentV groups them. `whole`: they
        grade a conversation once, after its last turn."""
        report = self.report
        if not isinstance(raw, list):
            report.group("assertions: not a list, left out", label, lost=True)
            return {}, {}, []
        graders: dict[str, dict] = {}
        weights: dict[str, float] = {}
        gates: list[str] = []
        criteria = [as_text(item) for item in raw if isinstance(item, str) and as_text(item)]
        if criteria:
            rubric, _ = self.rubric_text(criteria_template(criteria, context, whole), context, label)
            graders["criteria"] = {"kind": "llm_judge", "rubric": rubric, "threshold": self.threshold}
            weights["criteria"] = 1.0
            report.group(
                "assertions written as text → one llm_judge grader `criteria` scoring the share of them met "
                "(AgentV's rubric grader)",
                label,
                mapped=True,
            )
        for number, item, kind in typed_items(raw, label, report):
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
            elif is_trajectory(kind):
                for suffix, traj_check, share in trajectory_checks(
                    item, kind, f"{label}: {title}", report, self.declared
                ):
                    own = GRADER_NAME.sub("-", f"{name}{suffix}")[:60]
                    graders[own] = {"kind": "check", "check": traj_check, "threshold": self.threshold}
                    weights[own] = weight * share
                    if item.get("required") is True:
                        gates.append(own)
                continue
            elif kind == "composite" and weighted_composite(item):
                self.composite(item, name, weight, context, label, title, graders, weights, gates, whole)
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
        graders: dict, weights: dict, required: list, whole: bool = False,
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
        inner, inner_weights, inner_required = self.assertions(weighted, context, label, whole)
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

    def rubrics(self, items: list, label: str) -> dict:
        """v2 `rubrics` as one judge of the checklist, scored as AgentV scores it: the weighted share of its
        items met. An item's `required` fails only the rubric's verdict in AgentV, never the case, so the
        judge is not told of it."""
        lines = []
        weights = []
        for item in items:
            if isinstance(item, str):
                lines.append(item)
                weights.append(1.0)
            elif isinstance(item, dict) and as_text(item.get("description") or item.get("outcome")):
                lines.append(as_text(item.get("description") or item.get("outcome")))
                weight = as_number(item.get("weight"))
                weights.append(1.0 if weight is None or weight <= 0 else float(weight))
        weighted = len(set(weights)) > 1
        listed = "\n".join(
            f"- {text}" + (f" (weight {weight:g})" if weighted else "")
            for text, weight in zip(lines, weights, strict=True)
        )
        self.report.group(
            "rubrics → one llm_judge check scoring the share of the checklist met", label, mapped=True
        )
        return {
            "llm_judge": {
                "criteria": "Score each item of this checklist 1 when the reply meets it and 0 when it does not; "
                f"the score is their {'weighted mean' if weighted else 'mean'}:\n{listed}",
                "threshold": self.threshold,
            }
        }
