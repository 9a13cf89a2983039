"""An AgentV case's messages: roles and content parts (files attached), the reference answer from the
expected messages, and the texts a judge's template variables show."""

from __future__ import annotations

import json

from engine.history import INSTRUCTIONS_SUFFIX
from engine.transcript import format_transcript

from ..common import as_text, attach_reference, basename, find_file, short
from ..toolcalls import answered_only, history_calls


class Messages:
    """The message half of AgentV's case converter: it uses the converter's `files`, `report` and `attached`."""

    def messages(self, raw: object, label: str) -> list[dict]:
        if not isinstance(raw, list):
            return []
        out = []
        taken: set[str] = set()
        for number, message in enumerate(raw):
            if not isinstance(message, dict) or not as_text(message.get("role")):
                self.report.skip(f"{label}.input_messages[{number}]: needs a role, left out")
                continue
            role = as_text(message["role"])
            content = self.content(message.get("content"), f"{label}.input_messages[{number}]", label)
            calls, answers = (
                history_calls(message, label, self.report, taken) if role == "assistant" else ([], [])
            )
            if not calls and not (
                content.strip() if isinstance(content, str) else any(p["value"].strip() for p in content)
            ):
                # evalsite refuses an empty message (endpoints do too): say so rather than send nothing
                self.report.group("messages with no content: left out", label)
                continue
            converted: dict = {"role": role}
            if content:
                converted["content"] = content
            if calls:
                converted["tool_calls"] = calls
                self.report.group(
                    "tool_calls of a given message → the history's tool calls", label, mapped=True
                )
            if role == "tool" and as_text(message.get("tool_call_id")):
                converted["tool_call_id"] = as_text(message["tool_call_id"])
            out += [converted, *answers]
            for key in message:
                if key not in ("role", "content", "tool_calls", "tool_call_id"):
                    self.report.group(f"message key `{key}`: not converted", label)
        out = answered_only(out, label, self.report)
        if out:
            self.report.group("input / input_messages → messages (the given history)", label, mapped=True)
        return out

    def content(self, raw: object, where: str, label: str) -> str | list[dict]:
        if isinstance(raw, str):
            return raw
        if raw is None:
            return ""
        if isinstance(raw, list):
            parts = []
            for number, part in enumerate(raw):
                if isinstance(part, str):
                    parts.append({"type": "text", "value": part})
                elif (
                    isinstance(part, dict)
                    and part.get("type") == "text"
                    and as_text(part.get("value")) is not None
                ):
                    parts.append({"type": "text", "value": as_text(part["value"])})
                elif isinstance(part, dict) and part.get("type") == "file" and as_text(part.get("value")):
                    parts.append({"type": "file", "value": self.attach(as_text(part["value"]), label)})
                else:
                    self.report.skip(
                        f"{where}.content[{number}]: {short(part, 50)} — not a text or file part, left out"
                    )
            return parts
        self.report.group("structured content (a mapping) → its JSON text", label)
        return json.dumps(raw, ensure_ascii=False, indent=2, default=str)

    def attach(self, reference: str, label: str) -> str:
        return attach_reference(self.files, self.attached, self.report, reference, label)

    def reference(self, raw: object, label: str) -> str | None:
        """The reference answer: the last expected message, as text."""
        if not isinstance(raw, list) or not raw:
            return None
        messages = [m for m in raw if isinstance(m, dict)]
        if not messages:
            return None
        last = messages[-1]
        if len(messages) > 1:
            self.report.group(
                "expected_messages before the last: only the last one is the reference answer", label
            )
        content = last.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            pieces = []
            for part in content:
                if isinstance(part, dict) and part.get("type") == "file" and as_text(part.get("value")):
                    found = find_file(self.files, part["value"])
                    if found is None:
                        self.report.need(basename(part["value"]))
                        self.report.group(
                            f"expected_messages file {part['value']}: not uploaded, so the reference answer is "
                            "incomplete — upload it and import again",
                            label,
                        )
                        pieces.append(f"[the reference answer in {basename(part['value'])}, not uploaded]")
                    else:
                        pieces.append(found[1].rstrip())
                        self.report.group(
                            f"expected_messages file {found[0]} → inlined in the reference answer",
                            label,
                            mapped=True,
                        )
                elif isinstance(part, dict) and as_text(part.get("value")) is not None:
                    pieces.append(as_text(part["value"]))
                elif isinstance(part, str):
                    pieces.append(part)
            return "\n".join(pieces) or None
        if content is None:
            if last.get("tool_calls"):
                self.report.group(
                    "expected tool calls: graded by an expected_tool_calls evaluator only (then a tool_sequence)",
                    label,
                )
            return None
        return json.dumps(content, ensure_ascii=False, indent=2, default=str)


def with_files(raw: object, paths: list[str]) -> object:
    """`input_files`: file parts before the text of the (first) user message, as AgentV expands them."""
    parts = [{"type": "file", "value": path} for path in paths]
    if raw is None:
        return [{"role": "user", "content": parts}]
    if isinstance(raw, str):
        return [{"role": "user", "content": [*parts, {"type": "text", "value": raw}]}]
    if isinstance(raw, list):
        out, done = [], False
        for message in raw:
            if not done and isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                content = [{"type": "text", "value": content}] if isinstance(content, str) else content
                message = {**message, "content": [*parts, *(content if isinstance(content, list) else [])]}
                done = True
            out.append(message)
        return out if done else [*out, {"role": "user", "content": parts}]
    return raw


def turn_text(raw: object) -> str | None:
    """A turn's user input as the text evalsite sends: a string, the user messages of a list, or JSON."""
    if isinstance(raw, str):
        return raw if raw.strip() else None
    if isinstance(raw, dict) and "content" in raw:
        return turn_text(raw["content"])
    if isinstance(raw, list):
        texts = [
            turn_text(m.get("content")) if isinstance(m, dict) and "content" in m else turn_text(m)
            for m in raw
            if not (isinstance(m, dict) and m.get("role") not in (None, "user"))
        ]
        return "\n\n".join(t for t in texts if t) or None
    if raw is None:
        return None
    return json.dumps(raw, ensure_ascii=False, default=str)


def transcript(messages: list[dict]) -> str:
    """The given conversation in AgentV's `[Role]:` form (its formatted question); a file part shows as its
    name, and `*.instructions.md` files not at all: AgentV sends them as guidelines, apart."""

    def text(content: str | list[dict]) -> str:
        if isinstance(content, str):
            return content
        return "\n".join(
            part["value"] if part["type"] == "text" else f"[file {part['value']}]"
            for part in content
            if part["type"] == "text" or not part["value"].endswith(INSTRUCTIONS_SUFFIX)
        )

    plain = [{"role": m["role"], "content": text(m.get("content") or "")} for m in messages]
    return format_transcript(plain)


def last_user_text(messages: list[dict]) -> str:
    """The last user turn: the question the model answers (AgentV's {{question}}), not the first one."""
    for message in reversed(messages):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "\n".join(part["value"] for part in content if part["type"] == "text")
    return ""
