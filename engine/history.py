"""Given message histories, with attached files (calibrate's message lists, AgentV's input_messages).

`*.instructions.md` files become guidelines in the system message, each as a `=== name ===` block. Other
files are embedded in the message that names them, after its text. A message left with no text (say, a
system message that only attached guidelines) is dropped, but for a tool exchange, which goes as given: an
assistant message's `tool_calls` (its content null when it has no text) and each `tool` message with the
`tool_call_id` it answers. The suite's `system` prompt comes first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .schema import Message

INSTRUCTIONS_SUFFIX = ".instructions.md"


def file_block(name: str, text: str) -> str:
    return f"=== {name} ===\n{text.rstrip()}"


def build_history(
    system: str | None, messages: list[Message] | None, files: Mapping[str, str]
) -> tuple[list[dict], list[dict]]:
    """Returns (the messages to send before the live turns, the given history as shown to reviewers)."""
    guidelines: list[str] = []
    history: list[dict] = []
    for message in messages or []:
        if message.content is None:
            text = ""
        elif isinstance(message.content, str):
            text = message.content
        else:
            pieces = []
            for part in message.content:
                if part.type == "text":
                    pieces.append(part.value)
                elif part.value.endswith(INSTRUCTIONS_SUFFIX):
                    guidelines.append(file_block(part.value, files[part.value]))
                else:
                    pieces.append(file_block(part.value, files[part.value]))
            text = "\n".join(pieces)
        if message.tool_calls:
            history.append({"role": message.role, "content": text or None, "tool_calls": _calls(message)})
        elif message.tool_call_id is not None:  # kept even when empty: its call needs an answer
            history.append({"role": message.role, "tool_call_id": message.tool_call_id, "content": text})
        elif text.strip():
            history.append({"role": message.role, "content": text})
    head = "\n\n".join([*([system] if system else []), *guidelines])
    return given_messages(head, history), history


def _calls(message: Message) -> list[dict]:
    """An assistant message's tool calls as OpenAI takes them: arguments given as a mapping go as JSON text."""
    return [
        {
            "id": call.id,
            "type": call.type,
            "function": {
                "name": call.function.name,
                "arguments": call.function.arguments
                if isinstance(call.function.arguments, str)
                else json.dumps(call.function.arguments, ensure_ascii=False),
            },
        }
        for call in message.tool_calls or []
    ]


def given_messages(system: str | None, history: list[dict]) -> list[dict]:
    """What the model is sent before the live turns: the system message (the suite's `system` with any
    guidelines, as build_history composed it), when there is one, then the given history."""
    return ([{"role": "system", "content": system}] if system else []) + list(history)
