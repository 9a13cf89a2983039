"""@agtlantis/eval YAML (`*.eval.yaml`: `agent`, `cases`, `personas`, `defaults`) → evalsite.

Each case becomes an eval whose first user message is the case's `input` object as JSON text, the object
agtlantis hands to the agent. `defaults` are applied to each case as agtlantis's loader applies them (the
case's own `maxTurns`, `endWhen`, `onConditionMet`, `onMaxTurnsReached` win; tags are the defaults' then
the case's). A case with a `persona` or an `endWhen` is agtlantis's multi-turn case: it becomes `simulate`
with the persona's `systemPrompt` as the simulated user, `endWhen` as `stop_when` and `maxTurns` as
`max_turns`, with the same outcome rules.

agtlantis grades every case with the judge of its TypeScript config (`agent-eval.config.ts`): weighted
criteria scored 0-100, an overall weighted mean that passes at `passThreshold` (70 unless told). That
becomes an `llm_judge` check with the same criteria, weights, scale and threshold; the case's
`expectedOutput` is written into each criterion as the reference answer. The criteria are read from an
uploaded config file where they are plain object literals or agtlantis's built-in criteria; without one,
agtlantis's built-in accuracy and relevance criteria stand in for them, and the report says so.

The `agent` is TypeScript code evalsite cannot call: the suite tests the chat model chosen with `model`
or at launch, and an uploaded agtlantis prompt file for that agent (`id`, `version`, `system`,
`userTemplate`) gives the system message.
"""

from __future__ import annotations

import json
import re

from .common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_count,
    as_name,
    as_number,
    as_text,
    basename,
    is_yaml_name,
    non_finite,
    parse_yaml,
    short,
    unique_id,
)

PASS_THRESHOLD = 70  # agtlantis's SCORE.DEFAULT_PASS_THRESHOLD, on its 0-100 scale
MAX_TURNS = 10  # agtlantis's default, and evalsite's
EVALSITE_MAX_TURNS = 200
MAX_ITERATIONS = 1000
OUTCOMES = ("pass", "fail")

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

TOP_KEYS = ("agent", "name", "description", "defaults", "personas", "cases")
DEFAULT_KEYS = ("maxTurns", "endWhen", "onConditionMet", "onMaxTurnsReached", "tags")
CASE_KEYS = (
    "id",
    "name",
    "description",
    "tags",
    "input",
    "persona",
    "maxTurns",
    "endWhen",
    "onConditionMet",
    "onMaxTurnsReached",
    "expectedOutput",
    "expect",
    "multiTurn",
)
MERGED = ("maxTurns", "endWhen", "onConditionMet", "onMaxTurnsReached")


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    if not isinstance(data, dict):
        raise ImportProblem(f"{name} is not an agtlantis eval file: expected `agent` and `cases`")
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        raise ImportProblem(
            f"{name}: `cases` is {'empty' if isinstance(cases, list) else 'missing'} — agtlantis needs at "
            "least one test case"
        )
    header = [f"Imported from agtlantis (@agtlantis/eval) {name} by evalsite."]
    agent = as_text(data.get("agent"))
    top: list[Section] = []

    suite_name = as_text(data.get("name")) or agent or _stem(name)
    top.append(Section("name", suite_name[:200]))
    report.map(
        f"name → name: {short(suite_name, 60)}"
        if as_text(data.get("name"))
        else f"(no name) → name: {short(suite_name, 60)} (from the {'agent' if agent else 'file name'})"
    )
    description = as_text(data.get("description"))
    if description:
        header.append(f"Description: {' '.join(description.split())}")
        report.map("description → a comment at the top of the suite")

    top.extend(_model(agent, report))
    top.extend(_system(agent, files, name, report))

    judge = _judge(files, name, report)
    top.extend(_iterations(files, name, report))
    defaults = _defaults(data.get("defaults"), report)
    personas = _personas(data.get("personas"), report)

    evals: list[dict] = []
    notes: list[list[str]] = []
    taken: set[str] = set()
    for index, case in enumerate(cases):
        converted = _case(case, f"cases[{index}]", defaults, personas, judge, taken, report)
        if converted is not None:
            evals.append(converted[0])
            notes.append(converted[1])
    if not evals:
        raise ImportProblem(f"{name} has no case evalsite can run: {'; '.join(report.problems())}")
    for key in data:
        if key not in TOP_KEYS:
            report.skip(f"{key}: not a key of agtlantis's eval file (agtlantis ignores it), left out")

    simulated = sum(1 for ev in evals if "simulate" in ev)
    report.map(
        f"cases: {len(evals)} → evals ({simulated} multi-turn with `simulate`, {len(evals) - simulated} "
        "single-turn); each case's `input` is sent as JSON text"
    )
    sections = [*top, Section("evals", evals, blank_before=True, item_comments=notes)]
    return header, sections, {}


