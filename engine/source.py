"""A file a user wrote, read: its text decoded, its YAML parsed within `engine.bounds`, every value located.

Reading refuses what would make a file ambiguous or unsafe before anything validates it: files over
MAX_SUITE_BYTES, bytes that are not UTF-8, characters YAML cannot hold, nesting deeper than MAX_NESTING
(counted on libyaml's events, before a tree is composed), anchors and aliases, numbers too long to convert,
duplicate keys and non-string keys. Each problem is a SuiteProblem at `line:column path`, e.g.
`12:9 evals[2].checks[1].prompt: ...`; the suite loader (engine.loader) and calibration sets share them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .bounds import MAX_NESTING, MAX_NUMBER_CHARS, bad_character, position, unstorable
from .errors import readable_errors

MAX_SUITE_BYTES = 1_000_000
# libyaml's loader is much faster than the pure-Python one and reports the same marks.
_CLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Path = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class SuiteProblem:
    line: int  # 1-based; 0 when the problem is about the file as a whole
    column: int  # 1-based
    path: str  # e.g. evals[2].checks[1].prompt; "" for the top level
    message: str
    file: str = ""  # set when the problem is in an attached file (a dataset), not the suite itself

    def __str__(self) -> str:
        if self.file:
            return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"
        where = f"{self.line}:{self.column}" if self.line else "file"
        return f"{where} {self.path or '(top level)'}: {self.message}"

    def as_dict(self) -> dict:
        return {
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
            "file": self.file,
        }


class SuiteError(Exception):
    """Every problem found, in reading order whoever found it first: the suite file top to bottom, then each
    attached file's (the editor, the API and the CLI list them as they come)."""

    def __init__(self, problems: list[SuiteProblem], filename: str = "suite.yaml"):
        self.problems = sorted(problems, key=_reading_order)
        self.filename = filename
        super().__init__(problems)

    def __str__(self) -> str:
        # Problems in attached files name their own file; the rest are in the suite file.
        return "\n".join(str(p) if p.file else f"{self.filename}:{p}" for p in self.problems)


def _reading_order(problem: SuiteProblem) -> tuple:
    return (problem.file != "", problem.file, problem.line, problem.column, problem.path)


def format_path(path: Path) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _checked(construct, kind: str):
    """A scalar constructor whose failures are YAML errors at the value: a date that does not exist raises
    ValueError from deep inside PyYAML, and a very long whole number is more than Python converts."""

    def checked(constructor, node: yaml.ScalarNode):
        if kind == "number" and len(node.value) > MAX_NUMBER_CHARS:
            message = (
                f"a number of {len(node.value)} characters is too long (at most {MAX_NUMBER_CHARS}); "
                "quote it to make it text"
            )
            raise yaml.constructor.ConstructorError(None, None, message, node.start_mark)
        try:
            return construct(constructor, node)
        except (ValueError, OverflowError) as exc:
            message = f"`{node.value}` is not a valid {kind} ({exc}); quote it to make it text"
            raise yaml.constructor.ConstructorError(None, None, message, node.start_mark) from None

    return checked


class _Constructor(yaml.SafeLoader):
    """Builds the scalars of a composed tree (see TreeBuilder)."""


class BoundedLoader(_CLoader):
    """`yaml.load` for text a user wrote, after scan_yaml: libyaml's speed, with scalar errors located."""


for _loader in (_Constructor, BoundedLoader):
    for _tag, _method, _kind in (
        ("int", yaml.constructor.SafeConstructor.construct_yaml_int, "number"),
        ("float", yaml.constructor.SafeConstructor.construct_yaml_float, "decimal number"),
        ("timestamp", yaml.constructor.SafeConstructor.construct_yaml_timestamp, "date"),
    ):
        _loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _checked(_method, _kind))


def load_yaml(text: str, *, anchors: bool = True) -> object:
    """Plain data from YAML a user wrote, within scan_yaml's limits: SuiteError for what they refuse, yaml's
    own (located) errors for text that is not YAML."""
    problems = scan_yaml(text, anchors=anchors)
    if problems:
        raise SuiteError(problems)
    return yaml.load(text, Loader=BoundedLoader)


def load_typed_yaml(text: str) -> object:
    """Plain data from a short YAML (or JSON) value a user typed (a launch's settings, a matrix variant's, a
    `--set`): as load_yaml, with duplicate keys refused and anchors and aliases too, since a few of them
    expand into millions of values for the request body. SuiteError for what it refuses; yaml's own (located)
    errors for text that is not YAML."""
    problems = scan_yaml(text, anchors=False)
    if problems:
        raise SuiteError(problems)
    node = yaml.compose(text, Loader=_CLoader)
    if node is None:
        return None
    builder = TreeBuilder()
    data = builder.build(node)
    if builder.problems:
        raise SuiteError(builder.problems)
    return data


