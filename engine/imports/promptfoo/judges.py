"""promptfoo / AgentV judge assertions (`llm-rubric`, `llm-grader`, rubric lists, …) as `llm_judge` graders
whose rubric shows the judge the reply, or as a turn's judge check."""

from __future__ import annotations

from ..common import as_number, as_share, as_text, short
from .checks import PLACEHOLDERS, TEMPLATE_VAR, Context, Graded, is_path, ranges_text, rubric_escape


class Judges:
    """The judge half of `Assertions`: it uses the converter's `files`, `report`, `attached`, `agentv`,
    `render` and `plain_criteria`."""

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
                    entries.append({**entry, "outcome": ranges_text(entry)})
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
        """A weighted list of rubric criteria, which AgentV grades as one rubric scoring the weighted share
        met: one judge grader each, weighted by its share of the list's weight (their weighted mean is the
        list's score). A criterion's own `required` (AgentV's default) or `min_score` fails only the rubric's
        verdict, and AgentV passes a case on its score, so neither gates the eval here. A list that is itself
        `required` gates the eval on that score: one judge grader scores the whole list."""
        weights = []
        for entry in entries:
            own = as_number(entry.get("weight"))
            weights.append(1.0 if own is None or own <= 0 else float(own))
        total = sum(weights)
        at = where or ctx.where
        texts = [
            self.render(as_text(entry.get("outcome") or entry.get("criteria") or entry.get("description")) or "",
                        ctx.variables, at)
            for entry in entries
        ]  # fmt: skip
        if self.agentv and any("required" in entry or "min_score" in entry for entry in entries):
            self.report.group("rubric criteria's own `required` / `min_score` → not a gate on the eval: AgentV "
                              "fails only the rubric's verdict and passes the case on its score", at, mapped=True)  # fmt: skip
        gate = required is True or (as_share(required) and not isinstance(required, bool))
        if gate and len(entries) > 1:
            grader = self.judge_grader(_share_of(entries, texts, weights), prompt, ctx, at)
            if grader is not None:
                self.add(out, base, grader, None, weight, required, threshold, ctx, at)
                self.report.group("a `required` rubric list → one llm_judge grader scoring the share of its "
                                  "criteria met, required: AgentV gates the case on the rubric's score", at,
                                  mapped=True)  # fmt: skip
            return
        for entry, own, text in zip(entries, weights, texts, strict=True):
            grader = self.judge_grader(text, prompt, ctx, at)
            if grader is None:
                return
            name = as_text(entry.get("id")) or (
                base if len(entries) == 1 else f"{base}-{len(out.graders) + 1}"
            )
            self.add(out, name, grader, None, weight * own / total, required,
                     as_share(entry.get("threshold")) or threshold, ctx, at)  # fmt: skip

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
            if loaded is None and is_path(text):
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
            if ctx.whole:  # the judge is shown the conversation; {submission} holds every reply
                parts = [
                    "Grade the whole conversation above against this criterion:",
                    rubric_escape(criteria or ""),
                ]
                parts += ["The assistant's replies, in order:", "{submission}"]
                return {"kind": "llm_judge", "rubric": "\n\n".join(parts) + "\n"}
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


def _share_of(entries: list[dict], texts: list[str], weights: list[float]) -> str:
    """A rubric list as one criterion, scored as AgentV scores it: each criterion 1 when met, 0 when not (or
    its level divided by 10), the score their weighted mean."""
    weighted = len(set(weights)) > 1
    lines = [
        f"- {text}" + (f" (weight {own:g})" if weighted else "")
        for text, own in zip(texts, weights, strict=True)
    ]
    levels = (
        ", or, for one scored by levels, the level reached divided by 10"
        if any(isinstance(entry.get("score_ranges"), dict) for entry in entries)
        else ""
    )
    mean = "weighted mean" if weighted else "mean"
    return (
        f"Score each of these criteria 1 when the reply meets it and 0 when it does not{levels}; the score is "
        f"their {mean}:\n" + "\n".join(lines)
    )
