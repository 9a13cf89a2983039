"""agtlantis's TypeScript config read as text, where it is written literally: the config files among the
uploads, an agent's prompt and description, bracketed blocks, list items and string or number values."""

from __future__ import annotations

import re
from collections.abc import Iterator


def config_agent(agent: str, text: str) -> tuple[str | None, str | None] | None:
    """The (prompt.system, description) of the agent whose `config.name` is `agent` in a config written
    literally: the agent's `description` and `system` follow its name, before its `execute`. A top-level
    `agentDescription` wins, as in agtlantis."""
    named = re.search(rf"\bname\s*:\s*(['\"`]){re.escape(agent)}\1", text)
    if named is None:
        return None
    rest = text[named.end() :]
    end = re.search(r"\bexecute\b", rest)
    body = rest[: end.start()] if end else rest[:4000]
    system = string_or_number(body, "system")
    description = string_or_number(text, "agentDescription") or string_or_number(body, "description")
    system = system.strip() if isinstance(system, str) and system.strip() else None
    description = description.strip() if isinstance(description, str) and description.strip() else None
    if system is None and description is None:
        return None
    return system, description


def scripts(files: dict[str, str], main: str) -> list[tuple[str, str]]:
    """The uploaded TypeScript / JavaScript files (agent-eval.config.ts and the like), unread."""
    return [
        (file_name, dict.__getitem__(files, file_name))
        for file_name in sorted(dict.keys(files))
        if file_name != main and CONFIG_NAME.search(file_name)
    ]


CONFIG_NAME = re.compile(r"\.(config\.)?(ts|mts|cts|js|mjs|cjs)$", re.IGNORECASE)


def bracketed(text: str, found: re.Match | None) -> str | None:
    """The `{...}` or `[...]` that opens at the end of `found`, brackets and quotes balanced."""
    if found is None:
        return None
    start = found.end() - 1
    for index, char, depth in _unquoted(text, start):
        if char in "}])" and depth == 0:
            return text[start : index + 1]
    return None


def items(text: str) -> list[str]:
    """The top-level comma-separated items of a list's inside."""
    found, begin = [], 0
    for index, char, depth in _unquoted(text, 0):
        if char == "," and depth == 0:
            found.append(text[begin:index])
            begin = index + 1
    found.append(text[begin:])
    cleaned = [re.sub(r"^\s*(//[^\n]*\n\s*)*", "", item).strip() for item in found]
    return [item for item in cleaned if item]


def _unquoted(text: str, start: int) -> Iterator[tuple[int, str, int]]:
    """Each character from `start` that is outside quotes, with its index and the bracket depth after it."""
    depth, quote, index = 0, "", start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        else:
            if char in "{[(":
                depth += 1
            elif char in "}])":
                depth -= 1
            yield index, char, depth
        index += 1


def string_or_number(text: str, key: str) -> str | float | None:
    found = re.search(
        rf"\b{key}\s*:\s*(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|`((?:[^`\\]|\\.)*)`|(-?\d+(?:\.\d+)?))",
        text,
        re.DOTALL,
    )
    if found is None:
        return None
    if found.group(4) is not None:
        number = float(found.group(4))
        return int(number) if number.is_integer() else number
    value = next(group for group in found.groups()[:3] if group is not None)
    return re.sub(r"\\(.)", r"\1", value)
