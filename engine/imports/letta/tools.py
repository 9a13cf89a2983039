"""The tools a Letta suite's graders read (extractors `tool_arguments` / `tool_output` with a `tool_name`),
offered to the model under test as the suite's `tools`: with the schema and description the agent file
(`.af`) gives them, else an open one. Letta ran the tool's code on its server; its result source is the
user's to give."""

from __future__ import annotations

import json

from ..common import Report, Section, find_file
from ..toolcalls import Declared
from .custom import TOOL_EXTRACTORS


def read_tools(graders: dict[str, dict]) -> list[str]:
    names: list[str] = []
    for spec in graders.values():
        config = spec.get("extractor_config")
        if spec.get("extractor") in TOOL_EXTRACTORS and isinstance(config, dict):
            name = config.get("tool_name")
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def _agent_file_tools(target: object, files: dict[str, str]) -> dict[str, dict]:
    """The agent file's tools by name: {description, parameters} from each tool's `json_schema`."""
    reference = target.get("agent_file") if isinstance(target, dict) else None
    found = find_file(files, reference) if isinstance(reference, str) else None
    if found is None:
        return {}
    try:
        data = json.loads(found[1])
    except ValueError:
        return {}
    out: dict[str, dict] = {}
    for tool in data.get("tools") or [] if isinstance(data, dict) else []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        schema = tool.get("json_schema") if isinstance(tool.get("json_schema"), dict) else {}
        parameters = schema.get("parameters")
        out[tool["name"]] = {
            "description": schema.get("description") or tool.get("description") or "",
            "parameters": parameters
            if isinstance(parameters, dict) and parameters.get("type") == "object"
            else None,
        }
    return out


def tool_sections(
    graders: dict[str, dict], data: dict, files: dict[str, str], report: Report
) -> list[Section]:
    names = read_tools(graders)
    if not names:
        return []
    known = _agent_file_tools(data.get("target"), files)
    declared = Declared()
    for name in names:
        declared.add(name)
    tools = declared.section()
    for tool in tools:
        own = known.get(tool["name"])
        if own:
            if own["description"]:
                tool["description"] = own["description"]
            if own["parameters"]:
                tool["parameters"] = own["parameters"]
            report.map(f"the agent file's tool {tool['name']} (description, json_schema) → tools")
    listed = ", ".join(names)
    report.map(f"the tools the graders' extractors read ({listed}) → tools: offered to the model under test")
    report.skip(f"the tools {listed}: Letta ran their code on its server — give each a result source "
                "(`returns`, `responses`, `code`, `llm` or `mcp`); until then a call gets an error result")  # fmt: skip
    comment = [
        "The tools Letta's graders read, offered to the model. Letta ran their code; say where each call's",
        "result comes from (returns, responses, code, llm, or an mcp server): until then a call is answered",
        "with an error saying the tool has no result configured.",
    ]
    return [Section("tools", tools, comments=comment, blank_before=True)]