class TreeBuilder:
    """Turns a composed YAML node tree into plain Python data, remembering where each path starts."""

    def __init__(self) -> None:
        self.positions: dict[Path, tuple[int, int]] = {}
        self.key_positions: dict[Path, tuple[int, int]] = {}
        # Keys that are text cut off by a comma in a flow mapping: `{criteria: Date, time and size}`.
        self.flow_split: set[Path] = set()
        self.problems: list[SuiteProblem] = []
        self._constructor = _Constructor("")

    def build(self, node: yaml.Node, path: Path = ()):
        self.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            result: dict = {}
            for key_node, value_node in node.value:
                where = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                if key_node.tag == "tag:yaml.org,2002:merge":
                    self._problem(where, path, "merge keys (<<) are not supported; write the keys out")
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    self._problem(where, path, "keys must be plain strings")
                    continue
                key = key_node.value
                if key in result:
                    self._problem(where, (*path, key), f"duplicate key `{key}`")
                    continue
                self.key_positions[(*path, key)] = where
                if node.flow_style and " " in key and _is_empty(value_node):
                    self.flow_split.add((*path, key))
                result[key] = self.build(value_node, (*path, key))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
        try:
            value = self._constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._problem(self.positions[path], path, exc.problem or str(exc))
            return None
        if isinstance(value, str) and (problem := unstorable(value)):
            self._problem(self.positions[path], path, problem)
        return value

    def _problem(self, where: tuple[int, int], path: Path, message: str) -> None:
        self.problems.append(SuiteProblem(where[0], where[1], format_path(path), message))


