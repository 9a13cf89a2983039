"""What promptfoo's and AgentV's assertion converters share: a test's `Graded` result and its `Context`, and
the checks read apart from a converter (field accuracy, word counts, rubric escapes)."""

from __future__ import annotations

import ast
import json
import math
import re
import textwrap
from dataclasses import dataclass, field

from engine import patterns
from engine.schema.checks import DATE_TOKEN

from ..common import as_number, as_text, find_file, short

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
    whole: bool = False  # the assertions grade the whole conversation (AgentV's conversation-level ones)


_NOTHING = object()


def inline_python(code: str) -> str:
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


def ranges_text(entry: dict) -> str:
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


def suite_vars_unescaped(pattern: str) -> str:
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


def is_path(text: str) -> bool:
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


def texts_of(value: object) -> list[str]:
    if isinstance(value, list):
        return [t for t in (as_text(v) for v in value) if t]
    text = as_text(value)
    return [text] if text else []


def negated_pattern(pattern: str, flags: str) -> str:
    found = NOT_REGEX_SAFE.match(pattern)
    if found:
        flags, pattern = flags + found.group(0), pattern[found.end() :]
    return rf"{flags}^(?![\s\S]*?(?:{pattern}))"


def is_valid_check(check: dict) -> bool:
    pattern = check.get("regex")
    if pattern is None:
        return True
    try:
        patterns.validate(pattern)
    except patterns.InvalidPattern:
        return False
    return True


def as_jsonable(value: object) -> object:
    """Data handed to a grader as it is, with what JSON cannot hold (dates, NaN, infinities) as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): as_jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_jsonable(item) for item in value]
    return json.loads(json.dumps(value, default=str))


# Checks that read the tool calls in their view: graded once, they see every call of the conversation, as
# AgentV's conversation-level trajectory assertions see the whole trace.
CONVERSATION_WIDE_CHECKS = ("tool_called", "tool_not_called", "tool_sequence", "tool_result")
# What AgentV's deterministic assertions become (contains, icontains, -any, -all, starts-with, ends-with, regex,
# equals, is-json, negated too): graded once, they read the whole transcript, as AgentV's read its candidate.
TRANSCRIPT_CHECKS = ("contains", "regex", "equals", "starts_with", "is_json")


def conversation_rule(
    graders: dict, weights: dict, required: list, threshold: float, report, where: str
) -> dict | None:
    """AgentV's conversation-level assertions as the eval's named graders, graded once after the last turn,
    and the pass rule that scores them as AgentV does: their weighted mean is one more score beside the
    turns', all combined by the test's aggregation (`with_turns`). A judge reads every reply (its
    {submission}) with the conversation shown; a text check reads the whole transcript, every message as
    `role: content`, as AgentV's does (orchestrator.ts runConversationMode: its candidate is the transcript);
    any other check still reads the last reply, which is listed. None when no grader has a weight above 0."""
    weights = {key: round(value, 6) for key, value in weights.items() if key in graders and value > 0}
    if not weights:
        return None
    for name, grader in graders.items():
        check = grader.get("check") or {}
        if grader.get("kind") == "llm_judge":
            grader["extractor"] = "all_assistant"
        elif any(key in TRANSCRIPT_CHECKS for key in check):
            grader["extractor"] = "transcript"
            report.group(
                "conversation-level text assertions → check graders reading the whole transcript (extractor: "
                "transcript, every message as `role: content`), as AgentV checks them",
                where,
                mapped=True,
            )
        elif not any(key in CONVERSATION_WIDE_CHECKS for key in check):
            report.group(
                f"conversation-level assertion {name}: AgentV checks the whole transcript (every message as "
                "`role: content`); evalsite's check grader reads the last reply",
                where,
                lost=True,
            )
    rule: dict[str, object] = {
        "weighted_average": weights,
        "threshold": threshold,
        "with_turns": True,
    }
    if required:
        rule["required"] = list(required)
    report.group(
        "conversation-level assertions → the eval's named graders, graded once on the whole conversation; "
        "their weighted mean is one more score beside the turns' (pass_rule with_turns), as AgentV "
        "aggregates them",
        where,
        mapped=True,
    )
    return rule
