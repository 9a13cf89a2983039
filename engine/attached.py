"""The rules every attached file obeys, wherever it comes from: the editor's Files panel, a new suite's form,
Import, `POST /api/runs` and the CLI (which reads them from the suite's folder). One set of rules, so a file
one way in accepts is never one another refuses, and no stored name can break a page's address.

A file on disk is measured (os.stat) before it is read, and never read past the limit: a huge rubric is
refused at once, not after it has filled the memory.
"""

from __future__ import annotations

import os
import pathlib
import posixpath
import re
from collections.abc import Mapping
from os import PathLike

from .datasets import MAX_DATASET_BYTES
from .loader import file_references
from .source import SuiteError, SuiteProblem

MAX_FILE_BYTES = MAX_DATASET_BYTES
MAX_TOTAL_BYTES = 50_000_000
MAX_FILES = 100
# No folders, no leading dot (so neither `..` nor a hidden file), nothing a URL path segment must escape.
FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}$")
NAME_RULE = "a file name is letters, digits, '.', '_' and '-' (no folders), at most 200 characters"


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB"


def _problem(name: str, message: str) -> SuiteProblem:
    return SuiteProblem(0, 0, "", message, name)


def file_problems(name: str, size: int) -> list[SuiteProblem]:
    """What is wrong with a file of this name and size in bytes; empty when nothing is."""
    problems = []
    if not FILE_NAME.match(name):
        problems.append(_problem(name, NAME_RULE))
    if size > MAX_FILE_BYTES:
        problems.append(_problem(name, f"larger than {MAX_FILE_BYTES // 1_000_000} MB"))
    return problems


def set_problems(sizes: Mapping[str, int]) -> list[SuiteProblem]:
    """Every file's problems (name -> size in bytes), then the set's: how many files, and their total."""
    problems = [problem for name, size in sizes.items() for problem in file_problems(name, size)]
    if len(sizes) > MAX_FILES:
        problems.append(_problem("", f"{len(sizes)} attached files; a suite has at most {MAX_FILES}"))
    # A file over its own limit counts as at its limit: it is refused by name already, and should not also
    # be said to make the set too large.
    total = sum(min(size, MAX_FILE_BYTES + 1) for size in sizes.values())
    if total > MAX_TOTAL_BYTES:
        problems.append(_problem("", f"attached files exceed {MAX_TOTAL_BYTES // 1_000_000} MB in all"))
    return problems


def check_files(files: Mapping[str, str]) -> None:
    """Raise SuiteError naming every file whose name or size breaks the rules, and a set too large."""
    problems = set_problems(
        {name: len(text.encode("utf-8", "surrogatepass")) for name, text in files.items()}
    )
    if problems:
        raise SuiteError(problems)


def decode_file(name: str, data: bytes) -> str:
    """The text of an uploaded file; SuiteError if its name, size or encoding is not acceptable. `data` may be
    cut one byte past the limit: that byte is enough to refuse it."""
    if problems := file_problems(name, len(data)):
        raise SuiteError(problems)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SuiteError(
            [_problem(name, f"not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line}")]
        ) from None


def read_limited(path: PathLike | str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a file: one past the limit says it is over, whatever os.stat said (a
    file that grows, or one in /proc that reports no size)."""
    with open(path, "rb") as handle:
        return handle.read(limit + 1)


def read_suite_files(
    path: PathLike | str, data: bytes | str, names: list[str] | None = None
) -> dict[str, str]:
    """Attached files for a suite on disk: the files it names, read from the suite file's folder.

    Each name and size is checked, by os.stat, before anything is read; SuiteError lists every file refused.
    A name that is not in the folder (or leads out of it) is left out: the suite's own validation then says
    it is not attached, at the line that names it. Raises OSError for a file that exists but cannot be read.
    `names`: the files it names, when the caller has parsed it already (engine.loader.references)."""
    folder = pathlib.Path(path).parent
    sizes: dict[str, int] = {}
    problems: list[SuiteProblem] = []
    for name in file_references(data) if names is None else names:
        if not FILE_NAME.match(name):
            problems.append(_problem(name, NAME_RULE))
            continue
        candidate = folder / name
        if candidate.is_file() and candidate.resolve().parent == folder.resolve():
            sizes[name] = os.stat(candidate).st_size
    problems += set_problems(sizes)
    if problems:
        raise SuiteError(problems)
    files = {}
    for name in sizes:
        raw = read_limited(folder / name, MAX_FILE_BYTES)
        if problems := file_problems(name, len(raw)):
            raise SuiteError(problems)
        files[name] = raw.decode("utf-8-sig", errors="replace")
    return files


def safe_file_name(name: str) -> str:
    """A name the rules accept, made from any other: its last path part, each run of other characters as
    '-'. `../../etc/passwd` becomes `passwd`, `my data.csv` `my-data.csv`."""
    short = posixpath.basename(name.replace("\\", "/"))
    if FILE_NAME.match(short):
        return short
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]+", "-", short).strip("-") or "file"
    if not re.match(r"[A-Za-z0-9_]", cleaned):
        cleaned = "f" + cleaned
    return cleaned[:200]