def _stem(name: str) -> str:
    stem = re.sub(r"(\.eval)?\.ya?ml$", "", basename(name), flags=re.IGNORECASE)
    return stem or "agtlantis-suite"


# --- the agent -------------------------------------------------------------------------------------------


def _model(agent: str | None, report: Report) -> list[Section]:
    if agent is None:
        report.skip(
            "agent: missing or not text — agtlantis needs it to find the agent; evalsite tests `model`"
        )
        return [Section("model", None, comments=["model: set the model under test"])]
    report.skip(
        f"agent: {short(agent, 60)} — an agent of agtlantis's config (`agents` in agent-eval.config.ts), "
        "TypeScript code evalsite cannot call: evalsite sends the conversation straight to the chat model "
        "set with `model` (or `evalsite run --model`)"
    )
    return [
        Section(
            "model",
            None,
            comments=[
                f"agtlantis ran the agent {agent!r} (TypeScript code in agent-eval.config.ts).",
                "evalsite tests a chat model: set it here or with `evalsite run --model`.",
                "model: <the model under test>",
            ],
        )
    ]


def _system(agent: str | None, files: dict[str, str], main: str, report: Report) -> list[Section]:
    """The agent's system prompt as `system`: from its uploaded prompt file, else from the config's agent
    written literally; the agent's description stands in when there is no prompt."""
    if agent is None:
        return []
    prompt_file = _agent_prompt(agent, files, main, report)
    if prompt_file and as_text(prompt_file[1].get("system")):
        if "userTemplate" in prompt_file[1]:
            report.skip(
                f"{prompt_file[0]}: userTemplate — the agent's TypeScript code fills it from the input; "
                "evalsite sends the input object as JSON text"
            )
        report.map(f"{prompt_file[0]}: system → system (the agent's system prompt)")
        system = as_text(prompt_file[1]["system"]).strip()
        return [Section("system", system, comments=[f"{prompt_file[0]}: system"])]
    for file_name, text in _scripts(files, main):
        found = _config_agent(agent, text)
        if found is None:
            continue
        files[file_name]  # noqa: B018 — marks it read
        system, description = found
        if system:
            report.map(f"{file_name}: the prompt.system of the agent {agent} → system")
            return [Section("system", system, comments=[f"{file_name}: the agent's prompt.system"])]
        if description:
            report.map(
                f"{file_name}: the description of the agent {agent} → system (no prompt text was found; "
                "agtlantis gives the description to its judge)"
            )
            return [Section("system", description, comments=[f"{file_name}: the agent's description"])]
    return []


def _config_agent(agent: str, text: str) -> tuple[str | None, str | None] | None:
    """The (prompt.system, description) of the agent whose `config.name` is `agent` in a config written
    literally: the agent's `description` and `system` follow its name, before its `execute`. A top-level
    `agentDescription` wins, as in agtlantis."""
    named = re.search(rf"\bname\s*:\s*(['\"`]){re.escape(agent)}\1", text)
    if named is None:
        return None
    rest = text[named.end() :]
    end = re.search(r"\bexecute\b", rest)
    body = rest[: end.start()] if end else rest[:4000]
    system = _string_or_number(body, "system")
    description = _string_or_number(text, "agentDescription") or _string_or_number(body, "description")
    system = system.strip() if isinstance(system, str) and system.strip() else None
    description = description.strip() if isinstance(description, str) and description.strip() else None
    if system is None and description is None:
        return None
    return system, description


