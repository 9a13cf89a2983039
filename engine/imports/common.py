"""What every converter shares: the problem they raise, the result they return, reading the uploaded files
(YAML with other tools' habits, sizes, file names) and writing the evalsite suite with its report.

Plain Python: no Django here.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
import textwrap
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import yaml

from engine.attached import safe_file_name as safe_file_name  # the importers' name for it
from engine.bounds import MAX_NESTING
from engine.datasets import MAX_DATASET_BYTES
from engine.redact import redact
from engine.source import MAX_SUITE_BYTES, SuiteError, load_yaml

KINDS = {
    "vibecheck": "vibecheck",
    "letta": "Letta Evals",
    "agentv": "AgentV",
    "calibrate": "calibrate (Bolt Foundry)",
    "promptfoo": "promptfoo",
    "agtlantis": "agtlantis",
}
YAML_SUFFIXES = (".yaml", ".yml")


def attach(attached: dict[str, str], name: str, text: str) -> str:
    """`text` attached as `name`, or, when another text holds that name (`a/notes.md` and `b/notes.md`
    both become `notes.md`), as a free one (`notes-2.md`, a Python module `grade_2.py`): the name it has,
    for the suite to refer to it by."""
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    joint = "_" if suffix == "py" else "-"
    candidate, number = name, 2
    while attached.get(candidate, text) != text:
        candidate, number = f"{stem[:190]}{joint}{number}{dot}{suffix}", number + 1
    attached[candidate] = text
    return candidate


def attach_reference(
    files: Mapping[str, str], attached: dict[str, str], report: Report, reference: str, where: str
) -> str:
    """The attached name of a file a suite refers to: attached when it was uploaded, else asked for."""
    name = safe_file_name(reference)
    found = find_file(files, reference)
    if found is None:
        report.need(name)
        report.group(f"file {reference} → attached file {name}: not uploaded — attach it", where)
        return name
    name = attach(attached, name, found[1])
    report.group(f"file {reference} → attached file {name}", where, mapped=True)
    return name


def a(tool: str) -> str:
    """The tool's name after its article: "an AgentV", "a vibecheck"."""
    return f"{'an' if tool[:1].lower() in 'aeiou' else 'a'} {tool}"


MAX_HEADER_LINES = 40  # unmapped items repeated as comments at the top of the suite
MAX_NODES = 2_000_000  # values in a parsed file, counting each alias expansion (YAML "billion laughs")


class ImportProblem(Exception):
    """The upload cannot be converted; the message says why and what to do."""


@dataclass
class Loss:
    """A loss line located in the files it came from: `file:line key: message`. `line` is 0 when the key
    could not be found there, `key` empty when the line named none."""

    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


@dataclass
class ImportResult:
    source: str  # the evalsite suite YAML
    files: dict[str, str] = field(default_factory=dict)  # attached files to create with it
    mapped: list[str] = field(default_factory=list)  # "metadata.name → name", ...
    unmapped: list[str] = field(default_factory=list)  # what was not converted, and why
    needs_files: list[str] = field(default_factory=list)  # referenced, but not uploaded
    kind: str = ""  # a key of KINDS
    lost: list[str] = field(default_factory=list)  # the unmapped lines that graded or drove a conversation
    origin: str = ""  # the suite file's path among the files given (`evals/review.eval.yaml`)
    losses: list[Loss] = field(default_factory=list)  # `lost`, each located at a file, line and key

    @property
    def tool(self) -> str:
        return KINDS.get(self.kind, self.kind)

    @property
    def complete(self) -> bool:
        return not self.needs_files


# --- reading the uploaded files ----------------------------------------------------------------------


def basename(name: str) -> str:
    return posixpath.basename(name.replace("\\", "/"))


def is_yaml_name(name: str) -> bool:
    return name.lower().endswith(YAML_SUFFIXES)


_PLAIN_COLON = re.compile(
    r"^(?P<lead>\s*(?:-\s+)?)(?P<key>[A-Za-z_][A-Za-z0-9_]*):[ \t]+(?P<value>[^\s\"'|>&*!%@`{\[#].*?)\s*$"
)


