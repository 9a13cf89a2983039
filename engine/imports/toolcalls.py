"""What the tools' own files say about tool calls, as evalsite's tool checks and tool declarations.

AgentV's `tool-trajectory` grader (modes any_order, in_order, exact, subset, superset) and its
promptfoo-style `trajectory:*` assertions become `tool_called`, `tool_not_called`, `tool_sequence` and a
trajectory judge. A tool the checks name is declared in the suite's `tools` (its arguments' shape read from
the expected arguments), so the model under test is offered it; where its results come from is the user's to
say (`returns`, `responses`, `mcp`, ...), since the original agent ran its own code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from engine.schema.tools import TOOL_NAME

from .common import Report, Section, as_count, as_text, non_finite, short

# AgentV's trajectory modes as evalsite's `tool_sequence` modes.
SEQUENCE_MODES = {"exact": "strict", "in_order": "in_order", "superset": "superset", "subset": "subset"}
TRAJECTORY_TYPES = ("tool-trajectory", "tool_trajectory", "trajectory:tool-used", "trajectory:tool-sequence",
                    "trajectory:tool-args-match", "trajectory:goal-success")  # fmt: skip


@dataclass
class Declared:
    """The tools the converted checks name, with an example of the arguments each was expected with."""

    tools: dict[str, dict] = field(default_factory=dict)
    given: dict[str, dict] = field(default_factory=dict)  # tools the file defines whole (a provider's config)

    def add(self, name: str, args: dict | None = None) -> None:
        known = self.tools.setdefault(name, {})
        for key, value in (args or {}).items():
            known.setdefault(key, value)

    def section(self) -> list[dict]:
        """The suite's `tools`: each named tool, with a JSON Schema of the arguments it was expected with and
        no result source (a call is answered with an error saying so until one is given)."""
        out = list(self.given.values())
        for name, args in self.tools.items():
            if name in self.given:
                continue
            properties = {key: _schema_of(value) for key, value in args.items()}
            out.append(
                {
                    "name": name,
                    "description": f"{name} (declared by the import; describe it and give it results)",
                    "parameters": {"type": "object", "properties": properties},
                }
            )
        return out


def _schema_of(value: object) -> dict:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}


def _args(args: object, where: str, report: Report) -> dict:
    """Expected arguments as matchers, those holding NaN or an infinity left out (listed as lost)."""
    if not isinstance(args, dict):
        return {}
    kept = {}
    for key, value in args.items():
        if non_finite(value):
            report.lose(
                f"{where}.args.{key}: {short(value)} — not a value a call can be compared with; left out"
            )
        else:
            kept[str(key)] = value
    return kept


def _mode(value: object) -> str | None:
    return as_text(value) if isinstance(value, str) else None


def is_trajectory(kind: str) -> bool:
    return kind.removeprefix("not-") in TRAJECTORY_TYPES


def _tool_name(value: object) -> str | None:
    text = as_text(value)
    return text.strip() if text and text.strip() else None


def trajectory_checks(
    item: dict, kind: str, where: str, report: Report, declared: Declared
) -> list[tuple[str, dict, float]]:
    """An AgentV tool-trajectory grader or `trajectory:*` assertion as checks, each with a name suffix and its
    share of the item's weight (AgentV scores any_order as the share of tools meeting their minimum). An empty
    list means nothing could be carried (listed as lost)."""
    negate = kind.startswith("not-") or item.get("negate") is True or item.get("inverse") is True
    base = kind.removeprefix("not-").replace("_", "-")
    if base == "tool-trajectory":
        if negate:
            report.lose(f"{where}: negated tool-trajectory — evalsite cannot invert a trajectory's score; not "
                        "converted")  # fmt: skip
            return []
        return _agentv_trajectory(item, where, report, declared)
    value = item.get("value")
    if base == "trajectory:tool-used":
        return _tool_used(value, negate, where, report, declared)
    if negate:
        report.lose(f"{where}: not-{base} — evalsite cannot invert this check; not converted")
        return []
    if base == "trajectory:tool-sequence":
        steps = (
            value
            if isinstance(value, list)
            else (value or {}).get("steps")
            if isinstance(value, dict)
            else None
        )
        mode = (_mode(value.get("mode", "in_order")) if isinstance(value, dict) else "in_order") or "in_order"
        calls = _calls(steps, "name", where, report, declared)
        if not calls:
            report.lose(
                f"{where}: {base} with no steps evalsite can read ({short(value, 60)}); not converted"
            )
            return []
        sequence = {"calls": calls, "mode": SEQUENCE_MODES.get(mode, "in_order")}
        report.map(f"{where} ({base}, {mode}) → tool_sequence: mode {sequence['mode']}")
        return [("", {"tool_sequence": sequence}, 1.0)]
    if base == "trajectory:tool-args-match":
        if not isinstance(value, dict) or not _tool_name(value.get("name")):
            report.lose(f"{where}: {base} {short(value, 60)} — names no tool (a `pattern` evalsite does not "
                        "match); not converted")  # fmt: skip
            return []
        name = _tool_name(value["name"])
        args = _args(value.get("args"), f"{where}.value", report)
        declared.add(name, args)
        if value.get("mode") == "exact":
            report.skip(
                f"{where}: mode exact — evalsite checks the arguments given, allowing others the call adds"
            )
        for key in ("defaults", "ignore"):
            if key in value:
                report.skip(f"{where}.value.{key}: used by AgentV's exact match only, left out")
        report.map(f"{where} ({base}) → tool_called with args")
        return [("", {"tool_called": {"name": name, "args": args} if args else name}, 1.0)]
    if base == "trajectory:goal-success":
        goal = as_text(value.get("goal")) if isinstance(value, dict) else as_text(value)
        if not goal:
            report.lose(f"{where}: {base} with no goal; not converted")
            return []
        report.map(
            f"{where} ({base}) → llm_judge with scope: trajectory (the judge sees the calls and results)"
        )
        criteria = (
            f"The agent achieved this goal, judging by its tool calls, their results and its answer: {goal}"
        )
        return [("", {"llm_judge": {"criteria": criteria, "scope": "trajectory"}}, 1.0)]
    report.lose(f"{where}: {kind} — not a trajectory check evalsite has; not converted")
    return []


def _tool_used(value: object, negate: bool, where: str, report: Report, declared: Declared) -> list:
    names: list[str] = []
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = list(value)
    elif isinstance(value, dict) and _tool_name(value.get("name")):
        name = _tool_name(value["name"])
        declared.add(name)
        spec: dict[str, object] = {"name": name}
        low, high = as_count(value.get("min")), as_count(value.get("max"))
        if negate:
            report.map(f"{where} (not-trajectory:tool-used {name}) → tool_not_called")
            return [("", {"tool_not_called": name}, 1.0)]
        spec["min"] = 1 if low is None else low
        if high is not None:
            spec["max"] = high
        report.map(f"{where} (trajectory:tool-used {name}) → tool_called with min/max")
        return [("", {"tool_called": spec}, 1.0)]
    names = [n.strip() for n in names if n.strip()]
    if not names:
        report.lose(f"{where}: trajectory:tool-used {short(value, 60)} — no tool name (a `pattern` evalsite "
                    "does not match); not converted")  # fmt: skip
        return []
    for name in names:
        declared.add(name)
    if negate:
        report.map(f"{where} (not-trajectory:tool-used {', '.join(names)}) → tool_not_called")
        share = 1.0 / len(names)
        return [(f"-{name}" if len(names) > 1 else "", {"tool_not_called": name}, share) for name in names]
    if len(names) == 1:
        report.map(f"{where} (trajectory:tool-used {names[0]}) → tool_called")
        return [("", {"tool_called": names[0]}, 1.0)]
    # Every named tool used, in any order, with other calls allowed.
    report.map(f"{where} (trajectory:tool-used {', '.join(names)}) → tool_sequence: mode superset")
    return [("", {"tool_sequence": {"calls": names, "mode": "superset"}}, 1.0)]


def _calls(items: object, key: str, where: str, report: Report, declared: Declared,
           args_mode: object = None) -> list:  # fmt: skip
    """Expected calls as `tool_sequence` calls: a name, or `{name, args}` when arguments are checked."""
    if not isinstance(items, list):
        return []
    calls: list = []
    for number, step in enumerate(items):
        if isinstance(step, str) and step.strip():
            declared.add(step.strip())
            calls.append(step.strip())
            continue
        name = _tool_name(step.get(key) or step.get("name")) if isinstance(step, dict) else None
        if name is None:
            report.lose(
                f"{where}.expected[{number}]: {short(step, 50)} — names no tool; left out of the sequence"
            )
            continue
        args = (
            _args(step.get("args"), f"{where}.expected[{number}]", report)
            if isinstance(step.get("args"), dict)
            else None
        )
        mode = step.get("args_match", step.get("argsMatch", args_mode))
        mode = mode if isinstance(mode, list) else _mode(mode)
        if "max_duration_ms" in step or "maxDurationMs" in step:
            report.lose(f"{where}.expected[{number}].max_duration_ms: a latency bound on {name} — evalsite has "
                        "no per-call time check; not converted")  # fmt: skip
        if not isinstance(args, dict) or mode == "ignore":
            declared.add(name)
            calls.append(name)
            continue
        if isinstance(mode, list):
            wanted = [str(f) for f in mode if isinstance(f, str)]
            args = {k: v for k, v in args.items() if k in {f.split(".")[0] for f in wanted}}
        elif mode in (None, "exact"):
            report.group(
                "tool-trajectory args (AgentV compares the whole arguments): evalsite checks the arguments "
                "given, allowing others the call adds",
                where,
            )
        elif mode == "subset":
            report.group("tool-trajectory args_match subset: evalsite checks the arguments given", where)
        declared.add(name, args)
        calls.append({"name": name, "args": args} if args else name)
    return calls


def _agentv_trajectory(item: dict, where: str, report: Report, declared: Declared) -> list:
    mode = _mode(item.get("mode"))
    if mode == "any_order":
        minimums = item.get("minimums")
        if not isinstance(minimums, dict) or not minimums:
            report.skip(f"{where}: tool-trajectory any_order with no `minimums` — AgentV passes it whatever "
                        "the agent calls (any_order reads only `minimums`), so there is nothing to check")  # fmt: skip
            return []
        out = []
        counted = {str(k): as_count(v) for k, v in minimums.items()}
        for tool, low in counted.items():
            if low is None:
                report.lose(f"{where}.minimums.{tool}: {short(minimums[tool])} — not a count; left out")
                continue
            declared.add(tool)
            out.append(
                (f"-{tool}" if len(counted) > 1 else "", {"tool_called": {"name": tool, "min": low}}, 1.0)
            )
        report.map(f"{where} (tool-trajectory any_order) → a tool_called check per tool with its minimum, each "
                   "an equal share of the score (AgentV's score: the share of tools meeting their minimum)")  # fmt: skip
        return [(suffix, check, 1.0 / len(out)) for suffix, check, _ in out]
    if mode not in SEQUENCE_MODES:
        report.lose(f"{where}: tool-trajectory mode {short(item.get('mode'))} — AgentV skips it (not any_order, in_order, "
                    "exact, subset or superset); not converted")  # fmt: skip
        return []
    calls = _calls(item.get("expected"), "tool", where, report, declared,
                   item.get("args_match", item.get("argsMatch")))  # fmt: skip
    if not calls and mode != "subset":
        report.lose(f"{where}: tool-trajectory {mode} with no `expected` calls; not converted")
        return []
    sequence = {"calls": calls, "mode": SEQUENCE_MODES[mode]}
    if mode == "subset":
        report.group("tool-trajectory subset: AgentV allows each expected call any number of times, evalsite "
                     "once each", where)  # fmt: skip
    report.map(f"{where} (tool-trajectory {mode}) → tool_sequence: mode {SEQUENCE_MODES[mode]} (all of it must "
               "hold; AgentV passes at 0.8 of the expected calls)")  # fmt: skip
    return [("", {"tool_sequence": sequence}, 1.0)]


def tool_sections(declared: Declared, report: Report) -> list[Section]:
    """The suite's `tools` for the tools its checks name; said to be without results until the user gives
    them, since the agent the original tested ran its own."""
    tools = declared.section()
    if not tools:
        return []
    names = ", ".join(tool["name"] for tool in tools)
    report.map(f"the tools the file uses ({names}) → tools: offered to the model under test")
    report.skip(
        f"the tools {names}: the agent ran its own, which the file does not hold — give each a result "
        "source (`returns`, `responses`, `code`, `llm` or `mcp`); until then a call gets an error result"
    )
    comment = [
        "The tools the imported checks name, offered to the model. The agent ran its own; say where each",
        "call's result comes from (returns, responses, code, llm, or an mcp server): until then a call is",
        "answered with an error saying the tool has no result configured.",
    ]
    return [Section("tools", tools, comments=comment, blank_before=True)]


def provider_tools(raw: object, where: str, declared: Declared, report: Report) -> None:
    """A provider's `config.tools` (OpenAI's `{type: function, function: {...}}`, or Anthropic's `{name,
    input_schema}`) as the suite's tools, the first definition of a name kept."""
    if not isinstance(raw, list):
        report.skip(f"{where}: {short(raw, 60)} — not a list of tools written in the file, left out")
        return
    for number, item in enumerate(raw):
        function = (
            item.get("function")
            if isinstance(item, dict) and isinstance(item.get("function"), dict)
            else item
        )
        name = _tool_name(function.get("name")) if isinstance(function, dict) else None
        if name is None or not TOOL_NAME.fullmatch(name):
            report.skip(
                f"{where}[{number}]: {short(item, 60)} — not a function tool evalsite can offer, left out"
            )
            continue
        parameters = function.get("parameters", function.get("input_schema"))
        if non_finite(parameters):
            report.skip(
                f"{where}[{number}]: its parameters hold NaN or an infinity — offered with open parameters"
            )
            parameters = None
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            parameters = {"type": "object", "properties": {}}
        if name not in declared.given:
            declared.given[name] = {"name": name, "description": as_text(function.get("description")) or "",
                                    "parameters": parameters}  # fmt: skip
    if declared.given:
        report.map(f"{where} → tools (offered to the model under test); promptfoo grades the calls the model "
                   "makes, evalsite carries them out and grades the answer after them")  # fmt: skip


# --- tool exchanges in given histories ----------------------------------------------------------------------


def history_calls(
    message: dict, where: str, report: Report, taken: set[str]
) -> tuple[list[dict], list[dict]]:
    """An assistant message's `tool_calls` in OpenAI's shape (`{id, function: {name, arguments}}`) or
    AgentV's (`{tool, input, output, id}`): the calls as a given history writes them, and the `tool` messages
    that answer them when the call carries its own `output` (AgentV's traces)."""
    raw = message.get("tool_calls")
    if not isinstance(raw, list):
        return [], []
    calls: list[dict] = []
    answers: list[dict] = []
    for number, call in enumerate(raw):
        if not isinstance(call, dict):
            report.group("a tool call that is not a mapping: left out", where)
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        name = _tool_name(function.get("name", call.get("tool")))
        if name is None:
            report.group("a tool call with no tool name: left out", where)
            continue
        arguments = function.get("arguments", call.get("input", call.get("args", {})))
        if non_finite(arguments) or not isinstance(arguments, (str, dict)):
            arguments = {} if arguments is None else json.dumps(arguments, default=str)
        call_id = as_text(call.get("id")) or f"call_{len(taken) + 1}"
        while call_id in taken:
            call_id = f"{call_id}_{number}"
        taken.add(call_id)
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        if "output" in call:
            output = call["output"]
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
            answers.append({"role": "tool", "tool_call_id": call_id, "content": text or "(empty)"})
    return calls, answers


def answered_only(messages: list[dict], where: str, report: Report) -> list[dict]:
    """The history with every tool call answered by the `tool` messages right after it, as endpoints require:
    an assistant message's calls that are not are left out (listed), and a `tool` message answering no call
    made just before it is sent without its `tool_call_id`."""
    out: list[dict] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        calls = message.get("tool_calls")
        if calls:
            following = []
            after = index + 1
            while after < len(messages) and messages[after].get("role") == "tool":
                following.append(messages[after])
                after += 1
            answered = {m.get("tool_call_id") for m in following}
            if all(call["id"] in answered for call in calls):
                out.append(message)
                out += following
                index = after
                continue
            report.group(
                "an assistant message's tool calls with no tool message answering them: left out", where
            )
            message = {key: value for key, value in message.items() if key != "tool_calls"}
            if not message.get("content"):
                index += 1
                continue
        if message.get("role") == "tool" and "tool_call_id" in message:
            message = {key: value for key, value in message.items() if key != "tool_call_id"}
        out.append(message)
        index += 1
    return out