def _scripts(files: dict[str, str], main: str) -> list[tuple[str, str]]:
    """The uploaded TypeScript / JavaScript files (agent-eval.config.ts and the like), unread."""
    return [
        (file_name, dict.__getitem__(files, file_name))
        for file_name in sorted(dict.keys(files))
        if file_name != main and CONFIG_NAME.search(file_name)
    ]


def _agent_prompt(agent: str, files: dict[str, str], main: str, report: Report) -> tuple[str, dict] | None:
    """An uploaded agtlantis prompt file (`id`, `version`, `system`, `userTemplate`) whose id is the agent's
    name, or whose file name starts with it (agtlantis names them `<id>-<version>.yaml`)."""
    for file_name in sorted(dict.keys(files)):
        if file_name == main or not is_yaml_name(file_name):
            continue
        stem = basename(file_name).rsplit(".", 1)[0]
        try:
            data = parse_yaml(file_name, dict.__getitem__(files, file_name))
        except ImportProblem:
            continue
        if not isinstance(data, dict) or "system" not in data or "cases" in data:
            continue
        if data.get("id") == agent or stem == agent or stem.startswith(f"{agent}-"):
            files[file_name]  # noqa: B018 — marks it read, so it is not reported as unused
            return file_name, data
    return None


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


CONFIG_NAME = re.compile(r"\.(config\.)?(ts|mts|cts|js|mjs|cjs)$", re.IGNORECASE)


def _judge(files: dict[str, str], main: str, report: Report) -> Judge:
    for file_name, text in _scripts(files, main):
        if not re.search(r"\bjudge\s*:", text):
            continue
        files[file_name]  # noqa: B018 — marks it read
        judge = _config_judge(file_name, text, report)
        if judge is not None:
            return judge
    names = " and ".join(BUILT_IN[key][0] for key in STAND_IN)
    report.map(
        "judge: agtlantis grades each case with the judge of its agent-eval.config.ts, which was not "
        f"uploaded — its built-in {names} criteria stand in, scored 0-100 and passing at its default "
        f"passThreshold {PASS_THRESHOLD}; change `llm_judge` to your config's criteria"
    )
    criteria = [(BUILT_IN[key][0], BUILT_IN[key][1], 1) for key in STAND_IN]
    return Judge(criteria, PASS_THRESHOLD, "stand-in")


def _config_judge(file_name: str, text: str, report: Report) -> Judge | None:
    """The `judge: {criteria, passThreshold}` of a TypeScript config, where it is written literally."""
    block = _bracketed(text, re.search(r"\bjudge\s*:\s*\{", text))
    if block is None:
        report.lose(f"{file_name}: judge is not written as an object literal — its criteria are not imported")
        return None
    listed = _bracketed(block, re.search(r"\bcriteria\s*:\s*\[", block))
    if listed is None:
        report.lose(f"{file_name}: judge.criteria is not a literal list — the judge is not imported")
        return None
    criteria: list[tuple[str, str, int | float]] = []
    for index, item in enumerate(_items(listed[1:-1])):
        where = f"{file_name}: judge.criteria[{index}]"
        call = re.fullmatch(r"(\w+)\s*\(\s*(\{.*\})?\s*\)", item, re.DOTALL)
        if call and call.group(1) in BUILT_IN:
            label, description = BUILT_IN[call.group(1)]
            weight = _weight(_string_or_number(call.group(2) or "", "weight"))
            criteria.append((label, description, weight))
            continue
        if item.startswith("{"):
            description = _string_or_number(item, "description")
            label = _string_or_number(item, "name") or _string_or_number(item, "id")
            if isinstance(description, str) and description:
                if re.search(r"\bvalidator\s*:", item):
                    report.lose(f"{where}: a validator function (code) — not imported")
                    continue
                criteria.append(
                    (
                        str(label or f"criterion {index + 1}"),
                        description,
                        _weight(_string_or_number(item, "weight")),
                    )
                )
                continue
        report.lose(f"{where}: {short(item, 60)} — a criterion evalsite cannot read (code), not imported")
    if not criteria:
        report.lose(f"{file_name}: judge.criteria — none could be read; the judge is not imported")
        return None
    threshold = _string_or_number(block, "passThreshold")
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


