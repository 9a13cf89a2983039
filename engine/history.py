"""Given message histories, with attached files (calibrate's message lists, AgentV's input_messages).

`*.instructions.md` files become guidelines in the system message, each as a `=== name ===` block. Other
files are embedded in the message that names them, after its text. A message left with no text (say, a
system message that only attached guidelines) is dropped. The suite's `system` prompt comes first.
"""

from __future__ import annotations

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
        if isinstance(message.content, str):
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
        if text.strip():
            history.append({"role": message.role, "content": text})
    head = "\n\n".join([*([system] if system else []), *guidelines])
    return given_messages(head, history), history


def given_messages(system: str | None, history: list[dict]) -> list[dict]:
    """What the model is sent before the live turns: the system message (the suite's `system` with any
    guidelines, as build_history composed it), when there is one, then the given history."""
    return ([{"role": "system", "content": system}] if system else []) + list(history)
