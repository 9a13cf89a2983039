"""The `llm` source: a model plays the tool. It is told the tool's name, description, parameters and the
suite's instructions, and answers each call's arguments with a plausible result; it sees its own earlier
calls and answers in this conversation, so what it says stays consistent (an order it confirmed can be
looked up). `llm: true` is the suite's judge; `llm: {model}` names another model, resolved as an
`llm_judge.model` is.

Its tokens and cost count as the turn's judge usage (the ToolCall records its own too). A failure of its
endpoint is the conversation's error (an EndpointError), not a result the model under test is graded on."""

from __future__ import annotations

import json
import re

from ..schema import LlmTool, Tool
from .base import CallScope, Outcome

SYSTEM = (
    "You play the tool `{name}`, which an AI assistant under test calls. Each user message is one call's "
    "arguments, as JSON. Answer with exactly what the tool returns, and nothing else: no explanation, no "
    "code fences. Return JSON when the description or the instructions suggest structured data. Invent "
    "plausible values where you must, and stay consistent with your earlier answers in this conversation."
)
FENCED = re.compile(r"\A```[\w-]*\n(?P<body>.*?)\n?```\Z", re.S)


def system_prompt(tool: Tool, spec: LlmTool) -> str:
    parts = [SYSTEM.format(name=tool.name)]
    if tool.description:
        parts.append(f"Description: {tool.description}")
    parts.append(f"Parameters (JSON Schema): {json.dumps(tool.parameters, ensure_ascii=False)}")
    if spec.instructions:
        parts.append(f"Instructions: {spec.instructions}")
    return "\n\n".join(parts)


def memory(tool: Tool, scope: CallScope) -> list[tuple[dict, str]]:
    """This tool's earlier calls in the conversation, (arguments, result), oldest first: those the
    conversation already carries (earlier turns and rounds, a resumed conversation's stored turns too), then
    those it answered since that the conversation does not carry yet (the same round's earlier calls)."""
    results = {m.get("tool_call_id"): m.get("content") for m in scope.conversation if m.get("role") == "tool"}
    found: list[tuple[dict, str]] = []
    for message in scope.conversation:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in calls or ():
            function = call.get("function") or {}
            if function.get("name") == tool.name and call.get("id") in results:
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    continue
                found.append((arguments, results[call["id"]] or ""))
    carried = list(found)
    for entry in scope.state.get(_key(tool), ()):
        if entry in carried:
            carried.remove(entry)
        else:
            found.append(entry)
    return found


def from_llm(tool: Tool, arguments: dict, scope: CallScope) -> Outcome:
    spec = tool.llm if isinstance(tool.llm, LlmTool) else LlmTool()
    ctx = scope.ctx
    if spec.model is None:
        client, model = ctx.judge, ctx.judge_model
    elif ctx.resolve is not None:
        client, model = ctx.resolve(spec.model)
    else:
        client, model = ctx.judge, spec.model
    messages = [{"role": "system", "content": system_prompt(tool, spec)}]
    for said, answered in memory(tool, scope):
        messages.append({"role": "user", "content": _call_text(said)})
        messages.append({"role": "assistant", "content": answered})
    messages.append({"role": "user", "content": _call_text(arguments)})
    completion = client.complete(model, messages)
    text = completion.text.strip()
    fenced = FENCED.match(text)
    result = fenced["body"].strip() if fenced else text
    scope.state.setdefault(_key(tool), []).append((arguments, result))
    return Outcome(result=result, source="llm", usage=completion.usage, cost=completion.cost)


def _call_text(arguments: dict) -> str:
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _key(tool: Tool) -> str:
    return f"llm:{tool.name}"