def _iterations(files: dict[str, str], main: str, report: Report) -> list[Section]:
    """The config's `run.iterations`: every case repeated, passing by majority (a pass rate of at least
    0.5), as agtlantis aggregates iterations."""
    for file_name, text in _scripts(files, main):
        block = _bracketed(text, re.search(r"\brun\s*:\s*\{", text))
        count = as_count(_string_or_number(block, "iterations")) if block else None
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


def _bracketed(text: str, found: re.Match | None) -> str | None:
    """The `{...}` or `[...]` that opens at the end of `found`, brackets and quotes balanced."""
    if found is None:
        return None
    start = found.end() - 1
    depth = 0
    quote = ""
    index = start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
            if depth == 0:
                return text[start : index + 1]
        index += 1
    return None


def _items(text: str) -> list[str]:
    """The top-level comma-separated items of a list's inside."""
    items, depth, quote, current = [], 0, "", ""
    index = 0
    while index < len(text):
        char = text[index]
        current += char
        if quote:
            if char == "\\" and index + 1 < len(text):
                index += 1
                current += text[index]
            elif char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(current[:-1])
            current = ""
        index += 1
    items.append(current)
    cleaned = [re.sub(r"^\s*(//[^\n]*\n\s*)*", "", item).strip() for item in items]
    return [item for item in cleaned if item]


def _string_or_number(text: str, key: str) -> str | float | None:
    found = re.search(
        rf"\b{key}\s*:\s*(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|`((?:[^`\\]|\\.)*)`|(-?\d+(?:\.\d+)?))",
        text,
        re.DOTALL,
    )
    if found is None:
        return None
    if found.group(4) is not None:
        number = float(found.group(4))
        return int(number) if number.is_integer() else number
    value = next(group for group in found.groups()[:3] if group is not None)
    return re.sub(r"\\(.)", r"\1", value)


def _weight(value: object) -> int | float:
    number = as_number(value)
    return number if number is not None and number > 0 else 1


# --- defaults and personas ---------------------------------------------------------------------------------


def _defaults(raw: object, report: Report) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        report.lose(f"defaults: {short(raw, 40)} — not a mapping (agtlantis refuses the file), left out")
        return {}
    for key in raw:
        if key not in DEFAULT_KEYS:
            report.skip(f"defaults.{key}: not a default agtlantis applies, left out")
    report.map(
        "defaults → applied to each case as agtlantis does (the case's own maxTurns, endWhen, onConditionMet "
        "and onMaxTurnsReached win; tags are the defaults' then the case's)"
    )
    return {key: raw[key] for key in DEFAULT_KEYS if key in raw}


def _personas(raw: object, report: Report) -> dict[str, object]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        report.lose(f"personas: {short(raw, 40)} — not a mapping of personas, left out")
        return {}
    report.map("personas → each case's `simulate.persona` (the persona's systemPrompt)")
    return {str(key): value for key, value in raw.items()}


def _persona(
    ref: object, personas: dict[str, object], where: str, report: Report
) -> tuple[str, list[str]] | None:
    """The simulated user's persona text and the comment lines naming it, or None (reported)."""
    if isinstance(ref, str):
        if ref not in personas:
            listed = ", ".join(personas) or "none"
            report.lose(
                f"{where}: {ref!r} is not in `personas` ({listed}) — agtlantis refuses the file; the case "
                "has no simulated user"
            )
            return None
        persona, label = personas[ref], f"personas.{ref}"
    else:
        persona, label = ref, where
    if not isinstance(persona, dict):
        report.lose(f"{label}: not a persona mapping (name, systemPrompt) — the case has no simulated user")
        return None
    text = as_text(persona.get("systemPrompt"))
    if not text or not text.strip():
        report.lose(
            f"{label}: no systemPrompt — agtlantis refuses the persona; the case has no simulated user"
        )
        return None
    notes = []
    name = as_text(persona.get("name"))
    if name:
        notes.append(f"persona: {name}" + (f" ({label})" if label != where else ""))
    description = as_text(persona.get("description"))
    if description:
        notes.append(f"persona description: {' '.join(description.split())}")
    for key in persona:
        if key not in ("name", "description", "systemPrompt"):
            report.skip(f"{label}.{key}: not a persona key agtlantis reads, left out")
    return text.strip(), notes


