"""AgentV's `[Role]:` transcript format.

Judges read the conversation in this form, so they see what the model saw. Role markers appear only where
there is conversational structure: when any message is neither system nor user, or when more than one user
message carries text. Otherwise the texts are joined with blank lines, unmarked.
"""

from __future__ import annotations


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def has_structure(messages: list[dict]) -> bool:
    if any(message.get("role") not in ("system", "user") for message in messages):
        return True
    user_texts = [m for m in messages if m.get("role") == "user" and message_text(m).strip()]
    return len(user_texts) > 1


def format_transcript(messages: list[dict]) -> str:
    texts = [(message.get("role", "user"), message_text(message).strip()) for message in messages]
    texts = [(role, text) for role, text in texts if text]
    if not has_structure(messages):
        return "\n\n".join(text for _, text in texts)
    return "\n\n".join(f"[{role.capitalize()}]:\n{text}" for role, text in texts)
