"""Text matching shared by checks and the mock endpoint."""

from __future__ import annotations

import re

from . import patterns
from .bounds import loads_json


def _glob_regex(pattern: str) -> str:
    # Only * and ? are special; brackets and the rest stay literal so prices like "[1]" match themselves.
    parts = ["\\A"]
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    parts.append("\\Z")
    return "".join(parts)


def glob_match(pattern: str, text: str) -> bool:
    """Whole-text glob, case-insensitive; `*` spans newlines. "*105*" means "contains 105".

    Many stars backtrack like a user regex ("*a*a*a*b" is cubic), so it runs under the same time limit.
    """
    plain = _plain_glob(pattern, text)
    if plain is not None:
        return plain
    found = patterns.search(
        _glob_regex(pattern), text, re.IGNORECASE | re.DOTALL, name=f'glob "{patterns.shown(pattern)}"'
    )
    return found is not None


def _plain_glob(pattern: str, text: str) -> bool | None:
    """The common globs ("*done*", "done*", "*done", "done") over ASCII, matched without a regex; None for
    the others. A check's glob runs on every reply, where the time-limited regex search is costly, and
    these cannot backtrack. ASCII only, where lower() folds case exactly as the regex's IGNORECASE does."""
    core = pattern.strip("*")
    if "*" in core or "?" in core or not pattern.isascii():
        return None
    text = text[: patterns.MAX_CHARS]
    if not text.isascii():
        return None
    core, text = core.lower(), text.lower()
    starts, ends = pattern.startswith("*"), pattern.endswith("*")
    if starts and ends:
        return core in text
    if starts:
        return text.endswith(core)
    if ends:
        return text.startswith(core)
    return text == core


def _json_value(text: str):
    candidates = [text.strip()]
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fenced:
        candidates.append(fenced.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return loads_json(candidate)  # bounded nesting: a hostile reply fails the check, not the run
        except ValueError:
            continue
    return None


MISSING = object()


def dig(value, path: str):
    """Follows a dot path (`a.b.0.c`) into parsed JSON; MISSING when any step is absent."""
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.lstrip("-").isdigit() and -len(value) <= int(key) < len(value):
            value = value[int(key)]
        else:
            return MISSING
    return value


def is_json_reply(text: str) -> bool:
    """The reply is (or contains) JSON, read as json_field reads it."""
    return _json_value(text) is not None


def json_field(text: str, path: str):
    """The value at `path` in a reply that is (or contains) JSON, or MISSING."""
    parsed = _json_value(text)
    return MISSING if parsed is None else dig(parsed, path)