# --- cases ---------------------------------------------------------------------------------------------------


def _case(
    case: object,
    where: str,
    defaults: dict,
    personas: dict[str, object],
    judge: Judge,
    taken: set[str],
    report: Report,
) -> tuple[dict, list[str]] | None:
    if not isinstance(case, dict):
        report.lose(f"{where}: {short(case, 40)} — not a test case, left out")
        return None
    raw_input = case.get("input")
    if not isinstance(raw_input, dict):
        report.lose(
            f"{where}.input: {short(raw_input, 40)} — agtlantis needs an object here (the agent's input); "
            "case left out"
        )
        return None
    if non_finite(raw_input):
        report.lose(f"{where}.input: holds NaN or an infinity, which JSON cannot send; case left out")
        return None
    out: dict[str, object] = {}
    notes: list[str] = []
    wanted = as_text(case.get("id")) or as_text(case.get("name")) or f"case-{where[6:-1]}"
    out["id"] = unique_id(wanted, taken, report, where)
    title = as_text(case.get("name")) or as_text(case.get("description"))
    if title:
        notes.append(" ".join(title.split()))
    if as_text(case.get("name")) and as_text(case.get("description")):
        notes.append(" ".join(as_text(case["description"]).split()))

    merged = _merged(case, defaults, where, report)
    tags = [as_text(tag) for tag in merged["tags"] if as_text(tag)]
    if tags:
        out["tags"] = list(dict.fromkeys(tags))
    out["prompt"] = json.dumps(raw_input, ensure_ascii=False)

    simulate = _simulate(case, merged, personas, where, notes, report)
    if simulate is not None:
        out["simulate"] = simulate
    else:
        for key in ("maxTurns", "onConditionMet", "onMaxTurnsReached"):
            if merged.get(key) is not None:
                report.group(
                    f"{key} without a persona or endWhen: agtlantis runs such a case as one turn and ignores it",
                    where,
                )

    expected = case.get("expectedOutput")
    if expected is not None and non_finite(expected):
        report.lose(f"{where}.expectedOutput: holds NaN or an infinity — not given to the judge")
        expected = None
    out["checks"] = [judge.check(expected)]
    if expected is not None:
        report.group("expectedOutput → the judge's reference answer, in each criterion", where, mapped=True)
    _expect(case.get("expect"), where, report)
    for key in case:
        if key not in CASE_KEYS:
            report.skip(f"{where}.{key}: not a key of agtlantis's test case (agtlantis ignores it), left out")
    return out, notes


def _merged(case: dict, defaults: dict, where: str, report: Report) -> dict:
    """The case with the defaults applied, as agtlantis's mergeWithDefaults does. The `multiTurn:` block of
    agtlantis's CLI guide is read as the same keys, the case's flat keys winning."""
    own = dict(case)
    nested = case.get("multiTurn")
    if isinstance(nested, dict):
        for key in MERGED:
            if key in nested and own.get(key) is None:
                own[key] = nested[key]
        for key in nested:
            if key not in MERGED:
                report.skip(f"{where}.multiTurn.{key}: not a multi-turn key agtlantis's YAML has, left out")
        report.map(f"{where}.multiTurn ({', '.join(map(str, nested))}) → read as the case's own keys")
    elif nested is not None:
        report.skip(f"{where}.multiTurn: not a mapping, left out")
    merged = {key: own.get(key) if own.get(key) is not None else defaults.get(key) for key in MERGED}
    tags: list = []
    for source in (defaults.get("tags"), case.get("tags")):
        if isinstance(source, list):
            tags += source
        elif source is not None:
            report.skip(f"{where}.tags: not a list, left out")
    merged["tags"] = tags
    return merged


