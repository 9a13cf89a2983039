"""@agtlantis/eval YAML (`*.eval.yaml`: `agent`, `cases`, `personas`, `defaults`) → evalsite.

Each case becomes an eval whose first user message is the case's `input` object as JSON text, the object
agtlantis hands to the agent. `defaults` are applied to each case as agtlantis's loader applies them (the
case's own `maxTurns`, `endWhen`, `onConditionMet`, `onMaxTurnsReached` win; tags are the defaults' then
the case's). A case with a `persona` or an `endWhen` is agtlantis's multi-turn case: it becomes `simulate`
with the persona's `systemPrompt` as the simulated user, `endWhen` as `stop_when` and `maxTurns` as
`max_turns`, with the same outcome rules.

agtlantis grades every case with the judge of its TypeScript config (`agent-eval.config.ts`): weighted
criteria scored 0-100, an overall weighted mean that passes at `passThreshold` (agtlantis's default
unless told). That becomes an `llm_judge` check with the same criteria, weights, scale and threshold; the case's
`expectedOutput` is written into each criterion as the reference answer. The criteria are read from an
uploaded config file where they are plain object literals or agtlantis's built-in criteria; without one,
agtlantis's built-in accuracy and relevance criteria stand in for them, and the report says so.

The `agent` is TypeScript code evalsite cannot call: the suite tests the chat model chosen with `model`
or at launch, and an uploaded agtlantis prompt file for that agent (`id`, `version`, `system`,
`userTemplate`) gives the system message. `scanner` reads the config, `judge` its judge, `cases` the cases.
"""

from __future__ import annotations

import re

from ..common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_text,
    basename,
    is_yaml_name,
    parse_yaml,
    short,
)
from .cases import convert_case, defaults_of, personas_of
from .judge import iterations, judge_of
from .scanner import config_agent, scripts

TOP_KEYS = ("agent", "name", "description", "defaults", "personas", "cases")


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

    judge = judge_of(files, name, report)
    top.extend(iterations(files, name, report))
    defaults = defaults_of(data.get("defaults"), report)
    personas = personas_of(data.get("personas"), report)

    evals: list[dict] = []
    notes: list[list[str]] = []
    taken: set[str] = set()
    for index, case in enumerate(cases):
        converted = convert_case(case, f"cases[{index}]", defaults, personas, judge, taken, report)
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
    for file_name, text in scripts(files, main):
        found = config_agent(agent, text)
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
