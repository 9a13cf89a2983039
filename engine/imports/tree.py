"""The files of a project, as `convert_all` takes them (path -> text): read from folders on disk (the CLI)
or from a zip (the Import page), leaving out what no suite refers to — version control, installed
packages, caches, hidden files (`.env`), binaries — and bounded, so a large tree or a zip bomb is refused
before it fills memory. Files in hidden folders (`.github/prompts/`) are read for the suites that name
them, but are never taken for suites themselves.

Plain Python: no Django here.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.attached import MAX_FILE_BYTES, MAX_TOTAL_BYTES, megabytes

from .common import ImportProblem

SKIPPED_FOLDERS = frozenset(
    {
        *("node_modules", "__pycache__", "__MACOSX", "venv", "site-packages", ".git", ".hg", ".svn", ".venv"),
        *(
            ".tox",
            ".nox",
            ".cache",
            ".mypy_cache",
            ".pytest_cache",
            ".ruff_cache",
            ".next",
            ".nuxt",
            ".turbo",
        ),
    }
)
MAX_TREE_FILES = 5_000  # files read from folders on disk
MAX_HIDDEN_FILES = 500  # files in hidden folders, read only for suites that name them
MAX_TREE_BYTES = 200_000_000
MAX_ZIP_ENTRIES = 2_000  # an uploaded zip: its total is the attached files' (MAX_TOTAL_BYTES)


@dataclass
class Tree:
    files: dict[str, str] = field(default_factory=dict)  # path (with `/`) -> text
    left_out: list[str] = field(default_factory=list)  # "path: why" for files not read
    hidden: set[str] = field(
        default_factory=set
    )  # paths in hidden folders: a suite may name them, none is one


def skipped_folder(name: str) -> bool:
    """Version control, installed packages and caches (`.git`, `node_modules`, `.venv`)."""
    return name in SKIPPED_FOLDERS


def _hidden(path: str) -> bool:
    """In a hidden folder (`.github/prompts/x.md`, `.agentv/targets.yaml`): never searched for suites,
    but a suite may name the file (AgentV examples do)."""
    return any(part.startswith(".") for part in path.split("/")[:-1])


def _text(path: str, data: bytes, tree: Tree) -> None:
    """Keep `data` as text, or say why not: a binary (a NUL byte, or not UTF-8) is no suite's file. A file
    in a hidden folder is kept only as text, in silence: it is read only when a suite names it."""
    hidden = _hidden(path)
    if hidden:
        if len(tree.hidden) >= MAX_HIDDEN_FILES:
            return
        tree.hidden.add(path)
    if b"\0" in data[:8192]:
        tree.hidden.discard(path)
        if not hidden:
            tree.left_out.append(f"{path}: binary, not read")
        return
    try:
        tree.files[path] = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        tree.hidden.discard(path)
        if not hidden:
            tree.left_out.append(f"{path}: not UTF-8 text, not read")


def _too_large(path: str, tree: Tree) -> None:
    if not _hidden(path):
        tree.left_out.append(f"{path}: larger than {megabytes(MAX_FILE_BYTES)}, not read")


def read_paths(paths: list[Path]) -> Tree:
    """Files and folders (walked, without following links to folders), as paths from their common folder.
    A file given by name is always read, even hidden; ImportProblem when one cannot be."""
    if not paths:
        raise ImportProblem("no files or folders given")
    for path in paths:
        if not path.exists():
            raise ImportProblem(f"{path}: no such file or folder")
    resolved = [path.resolve() for path in paths]
    root = Path(os.path.commonpath([path if path.is_dir() else path.parent for path in resolved]))
    tree = Tree()
    total = 0

    def read(path: Path, given: bool) -> None:
        nonlocal total
        name = path.relative_to(root).as_posix()
        if name in tree.files:
            return
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES and not given:
                return _too_large(name, tree)
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            if given:
                raise ImportProblem(f"{path}: cannot read it ({exc.strerror or exc})") from None
            tree.left_out.append(f"{name}: cannot read it ({exc.strerror or exc})")
            return
        if len(data) > MAX_FILE_BYTES:
            if given:
                raise ImportProblem(f"{path} is larger than {megabytes(MAX_FILE_BYTES)}")
            return _too_large(name, tree)
        total += len(data)
        if len(tree.files) >= MAX_TREE_FILES or total > MAX_TREE_BYTES:
            raise ImportProblem(
                f"more than {MAX_TREE_FILES:,} files or {megabytes(MAX_TREE_BYTES)} under {root}: "
                "give the folders that hold the suites"
            )
        _text(name, data, tree)

    for path in resolved:
        if not path.is_dir():
            read(path, given=True)
            tree.hidden.discard(path.relative_to(root).as_posix())  # named: searched like any other
            continue
        for folder, folders, names in os.walk(path):
            folders[:] = sorted(name for name in folders if not skipped_folder(name))
            for name in sorted(names):
                full = Path(folder) / name
                if name.startswith(".") or not full.is_file():
                    continue
                read(full, given=False)
    return tree


def read_zip(data: bytes, name: str = "the zip") -> Tree:
    """A zip's files, refusing what could escape or explode: a path that leads out of it (`../`, `/etc`,
    `C:`), a link, an encrypted entry, too many entries, and more bytes than the attached files' limit
    (counted as read, not as the zip claims)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise ImportProblem(f"{name} is not a zip file that can be read ({exc})") from None
    if len(entries) > MAX_ZIP_ENTRIES:
        raise ImportProblem(f"{name} holds {len(entries):,} entries; at most {MAX_ZIP_ENTRIES:,}")
    tree = Tree()
    total = 0
    for entry in entries:
        path = entry.filename.replace("\\", "/")
        parts = path.split("/")
        if path.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
            raise ImportProblem(f"{name}: {entry.filename!r} leads outside the zip; nothing was read")
        if stat.S_ISLNK(entry.external_attr >> 16):
            raise ImportProblem(f"{name}: {entry.filename} is a link; a zip of links is refused")
        if entry.is_dir():
            continue
        path = posixpath.normpath(path)
        if any(skipped_folder(part) for part in path.split("/")[:-1]) or posixpath.basename(path).startswith(
            "."
        ):
            continue

        if entry.flag_bits & 0x1:
            raise ImportProblem(f"{name}: {entry.filename} is encrypted")
        if entry.file_size > MAX_FILE_BYTES:
            _too_large(path, tree)
            continue
        try:
            with archive.open(entry) as handle:
                content = handle.read(MAX_FILE_BYTES + 1)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
            raise ImportProblem(f"{name}: {entry.filename} cannot be read ({exc})") from None
        if len(content) > MAX_FILE_BYTES:
            _too_large(path, tree)
            continue
        total += len(content)
        if total > MAX_TOTAL_BYTES:
            raise ImportProblem(f"{name} holds more than {megabytes(MAX_TOTAL_BYTES)} of files")
        _text(path, content, tree)
    return tree