def _simulate(
    case: dict, merged: dict, personas: dict, where: str, notes: list[str], report: Report
) -> dict | None:
    """`simulate` for agtlantis's multi-turn case (a persona or an endWhen), or None for a one-turn case."""
    if case.get("persona") is None and merged["endWhen"] is None:
        return None
    simulate: dict[str, object] = {}
    if case.get("persona") is not None:
        found = _persona(case["persona"], personas, f"{where}.persona", report)
        if found is not None:
            simulate["persona"] = found[0]
            notes.extend(found[1])
            report.group("persona → simulate.persona (a simulated user)", where, mapped=True)
    max_turns = MAX_TURNS
    if merged["maxTurns"] is not None:
        count = as_count(merged["maxTurns"])
        if not count:
            report.lose(
                f"{where}.maxTurns: {short(merged['maxTurns'], 20)} — not a positive whole number; "
                f"agtlantis refuses it, the default {MAX_TURNS} is used"
            )
        elif count > EVALSITE_MAX_TURNS:
            report.lose(f"{where}.maxTurns: {count} — evalsite runs at most {EVALSITE_MAX_TURNS} turns")
            max_turns = EVALSITE_MAX_TURNS
        else:
            max_turns = count
    simulate["max_turns"] = max_turns
    if merged["endWhen"] is not None:
        condition = _condition(merged["endWhen"], f"{where}.endWhen", report)
        if condition is not None:
            simulate["stop_when"] = condition
    for key, target in (("onConditionMet", "on_condition_met"), ("onMaxTurnsReached", "on_max_turns")):
        value = merged[key]
        if value is None:
            continue
        if value in OUTCOMES:
            simulate[target] = value
        else:
            report.lose(
                f"{where}.{key}: {short(value, 20)} — agtlantis takes pass or fail; its default is used"
            )
    if "persona" not in simulate:
        report.group(
            "no simulated user: the case ends after its first reply (condition met, max turns, or inputs "
            "exhausted — a failure — as in agtlantis)",
            where,
            mapped=True,
        )
    return simulate


def _condition(raw: object, where: str, report: Report) -> dict | None:
    """agtlantis's endWhen → a stop condition: naturalLanguage first, as its loader checks it first."""
    if not isinstance(raw, dict):
        report.lose(
            f"{where}: {short(raw, 40)} — not a condition (field / equals / naturalLanguage), left out"
        )
        return None
    for key in raw:
        if key not in ("field", "equals", "naturalLanguage"):
            report.skip(f"{where}.{key}: not an endWhen key agtlantis reads, left out")
    question = as_text(raw.get("naturalLanguage"))
    if question:
        if raw.get("field") is not None:
            report.skip(f"{where}.field: agtlantis uses naturalLanguage when both are given, so is evalsite")
        report.group(
            "endWhen.naturalLanguage → stop_when.natural_language (the judge answers yes/no)",
            where,
            mapped=True,
        )
        return {"natural_language": {"prompt": question}}
    path = as_name(raw.get("field"))
    if not path:
        report.lose(f"{where}: neither field nor naturalLanguage — agtlantis refuses it; no stop condition")
        return None
    if "equals" in raw and raw["equals"] is not None:
        if non_finite(raw["equals"]):
            report.lose(f"{where}.equals: NaN or an infinity cannot be compared; no stop condition")
            return None
        report.group(
            "endWhen {field, equals} → stop_when.field_equals (on the JSON reply)", where, mapped=True
        )
        return {"field_equals": {"path": path, "value": raw["equals"]}}
    report.group("endWhen {field} → stop_when.field_is_set (on the JSON reply)", where, mapped=True)
    return {"field_is_set": path}


def _expect(raw: object, where: str, report: Report) -> None:
    if raw is None:
        return
    if not isinstance(raw, dict):
        report.skip(f"{where}.expect: not a mapping, left out")
        return
    for key in raw:
        report.skip(
            f"{where}.expect.{key}: {short(raw[key], 20)} — agtlantis reads it but its runner does not apply it "
            "(cases pass on the judge's passThreshold and the ending), so neither does the import"
        )
