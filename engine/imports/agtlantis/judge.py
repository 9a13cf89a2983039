"""agtlantis's judge: the weighted criteria and pass threshold of its config (or its built-in criteria standing
in), and the config's `run.iterations`."""

from __future__ import annotations

import json
import re

from ..common import Report, Section, as_count, as_number, short
from .scanner import bracketed, items, scripts, string_or_number

PASS_THRESHOLD = 70  # agtlantis's SCORE.DEFAULT_PASS_THRESHOLD, on its 0-100 scale


MAX_ITERATIONS = 1000


# agtlantis's built-in criteria (judge/criteria), word for word.
BUILT_IN = {
    "accuracy": (
        "Accuracy",
        "Evaluates whether the output is factually correct, free from errors, and avoids hallucinations. "
        "Check for incorrect facts, made-up information, or misrepresentation of the input data.",
    ),
    "consistency": (
        "Consistency",
        "Evaluates whether the output is internally coherent and logically consistent. Check for "
        "self-contradictions, conflicting statements, or logical inconsistencies within the response.",
    ),
    "relevance": (
        "Relevance",
        "Evaluates whether the output directly addresses the input and fulfills the user intent. Check for "
        "off-topic content, missing key requirements, or responses that fail to answer the actual question.",
    ),
    "stepByStep": (
        "Step-by-Step Reasoning",
        "Evaluates whether the output demonstrates clear, structured reasoning with explicit steps. "
        "Check for: numbered steps or clear progression, explanation of the thought process, "
        "intermediate results shown before the final answer. "
        "Penalize outputs that jump directly to the answer without showing work.",
    ),
}
# What agtlantis's CLI guide configures for YAML suites; used when no config file came with the suite.
STAND_IN = ("accuracy", "relevance")


# --- the judge -------------------------------------------------------------------------------------------


class Judge:
    """The criteria (name, description, weight) and the pass threshold (0-100) every case is graded with."""

    def __init__(self, criteria: list[tuple[str, str, int | float]], threshold: float, source: str):
        self.criteria = criteria
        self.threshold = threshold
        self.source = source

    def check(self, expected: object | None) -> dict:
        reference = ""
        if expected is not None:
            shown = json.dumps(expected, ensure_ascii=False, indent=2)
            reference = f"\n\nReference answer (the test case's expectedOutput):\n{shown}"
        criteria = []
        for label, text, weight in self.criteria:
            item: dict[str, object] = {"name": label[:100], "criteria": text + reference}
            if weight != 1:
                item["weight"] = weight
            criteria.append(item)
        return {"llm_judge": {"criteria": criteria, "scale": "0-100", "threshold": self.threshold}}


def judge_of(files: dict[str, str], main: str, report: Report) -> Judge:
    unread = None
    for file_name, text in scripts(files, main):
        if not re.search(r"\bjudge\s*:", text):
            continue
        files[file_name]  # noqa: B018 — marks it read
        judge = _config_judge(file_name, text, report)
        if judge is not None:
            return judge
        unread = file_name
    names = " and ".join(BUILT_IN[key][0] for key in STAND_IN)
    why = f"{unread}'s judge could not be read" if unread else "agent-eval.config.ts was not uploaded"
    # The config's judge is not converted: said as such, since a folder import's report and the suite's
    # header list what was not converted, not what was.
    report.skip(
        f"judge: agtlantis grades each case with the judge of its config, and {why} — its built-in {names} "
        f"criteria stand in, scored 0-100 and passing at its default passThreshold {PASS_THRESHOLD}; change "
        "`llm_judge` to your config's criteria"
    )
    criteria = [(BUILT_IN[key][0], BUILT_IN[key][1], 1) for key in STAND_IN]
    return Judge(criteria, PASS_THRESHOLD, "stand-in")


def _config_judge(file_name: str, text: str, report: Report) -> Judge | None:
    """The `judge: {criteria, passThreshold}` of a TypeScript config, where it is written literally."""
    block = bracketed(text, re.search(r"\bjudge\s*:\s*\{", text))
    if block is None:
        report.lose(f"{file_name}: judge is not written as an object literal — its criteria are not imported")
        return None
    listed = bracketed(block, re.search(r"\bcriteria\s*:\s*\[", block))
    if listed is None:
        report.lose(f"{file_name}: judge.criteria is not a literal list — the judge is not imported")
        return None
    criteria: list[tuple[str, str, int | float]] = []
    for index, item in enumerate(items(listed[1:-1])):
        where = f"{file_name}: judge.criteria[{index}]"
        call = re.fullmatch(r"(\w+)\s*\(\s*(\{.*\})?\s*\)", item, re.DOTALL)
        if call and call.group(1) in BUILT_IN:
            label, description = BUILT_IN[call.group(1)]
            weight = _weight(string_or_number(call.group(2) or "", "weight"))
            criteria.append((label, description, weight))
            continue
        if item.startswith("{"):
            description = string_or_number(item, "description")
            label = string_or_number(item, "name") or string_or_number(item, "id")
            if isinstance(description, str) and description:
                if re.search(r"\bvalidator\s*:", item):
                    report.lose(f"{where}: a validator function (code) — not imported")
                    continue
                criteria.append(
                    (
                        str(label or f"criterion {index + 1}"),
                        description,
                        _weight(string_or_number(item, "weight")),
                    )
                )
                continue
        report.lose(f"{where}: {short(item, 60)} — a criterion evalsite cannot read (code), not imported")
    if not criteria:
        report.lose(f"{file_name}: judge.criteria — none could be read; the judge is not imported")
        return None
    threshold = string_or_number(block, "passThreshold")
    if not isinstance(threshold, int | float) or not 0 <= threshold <= 100:
        threshold = PASS_THRESHOLD
    for key in ("prompt", "llm"):
        if re.search(rf"\b{key}\s*:", block):
            report.skip(
                f"{file_name}: judge.{key} — evalsite's judge uses its own prompt and the suite's `judge`"
            )
    report.map(
        f"{file_name}: judge.criteria ({len(criteria)}) and passThreshold {threshold:g} → each eval's "
        "`llm_judge` weighted criteria on the 0-100 scale, same weights and threshold"
    )
    return Judge(criteria, threshold, file_name)


def iterations(files: dict[str, str], main: str, report: Report) -> list[Section]:
    """The config's `run.iterations`: every case repeated, passing by majority (a pass rate of at least
    0.5), as agtlantis aggregates iterations."""
    for file_name, text in scripts(files, main):
        block = bracketed(text, re.search(r"\brun\s*:\s*\{", text))
        count = as_count(string_or_number(block, "iterations")) if block else None
        if not count or count == 1:
            continue
        files[file_name]  # noqa: B018 — marks it read
        if count > MAX_ITERATIONS:
            report.lose(f"{file_name}: run.iterations {count} — evalsite runs at most {MAX_ITERATIONS}")
            count = MAX_ITERATIONS
        report.map(
            f"{file_name}: run.iterations {count} → iterations {count}, passing at a pass rate of 0.5 "
            "(agtlantis passes an iterated case by majority)"
        )
        return [Section("iterations", count, blank_before=True), Section("pass_rate_threshold", 0.5)]
    return []


def _weight(value: object) -> int | float:
    number = as_number(value)
    return number if number is not None and number > 0 else 1