_BLOCK_START = re.compile(r":[ \t]+[|>][-+0-9]*[ \t]*(#.*)?$")


def repair_plain_colons(text: str) -> tuple[str, list[str]]:
    """Quote plain values that contain `: ` — vibecheck's own examples have `prompt: Hint: 15 * 7 = ...`,
    which no YAML parser accepts. Returns the text and a report line per repair."""
    lines = text.split("\n")
    repairs = []
    block_indent: int | None = None  # inside a literal/folded block scalar opened at this indentation
    for number, line in enumerate(lines):
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None:
            if not line.strip() or indent > block_indent:
                continue
            block_indent = None
        if _BLOCK_START.search(line):
            block_indent = indent
            continue
        found = _PLAIN_COLON.match(line)
        if not found:
            continue
        value = found.group("value")
        if ": " not in value or " #" in value:
            continue
        lines[number] = f"{found.group('lead')}{found.group('key')}: {json.dumps(value, ensure_ascii=False)}"
        repairs.append(
            f"line {number + 1}: quoted the value of `{found.group('key')}` "
            "(it contains “: ”, which YAML does not allow in a plain value)"
        )
    return "\n".join(lines), repairs


def parse_yaml(name: str, text: str) -> object:
    """Parsed YAML; ImportProblem (with line and column) when it is not YAML."""
    limit = MAX_SUITE_BYTES
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise ImportProblem(f"{name} is larger than {limit // 1_000_000} MB")
    try:
        # The suite loader's limits (nesting, characters, numbers), with anchors: other tools allow them.
        data = load_yaml(text, anchors=True)
    except SuiteError as exc:
        problem = exc.problems[0]
        where = f" (line {problem.line}, column {problem.column})" if problem.line else ""
        raise ImportProblem(f"{name}{where}: {problem.message}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        message = " ".join(part for part in (exc.context, exc.problem) if part) or str(exc)
        raise ImportProblem(f"{name} is not valid YAML{where}: {message}") from None
    except yaml.YAMLError as exc:
        raise ImportProblem(f"{name} is not valid YAML: {exc}") from None
    check_size(name, data)
    return data


def check_size(name: str, data: object) -> None:
    """Refuse data that is too large or too deep once aliases are expanded: each alias counts again, and
    an alias inside the list it names makes it endless. A loop, not recursion, for that reason."""
    budget = MAX_NODES
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise ImportProblem(f"{name} is too large once its aliases are expanded")
        if isinstance(value, (dict, list)) and depth > MAX_NESTING:
            raise ImportProblem(
                f"{name} is nested more than {MAX_NESTING} levels deep once its aliases are expanded"
            )
        if isinstance(value, dict):
            stack += [(item, depth + 1) for pair in value.items() for item in pair]
        elif isinstance(value, list):
            stack += [(item, depth + 1) for item in value]


def find_file(files: Mapping[str, str], reference: str) -> tuple[str, str] | None:
    """An uploaded file a suite refers to, as the tools resolve it: by its path from the suite file's folder,
    then from a folder above it (AgentV searches up to the repository's root, where `/prompts/x.md` starts),
    then by its base name alone (a flat upload), the nearest first. Names in `files` are paths from the
    suite file's folder; a flat upload's are base names."""
    path = _referenced_path(reference)
    if path is None:
        return None
    names = list(files)
    for name in _from_each_folder(path, names):
        if name in files:
            return name, files[name]
    wanted = basename(path)
    for same in (
        lambda name: basename(name) == wanted,
        lambda name: basename(name).lower() == wanted.lower(),
    ):
        matching = sorted((name for name in names if same(name)), key=lambda name: (name.count("/"), name))
        if matching:
            return matching[0], files[matching[0]]
    return None


def find_folder(files: Mapping[str, str], reference: str) -> str | None:
    """A folder a suite refers to (AgentV's `tests: ./cases/`), found as `find_file` finds a file by its
    path: from the suite file's folder, then from the folders above it; its path in `files`, or None when
    no file lies in it (a flat upload has no folders)."""
    path = _referenced_path(reference)
    if path is None:
        return None
    names = list(files)
    for folder in _from_each_folder(path, names):
        if any(name.startswith(folder + "/") for name in names):
            return folder
    return None


def _referenced_path(reference: str) -> str | None:
    """A reference as a normalised path from the suite file's folder (`file://` and a leading `/` dropped);
    None when it names no file or folder."""
    path = reference.strip().replace("\\", "/").removeprefix("file://")
    path = posixpath.normpath(path.lstrip("/")) if path.strip("/") else ""
    return None if not path or path == "." else path


def _from_each_folder(path: str, names: list[str]) -> list[str]:
    """`path` from the suite file's folder, then from each folder above it that the uploads reach."""
    return ["../" * ups + path for ups in range(0, 1 + max((name.count("../") for name in names), default=0))]


# What makes a reference a glob rather than a path, as AgentV's file references read it (`*`, `?`, `{`) and
# fast-glob besides (`[`).
GLOB_MAGIC = re.compile(r"[*?[{]")


def is_glob(reference: str) -> bool:
    return bool(GLOB_MAGIC.search(reference.strip().removeprefix("file://")))


def glob_files(files: Mapping[str, str], pattern: str, leave_out: Collection[str] = ()) -> list[str]:
    """The files a glob names, as fast-glob (AgentV) and promptfoo's glob find them, from the suite file's
    folder: `*` and `?` within one folder's name, `**` any number of folders, `[abc]` one of those
    characters, `{a,b}` either text; a name that begins with `.` only where the pattern writes the dot. In
    name order, as AgentV sorts them. In a flat upload (names alone, no folders), by the pattern's last
    part."""
    path = _referenced_path(pattern)
    if path is None:
        return []
    names = [name for name in files if name not in leave_out]
    wanted = [re.compile(_glob_regex(one)) for one in _braces(path)]
    found = [name for name in names if any(regex.fullmatch(name) for regex in wanted)]
    if not found and not any("/" in name for name in names):
        last = [re.compile(_glob_regex(posixpath.basename(one))) for one in _braces(path)]
        found = [name for name in names if any(regex.fullmatch(name) for regex in last)]
    return sorted(found)


def _braces(pattern: str) -> list[str]:
    """`{a,b}` expanded: every pattern the braces stand for (nested too); braces without a comma stay."""
    depth, start = 0, 0
    for at, char in enumerate(pattern):
        if char == "{":
            start = at if depth == 0 else start
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _top_level_split(pattern[start + 1 : at])
                if len(options) > 1:
                    head, tail = pattern[:start], pattern[at + 1 :]
                    return [whole for option in options for whole in _braces(head + option + tail)]
    return [pattern]


def _top_level_split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current += char
    return [*parts, current]


def _glob_regex(pattern: str) -> str:
    """A glob without braces as a regular expression over a path's whole text."""
    segments = pattern.split("/")
    regex = ""
    for number, segment in enumerate(segments):
        last = number == len(segments) - 1
        if segment == "**":
            regex += r"(?:(?!\.)[^/]+/)*" + (r"(?!\.)[^/]+" if last else "")
            continue
        regex += _segment_regex(segment) + ("" if last else "/")
    return regex


def _segment_regex(segment: str) -> str:
    out = "" if segment.startswith(".") else r"(?!\.)"
    at = 0
    while at < len(segment):
        char = segment[at]
        closing = segment.find("]", at + 2) if char == "[" else -1
        if char == "*":
            out += "[^/]*" if not out.endswith("[^/]*") else ""
        elif char == "?":
            out += "[^/]"
        elif closing > 0:
            inside = segment[at + 1 : closing]
            negated = inside[:1] in ("!", "^")
            inside = inside[1:] if negated else inside
            out += "[" + ("^/" if negated else "") + inside.replace("\\", "\\\\").replace("[", "\\[") + "]"
            at = closing
        else:
            out += re.escape(char)
        at += 1
    return out


def dataset_too_big(name: str, text: str) -> None:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DATASET_BYTES:
        raise ImportProblem(f"{name} is larger than {MAX_DATASET_BYTES // 1_000_000} MB")


# --- the report ---------------------------------------------------------------------------------------


# A mapping's key that names a credential (compared lower-cased, without `_` and `-`): its text never reaches
# the report or the suite's comments.
_SECRET_ENDINGS = ("apikey", "token", "secret", "password")
_SECRET_NAMES = {"key", "authorization", "credential", "credentials", "accesskey", "privatekey", "secretkey"}


def _names_a_secret(key: object) -> bool:
    if not isinstance(key, str):
        return False
    name = key.lower().replace("_", "").replace("-", "")
    return name in _SECRET_NAMES or name.endswith(_SECRET_ENDINGS)


def short(value: object, limit: int = 80) -> str:
    """A value as one short line, for the report (which is also written into the suite as comments): a
    credential a tool's file holds in clear (a provider's `apiKey`, an `Authorization` header) is left out,
    and a key-shaped text is masked as everywhere else, before the line is cut to length."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(_without_secrets(value), ensure_ascii=False, default=str)
    )
    text = redact(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _without_secrets(value: object) -> object:
    if isinstance(value, dict):
        return {
            key: "[redacted]" if _names_a_secret(key) and isinstance(item, str) else _without_secrets(item)
            for key, item in value.items()
        }  # fmt: skip
    if isinstance(value, list):
        return [_without_secrets(item) for item in value]
    return value


class Report:
    """Collects the mapped / unmapped / needed lines; row-level issues are grouped, one line each."""

    def __init__(self, origin: str = "") -> None:
        # The suite file's path among the files given (`skills/csv/evals/evals.json`): a converter whose
        # format has no suite name names the suite after it, so two such files never share one.
        self.origin = origin
        self.mapped: list[str] = []
        self.unmapped: list[str] = []
        self.needs: list[str] = []
        self.lost: list[str] = []
        self._groups: dict[tuple[bool, str], list[str]] = {}
        self._lost_groups: set[str] = set()

    def map(self, line: str) -> None:
        if line not in self.mapped:
            self.mapped.append(line)

    def skip(self, line: str) -> None:
        """Something left out that neither grades nor drives the conversation (a concurrency, a target)."""
        if line not in self.unmapped:
            self.unmapped.append(line)

    def lose(self, line: str) -> None:
        """Something left out that grades or drives the conversation (a check, a grader, a user turn):
        `evalsite import` exits 1 when there is one, since the suite does not test all the original did."""
        self.skip(line)
        if line not in self.lost:
            self.lost.append(line)

    def need(self, name: str) -> None:
        if name not in self.needs:
            self.needs.append(name)

    def group(self, message: str, where: str, *, mapped: bool = False, lost: bool = False) -> None:
        """Something repeated over rows or cases: reported once, naming where it occurs. `lost` as in
        `lose`."""
        self._groups.setdefault((mapped, message), []).append(where)
        if lost and not mapped:
            self._lost_groups.add(message)

    def problems(self) -> list[str]:
        """The unmapped lines so far, grouped ones included (for an ImportProblem's message)."""
        return self.unmapped + [message for (is_mapped, message) in self._groups if not is_mapped]

    def finish(
        self, header: list[str], sections: list[Section], files: dict[str, str], kind: str
    ) -> ImportResult:
        """The result: the YAML (its header lists what was not converted, so the saved suite keeps it)."""
        mapped, unmapped, lost = list(self.mapped), list(self.unmapped), list(self.lost)
        for (is_mapped, message), places in self._groups.items():
            listed = ", ".join(places[:8]) + (f" and {len(places) - 8} more" if len(places) > 8 else "")
            (mapped if is_mapped else unmapped).append(f"{message} ({listed})")
            if message in self._lost_groups:
                lost.append(f"{message} ({listed})")
        header = list(header)
        if unmapped:
            header.append("Not converted:")
            for line in unmapped[:MAX_HEADER_LINES]:
                header.extend(textwrap.wrap(line, 100, initial_indent="- ", subsequent_indent="  "))
            if len(unmapped) > MAX_HEADER_LINES:
                header.append(f"- … and {len(unmapped) - MAX_HEADER_LINES} more (see the import report)")
        if self.needs:
            header.append(f"Files it needs that were not uploaded: {', '.join(self.needs)}")
        return ImportResult(
            source=render(header, sections),
            files=files,
            mapped=mapped,
            unmapped=unmapped,
            needs_files=self.needs,
            kind=kind,
            lost=lost,
        )


# --- writing the evalsite YAML ------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, sequences indented under their key, multi-line text as literal blocks, no anchors."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):  # noqa: ARG002
        return super().increase_indent(flow, False)

    def ignore_aliases(self, data) -> bool:  # noqa: ARG002
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str):
    if "\n" in value.strip("\n") or (value.endswith("\n") and value.strip()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


def to_yaml(value: object) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100_000)


def comment(text: str, indent: str = "") -> str:
    lines = [line.rstrip().replace("\t", " ") for line in str(text).splitlines()] or [""]
    return "".join(f"{indent}# {line}".rstrip() + "\n" for line in lines)


@dataclass
class Section:
    """One top-level key of the suite, with comment lines written above it."""

    key: str
    value: object
    comments: list[str] = field(default_factory=list)
    item_comments: list[list[str]] | None = None  # for a list value: comments above each item
    blank_before: bool = False


Converted = tuple[list[str], list[Section], dict[str, str]]  # what a converter returns: header, keys, files


def render(header: list[str], sections: list[Section]) -> str:
    """The suite YAML: a header comment, then each top-level key with its comments."""
    out = "".join(comment(line) for line in header) + ("\n" if header else "")
    for section in sections:
        if section.value is None:
            out += "\n" if out and not out.endswith("\n\n") else ""
            out += "".join(comment(line) for line in section.comments)
            continue
        out += "\n" if out and not out.endswith("\n\n") and (section.comments or section.blank_before) else ""
        out += "".join(comment(line) for line in section.comments)
        if section.item_comments is not None and isinstance(section.value, list) and section.value:
            out += f"{section.key}:\n"
            for index, item in enumerate(section.value):
                notes = section.item_comments[index] if index < len(section.item_comments) else []
                if index:
                    out += "\n"
                out += "".join(comment(line, "  ") for line in notes)
                out += "".join(f"  {line}\n" if line else "\n" for line in to_yaml([item]).splitlines())
        else:
            out += to_yaml({section.key: section.value})
    return out


def unique_id(wanted: str, taken: set[str], report: Report, where: str) -> str:
    candidate = wanted[:200]
    number = 2
    while candidate in taken:
        candidate = f"{wanted[:190]}-{number}"
        number += 1
    if candidate != wanted:
        report.map(f"{where}: id {wanted!r} → {candidate!r} (ids must be unique and at most 200 characters)")
    taken.add(candidate)
    return candidate


# --- reading values: other tools' files hold anything at any key ----------------------------------------------
#
# A converter reads each value it uses through one of these, so NaN, an infinity, a bool where a number is, or
# a list where a name is becomes a listed loss at its key instead of an exception.


def as_number(value: object) -> int | float | None:
    """A number a suite can hold, or None: a bool is not a number here, and NaN or an infinity (YAML's
    `.nan`, `.inf`, `1e400`) is not one any check or gate can compare against."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def as_count(value: object) -> int | None:
    """A whole number of at least 0 (`3.0` reads as 3), or None."""
    number = as_number(value)
    if number is None or number < 0 or number != int(number):
        return None
    return int(number)


def as_share(value: object) -> float | int | None:
    """A number from 0 to 1 (a score or a threshold), or None."""
    number = as_number(value)
    return number if number is not None and 0 <= number <= 1 else None


def as_name(value: object) -> str | None:
    """Text used to look something up (a grader, a function, a kind), or None: a list or a mapping there
    cannot name anything, and is not hashable either."""
    return value if isinstance(value, str) else None


def non_finite(value: object) -> bool:
    """Whether data copied as it is holds NaN or an infinity somewhere."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return False


def as_text(value: object) -> str | None:
    """A scalar as text (numbers and booleans as written in JSON); None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if as_number(value) is not None:
        return json.dumps(value)
    return None
