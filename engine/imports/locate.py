"""Where a loss came from: a report line that starts with a key path (`tests[2].assert[1]: …`), after the
name of the file it is in when that is not the suite file (`dataset.jsonl line 4: …`), resolved to a line of
that file by composing its YAML (or reading its TOML tables), so the person fixing it can go straight there.

A line that names no key is still listed, at its file; a loss is never dropped for want of a place.
Plain Python: no Django here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import yaml

from .common import Loss, basename, repair_plain_colons

_KEY = re.compile(r"(?P<key>(?:[A-Za-z_$][\w$-]*|\[\d+\])(?:\[\d+\]|\.[\w$-]+)*)(?=:|\s|\(|$)")
_PART = re.compile(r"\[(\d+)\]|\.?([\w$-]+)")
_ROW = re.compile(r"(?:line|row) (?P<number>\d+)\b")
_PLACES = re.compile(r"\(([^()]*)\)\s*$")


def locate(line: str, main: str, files: Mapping[str, str]) -> Loss:
    """The loss `line`, in the suite file `main` or the file it names first, among `files` (name -> text)."""
    name, rest = _named_file(line, main, files)
    text = files.get(name, "")
    row = _ROW.match(rest)
    if row:
        rest = rest[row.end() :].lstrip(" :")
        return Loss(name, int(row["number"]), "", rest)
    found = _KEY.match(rest)
    if found:
        key = found["key"]
        number = line_of(name, text, _parts(key))
        if number:
            return Loss(name, number, key, rest[found.end() :].lstrip(" :") or rest)
    # Repeats reported once end with where they occur: `message (tests[0], tests[3])` or the cases' ids.
    places = _PLACES.search(rest)
    if places:
        for place in (p.strip() for p in places[1].split(",")):
            number = line_of(name, text, _parts(place)) if _KEY.fullmatch(place) else 0
            number = number or _line_of_id(name, text, place)
            if number:
                return Loss(name, number, place, rest)
    return Loss(name, 0, "", rest)


def _named_file(line: str, main: str, files: Mapping[str, str]) -> tuple[str, str]:
    """The file a line names at its start (the longest name that fits), else the suite file."""
    for name in sorted(files, key=len, reverse=True):
        for shown in dict.fromkeys((name, basename(name))):
            if line.startswith(shown) and line[len(shown) : len(shown) + 1] in (":", " ", "", "["):
                return name, line[len(shown) :].lstrip(" :")  # `tests.yaml[2].assert[0]`: a list file
    return main, line


def _parts(key: str) -> list[str | int]:
    return [int(index) if index else name for index, name in _PART.findall(key)]


def line_of(name: str, text: str, parts: list[str | int]) -> int:
    """The line (from 1) of the key path `parts` in a YAML, JSON or TOML file's text; 0 when its first part
    is not there. A path found only in part gives the line of the deepest part found."""
    if not parts or not text:
        return 0
    if name.lower().endswith(".toml"):
        return _toml_line(text, parts)
    node = _compose(text)
    line = 0
    for part in parts:
        if isinstance(part, int) and isinstance(node, yaml.SequenceNode) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        elif isinstance(part, str) and isinstance(node, yaml.MappingNode):
            pair = next((pair for pair in node.value if _scalar(pair[0]) == part), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        else:
            break
    return line


def _line_of_id(name: str, text: str, wanted: str) -> int:
    """The line of the item whose `id` (or `name`) is `wanted`, in any top-level list: the cases' labels."""
    if name.lower().endswith(".toml"):
        return 0
    root = _compose(text)
    if not isinstance(root, yaml.MappingNode):
        return 0
    for _key, value in root.value:
        if not isinstance(value, yaml.SequenceNode):
            continue
        for item in value.value:
            if isinstance(item, yaml.MappingNode) and any(
                _scalar(key) in ("id", "name") and _scalar(val) == wanted for key, val in item.value
            ):
                return item.start_mark.line + 1
    return 0


def _scalar(node: yaml.Node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


@functools.lru_cache(maxsize=4)  # a suite's losses are located one by one in the same few files
def _compose(text: str) -> yaml.Node | None:
    """The YAML node tree (line numbers only; nothing is constructed), after the importers' own repair."""
    for attempt in (text, repair_plain_colons(text)[0]):
        try:
            return yaml.compose(attempt, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError):  # a file nested past Python's stack: no line, still listed
            continue
    return None


_HEADER = re.compile(r"^\s*(?P<open>\[\[?)\s*(?P<path>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _toml_parts(path: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', path)]


def _toml_line(text: str, parts: list[str | int]) -> int:
    """TOML has no node tree with lines in the standard library: its table headers (`[samples.id]`,
    `[[samples]]`, counted) and `key =` lines are read instead."""
    lines = text.split("\n")
    tables: list[tuple[list[str | int], int]] = [([], 0)]  # each table's path, and its header's index
    counts: dict[tuple, int] = {}
    for index, raw in enumerate(lines):
        found = _HEADER.match(raw)
        if not found:
            continue
        path: list[str | int] = list(_toml_parts(found["path"]))
        if found["open"] == "[[":
            number = counts.get(tuple(path), 0)
            counts[tuple(path)] = number + 1
            path.append(number)
        tables.append((path, index))
    best, start, end = 0, -1, len(lines)
    matched: list[str | int] = []
    for position, (path, index) in enumerate(tables):
        if path and parts[: len(path)] == path and len(path) > len(matched):
            matched, best, start = path, index + 1, index
            end = tables[position + 1][1] if position + 1 < len(tables) else len(lines)
    if start < 0:
        start, end = -1, tables[1][1] if len(tables) > 1 else len(lines)
    if len(parts) > len(matched) and isinstance(parts[len(matched)], str):
        key = re.compile(rf"^\s*[\"']?{re.escape(str(parts[len(matched)]))}[\"']?\s*[=.]")
        for index in range(start + 1, end):
            if key.match(lines[index]):
                return index + 1
    return best