def _is_empty(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null" and node.value == ""


def decode_source(data: bytes | str) -> str:
    """The text of a suite file, or SuiteError if it is over MAX_SUITE_BYTES or not UTF-8 (naming the bad byte)."""
    return _decode(data)


def _decode(data: bytes | str) -> str:
    if isinstance(data, str):
        if len(data.encode("utf-8", "surrogatepass")) > MAX_SUITE_BYTES:
            raise SuiteError([_too_big()])
        return data
    if len(data) > MAX_SUITE_BYTES:
        raise SuiteError([_too_big()])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise SuiteError(
            [SuiteProblem(line, column, "", f"not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}")]
        ) from None


def _too_big() -> SuiteProblem:
    return SuiteProblem(0, 0, "", f"file is larger than {MAX_SUITE_BYTES // 1_000_000} MB")


def scan_yaml(text: str, *, anchors: bool = False) -> list[SuiteProblem]:
    """Problems found before a tree is composed: a character YAML cannot hold, nesting deeper than
    MAX_NESTING (at the collection that goes too deep, with its path), and, unless `anchors`, anchors and
    aliases. One pass over libyaml's events; stops at the first of the first two. Invalid YAML raises
    yaml's own error."""
    bad = bad_character(text)
    if bad is not None:
        line, column, message = bad
        return [SuiteProblem(line, column, "", message)]
    problems = []
    # Per open collection: [the index of its current item or the key of its current value, is a mapping,
    # is reading a key].
    frames: list[list] = []
    # Where the last event ended: libyaml may refuse deep flow nesting before it reaches our bound.
    read_to = 0
    try:
        for event in yaml.parse(text, Loader=_CLoader):
            read_to = event.end_mark.index
            if _scan_event(event, frames, problems, anchors):
                break
    except yaml.MarkedYAMLError as exc:
        unquoted = _unquoted_colon(text, exc, frames)
        if unquoted is not None:
            return [unquoted]
        # libyaml refuses deeply nested flow collections while scanning ahead, before their events reach the
        # bound above: locate the collection that goes past our bound ourselves.
        offset = _flow_too_deep(text, read_to, len(frames)) if "nesting depth" in str(exc.problem) else None
        if offset is None:
            raise
        path = format_path(tuple(frame[0] for frame in frames))
        problems.append(SuiteProblem(*position(text, offset), path, _DEEP))
    return problems


_DEEP = f"nested more than {MAX_NESTING} levels deep (lists and mappings inside each other)"
# A block mapping's `key: value` line whose plain value holds ": " itself (`prompt: Hint: it is…`).
_KEY_VALUE = re.compile(
    r"^(?P<indent>[ \t]*(?:-[ \t]+)*)(?P<key>[^\s#'\"][^:#]*?):[ \t]+(?P<value>\S.*?)[ \t]*$"
)
_EXAMPLE_CHARS = 40  # of the value, in the quoted example the message gives


def _unquoted_colon(text: str, exc: yaml.MarkedYAMLError, frames: list[list]) -> SuiteProblem | None:
    """PyYAML's "mapping values are not allowed here" for a plain value containing ": ", said with its fix
    and located at the value, with the key's path; None for any other error."""
    mark = exc.problem_mark
    if mark is None or "mapping values are not allowed" not in str(exc.problem):
        return None
    lines = text.split("\n")
    found = _KEY_VALUE.match(lines[mark.line]) if mark.line < len(lines) else None
    if found is None or ": " not in found.group("value") + " ":
        return None
    key, value = found.group("key").strip(), found.group("value")
    # A long value is shortened at a word, as an example need not be whole.
    shown = value if len(value) <= _EXAMPLE_CHARS else value[: _EXAMPLE_CHARS + 1].rsplit(" ", 1)[0] + "…"
    shown = shown.replace("\\", "\\\\").replace('"', '\\"')
    path = format_path(tuple(frame[0] for frame in frames))
    message = f'a value containing ": " must be quoted, e.g. {key}: "{shown}"'
    return SuiteProblem(mark.line + 1, found.start("value") + 1, path, message)


_FLOW = re.compile(r"[\[\]{}\"'#\\]")


def _flow_too_deep(text: str, start: int, depth: int) -> int | None:
    """The offset of the bracket, from `start` on, that nests flow collections past MAX_NESTING given `depth`
    open collections before it; None if none does. Quoted text and comments are skipped."""
    quote, escaped = None, False
    for found in _FLOW.finditer(text, start):
        char = found.group()
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#" and (found.start() == 0 or text[found.start() - 1] in " \t\n"):
            end = text.find("\n", found.start())
            if end < 0:
                return None
            return _flow_too_deep(text, end, depth)
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return found.start()
        elif char in "]}":
            depth -= 1
    return None


def _scan_event(event, frames: list[list], problems: list[SuiteProblem], anchors: bool) -> bool:
    """One event of scan_yaml's pass; True when the pass must stop."""
    mark = event.start_mark
    where = (mark.line + 1, mark.column + 1)
    if not anchors and isinstance(event, yaml.AliasEvent):
        problems.append(SuiteProblem(*where, "", f"alias *{event.anchor} is not allowed"))
    elif not anchors and getattr(event, "anchor", None):
        problems.append(SuiteProblem(*where, "", f"anchor &{event.anchor} is not allowed"))
    if isinstance(event, yaml.NodeEvent) and frames and frames[-1][2]:
        frames[-1][0] = getattr(event, "value", "?")  # a key; a list or mapping as a key is refused later
    if isinstance(event, yaml.CollectionStartEvent):
        if len(frames) >= MAX_NESTING:
            path = format_path(tuple(frame[0] for frame in frames))
            problems.append(SuiteProblem(*where, path, _DEEP))
            return True
        mapping = isinstance(event, yaml.MappingStartEvent)
        frames.append(["?" if mapping else 0, mapping, mapping])
    elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
        _node_read(frames)
    elif isinstance(event, yaml.CollectionEndEvent):
        frames.pop()
        _node_read(frames)
    return False


def _node_read(frames: list[list]) -> None:
    """A node ended: a mapping goes from its key to the value, or from the value to the next key; a list
    moves on to its next item."""
    if frames:
        frame = frames[-1]
        if frame[1]:
            frame[2] = not frame[2]
        else:
            frame[0] += 1


class _NotQuick(Exception):
    """The quick read met something that only the full read (scan_yaml, TreeBuilder) reports, and locates."""


# A character that may begin an anchor (&name) or an alias (*name). The quick read leaves any file that has
# one to the full read, which refuses them at their place; text such as `'*done*'` or `a * b` is no such token.
_MAYBE_ANCHOR = re.compile(r"(?:^|(?<=[\s\[{,]))[&*][^\s\[\]{},]")
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _QuickBuilder:
    """TreeBuilder's data without its positions: what a valid file costs. It gives up (_NotQuick) at anything
    TreeBuilder or scan_yaml would report, so a problem is always said by the full read, with its place."""

    def __init__(self) -> None:
        self._constructor = _Constructor("")

    def build(self, node: yaml.Node, depth: int = 0):
        kind = type(node)
        if kind is yaml.ScalarNode:
            if node.tag == _STR_TAG:
                value = node.value
                # Only a double-quoted scalar has escapes, the one way to write what cannot be stored.
                if node.style == '"' and unstorable(value):
                    raise _NotQuick
                return value
            try:
                value = self._constructor.construct_object(node, deep=True)
            except yaml.YAMLError:
                raise _NotQuick from None
            if isinstance(value, str) and unstorable(value):
                raise _NotQuick
            return value
        if depth >= MAX_NESTING:
            raise _NotQuick
        if kind is yaml.SequenceNode:
            return [self.build(item, depth + 1) for item in node.value]
        result: dict = {}
        for key_node, value_node in node.value:
            if (
                type(key_node) is not yaml.ScalarNode
                or key_node.tag == _MERGE_TAG
                or key_node.value in result
            ):
                raise _NotQuick
            result[key_node.value] = self.build(value_node, depth + 1)
        return result


def _quick_parse(text: str) -> dict | None:
    """The file's mapping when it is well-formed, read at libyaml's speed with no positions; None otherwise,
    and then the full read says what is wrong."""
    if bad_character(text) is not None or _MAYBE_ANCHOR.search(text):
        return None
    try:
        node = yaml.compose(text, Loader=_CLoader)
        if node is None:
            return None
        data = _QuickBuilder().build(node)
    except (yaml.YAMLError, _NotQuick, RecursionError):
        return None
    return data if isinstance(data, dict) else None


class LocatedLater(TreeBuilder):
    """A TreeBuilder's positions, found when first asked: a valid file is read without them, and only a
    problem to locate (rare, and then worth the time) reads it again with them."""

    def __init__(self, text: str) -> None:  # no super().__init__(): its fields are the properties below
        self._text = text
        self._built: TreeBuilder | None = None

    def _builder(self) -> TreeBuilder:
        if self._built is None:
            self._built = TreeBuilder()
            self._built.build(yaml.compose(self._text, Loader=_CLoader))
        return self._built

    @property
    def positions(self) -> dict[Path, tuple[int, int]]:
        return self._builder().positions

    @property
    def key_positions(self) -> dict[Path, tuple[int, int]]:
        return self._builder().key_positions

    @property
    def flow_split(self) -> set[Path]:
        return self._builder().flow_split

    @property
    def problems(self) -> list[SuiteProblem]:
        return []  # the quick read succeeds only where the full read finds none


def parse_yaml(data: bytes | str) -> tuple[object, TreeBuilder]:
    """A file's mapping and where each of its values is written; SuiteError for anything else.

    A well-formed file is read once at libyaml's speed and its positions only when a problem asks for them."""
    text = _decode(data)
    quick = _quick_parse(text)
    if quick is not None:
        return quick, LocatedLater(text)
    try:
        problems = scan_yaml(text)
        if problems:
            raise SuiteError(problems)
        node = yaml.compose(text, Loader=_CLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        message = " ".join(part for part in (exc.context, exc.problem) if part) or str(exc)
        raise SuiteError([SuiteProblem(line, column, "", f"invalid YAML: {message}")]) from None
    except yaml.YAMLError as exc:
        raise SuiteError([SuiteProblem(0, 0, "", f"invalid YAML: {exc}")]) from None
    builder = TreeBuilder()
    if node is None:
        raise SuiteError([SuiteProblem(1, 1, "", "the file is empty")])
    try:
        data_obj = builder.build(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise SuiteError([SuiteProblem(line, column, "", f"invalid YAML value: {exc}")]) from None
    if builder.problems:
        raise SuiteError(builder.problems)
    if not isinstance(data_obj, dict):
        raise SuiteError([SuiteProblem(1, 1, "", "a suite is a mapping with `name` and `evals`")])
    return data_obj, builder


def where_written(loc: Path, builder: TreeBuilder, *, key: bool) -> tuple[int, int]:
    """Where `loc` (or its key) is written, else its nearest written parent."""
    if key and loc in builder.key_positions:
        return builder.key_positions[loc]
    probe = loc
    while probe:
        if probe in builder.positions:
            return builder.positions[probe]
        probe = probe[:-1]
    return builder.positions.get((), (1, 1))


def validated(model: type[M], raw: dict, builder: TreeBuilder, filename: str) -> M:
    """`model` validated from a file's data, or SuiteError with each of pydantic's errors where it is written."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = [
            SuiteProblem(
                *where_written(error.loc, builder, key=error.at_key), format_path(error.loc), error.message
            )
            for error in readable_errors(exc, model, raw, frozenset(builder.flow_split))
        ]
        raise SuiteError(problems, filename) from None
