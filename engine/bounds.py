"""Limits on what a user's file may hold, checked while it is read, before anything walks the result.

Parsers and validators recurse on nesting: libyaml's composer in C (deep enough nesting overflows the C
stack and kills the process), `json.loads`, pydantic and our own walks in Python (RecursionError). So
nesting is counted in a flat pass over the text or the parser's events first, and a file nested deeper
than MAX_NESTING is refused at the place where it goes too deep. A suite at its deepest (a follow-up at
the deepest level, inside `or`, inside a stop condition's `not`) stays well under it.
"""

from __future__ import annotations

import json
import re

from .patterns import _env_number as env_number  # one reading of numeric settings for the engine

MAX_NESTING = 100  # lists and mappings inside each other
MAX_NUMBER_CHARS = 100  # a whole number as written, well within what Python converts
# Conversations one run may play: evals (dataset rows included) times their iterations. The default keeps a
# launch quick and its memory small (bench/launch.py measures both).
MAX_CONVERSATIONS_PER_RUN: int = int(env_number("EVALSITE_MAX_CONVERSATIONS_PER_RUN", 100_000, int))

# What YAML's reader accepts (libyaml refuses anything else with "control characters are not allowed"),
# which also leaves out lone surrogates: a str can hold them, but no UTF-8 file can.
_NOT_YAML_TEXT = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_STRUCTURE = re.compile(r'[\[\]{}"\\]')


def bad_character(text: str) -> tuple[int, int, str] | None:
    """The first character a YAML file cannot hold, as (line, column, message); None when there is none."""
    found = _NOT_YAML_TEXT.search(text)
    if found is None:
        return None
    line, column = position(text, found.start())
    return line, column, character_message(found.group())


def character_message(char: str) -> str:
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return f"U+{code:04X} is half of a UTF-16 surrogate pair, not a character"
    if code in (0xFFFE, 0xFFFF):
        return f"U+{code:04X} is not a character"
    if code == 0:
        return "control character U+0000 (NUL) is not allowed; remove it"  # no database stores it, escaped or not
    return f"control character U+{code:04X} is not allowed; remove it, or write it as an escape in quotes"


def unstorable(value: object) -> str | None:
    """Why a string in `value` (a string, or lists and mappings of them) cannot be stored, or None:
    PostgreSQL refuses NUL, UTF-8 half a surrogate pair. Escapes spell them in text that is itself clean:
    `"\\0"` in YAML, `"\\u0000"` or `"\\ud800"` in JSON."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            if "\x00" in item:
                return "holds the character U+0000 (NUL), which cannot be stored; remove it"
            if found := _SURROGATE.search(item):
                return character_message(found.group())
    return None


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def json_too_deep(text: str) -> int | None:
    """The offset of the bracket that nests a JSON text deeper than MAX_NESTING, or None.

    A flat scan (strings skipped), so that `json.loads` is only ever given text it can parse without
    running out of stack."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return None  # the common case, answered without a loop
    depth = 0
    in_string = escaped = False
    for found in _JSON_STRUCTURE.finditer(text):
        char = found.group()
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = found.end() < len(text) and text[found.end()] in '"\\'
                # Only `\"` and `\\` can hide a character this scan stops at; others are skipped as text.
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return found.start()
        elif char in "]}":
            depth -= 1
    return None


def loads_json(text: str) -> object:
    """`json.loads`, refusing nesting deeper than MAX_NESTING and numbers too long to convert; every
    refusal is a ValueError whose message names the column."""
    offset = json_too_deep(text)
    if offset is not None:
        _, column = position(text, offset)
        raise ValueError(f"nested more than {MAX_NESTING} levels deep at column {column}")
    return json.loads(text, parse_int=_parse_int)


def _parse_int(digits: str) -> int:
    if len(digits) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(digits)} digits is too long (at most {MAX_NUMBER_CHARS})")
    return int(digits)
