"""AgentV's `[Role]:` transcript format, its `role: content` one, and the tool calls a conversation's
messages hold.

Judges read the conversation in this form, so they see what the model saw. Role markers appear only where
there is conversational structure: when any message is neither system nor user, or when more than one user
message carries text. Otherwise the texts are joined with blank lines, unmarked.

A model's tool calls read `(calls get_weather {"city": "Paris"})` under its `[Assistant]:` marker, and each
result is a `[Tool get_weather]:` message, so a judge sees the agent's trajectory in every scope.
"""

from __future__ import annotations

import json

from .results import ToolCall

NO_OUTPUT = "(no output)"  # a tool message with no text still shows that the tool answered


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def tool_calls_in(messages: list[dict]) -> list[ToolCall]:
    """Every tool call the assistant messages make, in order, each with the result of the `tool` message
    answering it (empty when none does yet)."""
    calls: list[ToolCall] = []
    by_id: dict[str, int] = {}
    for message in messages:
        if message.get("role") == "assistant":
            for number, call in enumerate(message.get("tool_calls") or ()):
                function = call.get("function") or {}
                raw = function.get("arguments") or ""
                key = call.get("id") or f"call-{len(calls)}-{number}"
                by_id[key] = len(calls)
                calls.append(
                    ToolCall(id=key, name=function.get("name", ""), arguments=_object(raw), raw_arguments=raw)
                )
        elif message.get("role") == "tool":
            at = by_id.get(message.get("tool_call_id", ""))
            if at is not None:
                result = message_text(message)
                error = result.removeprefix("Error: ") if result.startswith("Error: ") else None
                calls[at] = calls[at].model_copy(update={"result": result, "error": error})
    return calls


def _object(raw: str) -> dict | None:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def call_line(name: str, raw_arguments: str) -> str:
    """A call as a transcript shows it: `(calls get_weather {"city": "Paris"})`."""
    arguments = _object(raw_arguments)
    shown = json.dumps(arguments, ensure_ascii=False) if arguments is not None else raw_arguments
    return f"(calls {name} {shown or '{}'})"


def has_structure(messages: list[dict]) -> bool:
    if any(message.get("role") not in ("system", "user") for message in messages):
        return True
    user_texts = [m for m in messages if m.get("role") == "user" and message_text(m).strip()]
    return len(user_texts) > 1


def _entries(messages: list[dict]) -> list[tuple[str, str]]:
    """Each message as (marker, text); a message with nothing to show is left out, but a tool call or a tool
    result always shows."""
    names: dict[str, str] = {}
    entries = []
    for message in messages:
        role = message.get("role", "user")
        text = message_text(message).strip()
        if role == "tool":
            name = names.get(message.get("tool_call_id", ""), "")
            entries.append((f"Tool {name}".strip(), text or NO_OUTPUT))
            continue
        lines = [text] if text else []
        calls = (message.get("tool_calls") or ()) if role == "assistant" else ()
        for call in calls:
            function = call.get("function") or {}
            names[call.get("id", "")] = function.get("name", "")
            lines.append(call_line(function.get("name", ""), function.get("arguments") or ""))
        if lines:
            entries.append((role.capitalize(), "\n".join(lines)))
    return entries


def format_transcript(messages: list[dict]) -> str:
    entries = _entries(messages)
    if not has_structure(messages):
        return "\n\n".join(text for _, text in entries)
    return "\n\n".join(f"[{marker}]:\n{text}" for marker, text in entries)


def role_lines(messages: list[dict]) -> str:
    """The conversation as AgentV's conversation-level assertions read it: each message `role: content` (a
    content that is not text as its JSON), a blank line between. It holds the messages' texts alone, as
    AgentV's does: a model's tool calls and their results are left out."""
    lines = []
    for message in messages:
        role = message.get("role", "user")
        if role == "tool" or (role == "assistant" and message.get("tool_calls")):
            continue
        content = message.get("content")
        text = (
            content
            if isinstance(content, str)
            else json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        )
        lines.append(f"{role}: {text}")
    return "\n\n".join(lines)
