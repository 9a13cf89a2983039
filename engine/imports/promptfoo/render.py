"""Filling promptfoo / AgentV prompt templates (Nunjucks) with a test's variables, as far as plain Python can:
`{{ name }}`, `{{ name.key }}`, `{{ name[0] }}` and the common filters. Whatever cannot be filled is named,
so the importer can list it instead of sending a half-rendered prompt in silence.

Plain Python: no Django here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

EXPRESSION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)
TAG = re.compile(r"\{%-?.*?-?%\}", re.DOTALL)
COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)
PATH = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\s*(?:\d+|'[^']*'|\"[^\"]*\")\s*\])*$"
)
# evalsite's own suite variable, written by the importer where the tool read the environment.
SUITE_VAR = re.compile(r"^var:\s*[A-Za-z_][A-Za-z0-9_.\-]*$")
STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*(\d+|'[^']*'|\"[^\"]*\")\s*\]")
# The loop over earlier turns in promptfoo's multi-turn prompts: the importer sends those turns for real.
CONVERSATION_LOOP = re.compile(
    r"\{%-?\s*for\s+\w+\s+in\s+_conversation\s*-?%\}.*?\{%-?\s*endfor\s*-?%\}", re.DOTALL
)
SIMPLE_FILTERS = {
    "safe": lambda value: value,
    "escape": lambda value: value,
    "e": lambda value: value,
    "trim": lambda value: _text(value).strip(),
    "upper": lambda value: _text(value).upper(),
    "lower": lambda value: _text(value).lower(),
    "dump": lambda value: json.dumps(value, ensure_ascii=False, default=str),
    "tojson": lambda value: json.dumps(value, ensure_ascii=False, default=str),
    "length": lambda value: str(len(value)) if isinstance(value, (str, list, dict)) else "0",
    "string": lambda value: _text(value),
    "capitalize": lambda value: _text(value).capitalize(),
}
MISSING = object()


@dataclass
class Rendered:
    text: str
    unknown: list[str] = field(default_factory=list)  # variables the test does not give (rendered empty)
    unrendered: list[str] = field(default_factory=list)  # expressions and tags left as written


def uses_conversation(template: str) -> bool:
    return "_conversation" in template


def without_conversation_loop(template: str) -> str:
    return CONVERSATION_LOOP.sub("", template)


def lookup(variables: dict, path: str) -> object:
    """The value at a `name.key[0]` path, or MISSING."""
    head = re.match(r"[A-Za-z_][A-Za-z0-9_]*", path)
    if head is None or head.group(0) not in variables:
        return MISSING
    value = variables[head.group(0)]
    for attribute, index in STEP.findall(path[head.end() :]):
        key: object = attribute or index.strip("'\"")
        if isinstance(value, list) and isinstance(key, str) and key.isdigit():
            key = int(key)
        found = (isinstance(value, dict) and key in value) or (
            isinstance(value, list) and isinstance(key, int) and key < len(value)
        )
        if not found:
            return MISSING
        value = value[key]
    return value


def render(template: str, variables: dict) -> Rendered:
    """The template with its variables filled in (a value that is not text as JSON); variables it does not
    know render empty, as Nunjucks renders them; other expressions and `{% %}` tags are left as written
    and named."""
    out = Rendered("")
    template = COMMENT.sub("", template)
    for tag in TAG.findall(template):
        out.unrendered.append(" ".join(tag.split()))

    def replace(match: re.Match) -> str:
        expression = match.group(1).strip()
        if SUITE_VAR.match(expression):
            return match.group(0)
        name, *filters = [part.strip() for part in _split_filters(expression)]
        if not PATH.match(name):
            out.unrendered.append(match.group(0))
            return match.group(0)
        value = lookup(variables, name)
        if value is MISSING:
            default = next((f for f in filters if f.startswith(("default(", "d("))), None)
            if default is not None:
                return _literal(default[default.index("(") + 1 : -1])
            out.unknown.append(name)
            return ""
        for item in filters:
            call = re.match(r"^(\w+)\s*(?:\((.*)\))?$", item, re.DOTALL)
            if call and call.group(1) in SIMPLE_FILTERS and call.group(2) is None:
                value = SIMPLE_FILTERS[call.group(1)](value)
            elif call and call.group(1) in ("default", "d"):
                continue
            elif call and call.group(1) == "join" and isinstance(value, list):
                value = _literal(call.group(2) or '""').join(_text(v) for v in value)
            else:
                out.unrendered.append(match.group(0))
                return match.group(0)
        return _text(value)

    out.text = EXPRESSION.sub(replace, template)
    return out


def only_variable(template: str) -> str | None:
    """The variable a template consists of alone (`{{ input }}`), or None."""
    found = EXPRESSION.fullmatch(template.strip())
    if found and PATH.match(found.group(1).strip()):
        return found.group(1).strip()
    return None


def _split_filters(expression: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", ""
    for char in expression:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    return [*parts, current]


def _literal(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value, default=str)
    return json.dumps(value, ensure_ascii=False, default=str)
