"""A test's messages: its prompt rendered with its variables, chat prompts and AgentV's `{{ input }}`
messages, content parts, variable files and the reference answer."""

from __future__ import annotations

import json
import re

from ..common import (
    ImportProblem,
    as_text,
    attach_reference,
    basename,
    find_file,
    parse_yaml,
    short,
)
from ..toolcalls import answered_only, history_calls
from .render import lookup, only_variable, render, without_conversation_loop

ENV_REFERENCE = re.compile(r"\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)")
# `{{ env.NAME }}`, or with a default: `{{ env.NAME | default("text") }}`.
ENV_TEMPLATE = re.compile(
    r"\{\{-?\s*env\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*"
    r"(?:\|\s*(?:default|d)\s*\(\s*(?P<default>'[^']*'|\"[^\"]*\"|[^()'\"]*?)\s*\)\s*)?-?\}\}"
)
CHAT_ROLES = ("system", "user", "assistant", "developer", "tool")


class Messages:
    """Building a test's messages (a part of the reader)."""

    def loaded_vars(self, variables: dict, where: str) -> dict:
        out = {}
        for key, value in variables.items():
            if isinstance(value, str) and value.startswith("file://"):
                path = value.removeprefix("file://")
                if path.lower().endswith((".py", ".js", ".ts")):
                    self.report.lose(f"{where}.vars.{key}: {path} computes the value with code — left empty")
                    value = ""
                else:
                    found = find_file(self.files, path)
                    if found is None:
                        self.report.need(basename(path))
                        self.report.lose(
                            f"{where}.vars.{key}: {path} was not uploaded — upload it and import again"
                        )
                        value = ""
                    else:
                        value = found[1]
                        if found[0].lower().endswith((".yaml", ".yml", ".json")):
                            try:
                                value = parse_yaml(found[0], found[1])
                            except ImportProblem:
                                value = found[1]
                        self.report.group(f"variable file {found[0]} → its text", where, mapped=True)
            out[key] = value
        return out

    def messages(self, template, variables: dict, test: dict, where: str) -> list[dict]:
        options = test.get("options") if isinstance(test.get("options"), dict) else {}
        if template is None:  # no prompts: the test's `input` (AgentV) or `prompt` variable is the prompt
            template = "{{ input }}" if "input" in variables or self.agentv else "{{ prompt }}"
        if isinstance(template, str):
            name = only_variable(template)
            value = lookup(variables, name) if name else None
            if name and is_chat(value):
                return self.chat(value, variables, where, literal=True)
            text = self.render_text(template, variables, where)
            chat = chat_or_text(text)
            if not isinstance(chat, str):
                return self.chat(chat, variables, where, literal=True)
            text = f"{options.get('prefix', '')}{text}{options.get('suffix', '')}"
            return [{"role": "user", "content": text}] if text.strip() else []
        return self.chat(template, variables, where, literal=False)

    def chat(self, items: list, variables: dict, where: str, literal: bool) -> list[dict]:
        out: list[dict] = []
        taken: set[str] = set()
        for message in items:
            content = message.get("content")
            if not literal and isinstance(content, str):
                name = only_variable(content)
                value = lookup(variables, name) if name else None
                if name and is_chat(value):
                    out += self.chat(value, variables, where, literal=True)
                    continue
                content = self.render_text(content, variables, where)
            elif isinstance(content, str):
                self.environment(content, where)
            content = self.content(content, where)
            role = str(message.get("role"))
            calls, answers = (
                history_calls(message, where, self.report, taken) if role == "assistant" else ([], [])
            )
            if content or calls:
                converted: dict = {"role": role, **({"content": content} if content else {})}
                if calls:
                    converted["tool_calls"] = calls
                if role == "tool" and as_text(message.get("tool_call_id")):
                    converted["tool_call_id"] = as_text(message["tool_call_id"])
                out += [converted, *answers]
            for key in message:
                if key not in ("role", "content", "tool_calls", "tool_call_id"):
                    self.report.group(f"message key `{key}`: not converted", where)
        return answered_only(out, where, self.report)

    def content(self, raw: object, where: str) -> str | list[dict]:
        if isinstance(raw, str):
            return raw if raw.strip() else ""
        if isinstance(raw, list):
            parts = []
            for part in raw:
                if isinstance(part, str):
                    parts.append({"type": "text", "value": part})
                elif isinstance(part, dict) and part.get("type") == "text":
                    parts.append({"type": "text", "value": str(part.get("value", part.get("text", "")))})
                elif isinstance(part, dict) and part.get("type") == "file" and as_text(part.get("value")):
                    parts.append({"type": "file", "value": self.attach(as_text(part["value"]), where)})
                else:
                    self.report.lose(
                        f"{where}: message part {short(part, 50)} — not text or a file, left out"
                    )
            parts = [p for p in parts if p["value"].strip()]
            if all(p["type"] == "text" for p in parts):
                return "\n".join(p["value"] for p in parts)
            return parts
        if raw is None:
            return ""
        return json.dumps(raw, ensure_ascii=False, indent=2, default=str)

    def attach(self, reference: str, where: str) -> str:
        return attach_reference(self.files, self.attached, self.report, reference, where)

    def render_text(self, template: str, variables: dict, where: str) -> str:
        rendered = render(self.env_to_vars(template, where), variables)
        for name in [n for n in rendered.unknown if n.startswith("env.")]:
            self.environment(f"{{{{ {name} }}}}", where)
        for name in [n for n in rendered.unknown if not n.startswith("env.")]:
            self.report.group(f"template variable {{{{ {name} }}}}: the test does not set it, rendered empty "
                              "as Nunjucks does", where)  # fmt: skip
        for expression in rendered.unrendered:
            self.report.group(f"template {short(expression, 60)}: evalsite renders variables and simple filters "
                              "only, left as written", where, lost=True)  # fmt: skip
        return rendered.text

    def env_to_vars(self, text: str, where: str) -> str:
        """The tools fill `{{ env.NAME }}` from the environment when they run; evalsite asks for such a value
        when a run is launched: it becomes `{{var:NAME}}`, a suite variable with the template's default."""

        def declare(found: re.Match) -> str:
            name, default = found.group("name"), found.group("default")
            value = _default(default) if default is not None else None
            given_env = self.data.get("env") if isinstance(self.data.get("env"), dict) else {}
            if value is None and isinstance(given_env.get(name), (str, int, float)):
                value = str(given_env[name])  # promptfoo's `env:` block sets it for the run
            if self.suite_vars.setdefault(name, value) is None and value is not None:
                self.suite_vars[name] = value
            given = f"default {short(value, 40)}" if value is not None else "no default: give it at launch"
            self.report.group(f"{{{{ env.{name} }}}} → {{{{var:{name}}}}}, a suite variable ({given}; "
                              f"evalsite run --var {name}=…)", where, mapped=True)  # fmt: skip
            return f"{{{{var:{name}}}}}"

        return ENV_TEMPLATE.sub(declare, text) if "env." in text else text

    def env_everywhere(self, value: object, where: str) -> object:
        """Every text of a parsed file with its `{{ env.NAME }}` as suite variables."""
        if isinstance(value, str):
            return self.env_to_vars(value, where)
        if isinstance(value, dict):
            return {key: self.env_everywhere(item, f"{where}.{key}" if where else str(key))
                    for key, item in value.items()}  # fmt: skip
        if isinstance(value, list):
            return [self.env_everywhere(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return value

    def environment(self, text: str, where: str) -> None:
        """AgentV fills `{{ env.NAME }}` from the environment when it runs; the import cannot."""
        for name in ENV_REFERENCE.findall(text):
            self.report.group(f"{{{{ env.{name} }}}}: an environment variable AgentV fills when it runs — left "
                              "as written; write its value into the suite", where, lost=True)  # fmt: skip

    def reference(self, raw: object, where: str) -> str | None:
        """The reference answer: a text, an object as JSON text, or the last expected message's content."""
        if raw is None:
            return None
        if isinstance(raw, str):
            self.environment(raw, where)
        if isinstance(raw, list) and raw and all(isinstance(m, dict) and "role" in m for m in raw):
            content = raw[-1].get("content")
            if isinstance(content, list):
                pieces = []
                for part in content:
                    value = as_text(part.get("value")) if isinstance(part, dict) else as_text(part)
                    if isinstance(part, dict) and part.get("type") == "file" and value:
                        found = find_file(self.files, value)
                        if found is None:
                            self.report.need(basename(value))
                        pieces.append(found[1].rstrip() if found else f"[{basename(value)}, not uploaded]")
                    elif value:
                        pieces.append(value)
                return "\n".join(pieces)
            raw = content
        if isinstance(raw, str):
            return raw
        return json.dumps(raw, ensure_ascii=False, indent=2, default=str)


def is_chat(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)
    )


def chat_or_text(text: str, yaml_too: bool = False) -> object:
    """A prompt that is a JSON (or YAML) list of {role, content} messages as that list, else the text."""
    stripped = without_conversation_loop(text).strip()
    if stripped.startswith("[") or yaml_too:
        candidate = re.sub(r",(\s*[\]}])", r"\1", stripped)
        for parse in (json.loads, lambda t: parse_yaml("prompt", t)):
            try:
                value = parse(candidate)
            except (ValueError, ImportProblem):
                continue
            if is_chat(value) and all(m["role"] in CHAT_ROLES for m in value):
                return value
    return text


def prompt_text(messages: list[dict]) -> str:
    """The last user message's text (its text parts, when it has parts)."""
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        return "\n".join(part["value"] for part in content if part["type"] == "text")
    return ""


def slug(text: str) -> str:
    slug = re.sub(r"\s+", "-", text.strip())
    return slug[:200] or "test"


def _default(written: str) -> str:
    written = written.strip()
    if len(written) >= 2 and written[0] == written[-1] and written[0] in "'\"":
        return written[1:-1]
    return written
