"""What the import page's two paths share: reading the uploaded files (a zip's with their folders, a pasted
suite as one more), converting them to one suite or several, and rendering the page."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from engine.imports import Imported, ImportProblem, ImportResult, convert, convert_all, suite_files
from engine.imports.tree import read_zip
from engine.source import MAX_SUITE_BYTES

from .. import services

MAX_SUITES = 100
MAX_UPLOADS = 50
KIND_CHOICES = [
    ("", "Auto-detect"),
    ("vibecheck", "vibecheck YAML"),
    ("letta", "Letta Evals suite.yaml + dataset"),
    ("agentv", "AgentV eval YAML (tests, or v2 evalcases)"),
    ("promptfoo", "promptfoo configuration (promptfooconfig.yaml + tests and prompt files)"),
    ("agtlantis", "agtlantis eval YAML (agent + cases)"),
    ("calibrate", "calibrate (Bolt Foundry) samples TOML / JSONL or grader decks"),
]
TEMPLATE = "suites/import.html"


def carry_limit() -> int:
    """Bytes of converted files the preview page can carry back in hidden fields: Django refuses request
    bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (not counting uploaded files)."""
    limit = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440)
    return 10**12 if limit is None else int(limit * 0.8)


PASTED = "pasted-suite.yaml"  # the name a pasted suite goes by among the files, and its suite name's fallback
PASTED_TOML = "pasted-samples.toml"  # a pasted calibrate file: TOML tables of samples


@dataclass
class Upload:
    files: dict[str, str] = field(default_factory=dict)  # path (a zip's entries keep their folders) -> text
    zipped: bool = False
    left_out: list[str] = field(default_factory=list)  # a zip's files not read: binaries, too large
    hidden: set[str] = field(default_factory=set)  # a zip's files in hidden folders: never a suite


def read_uploads(request: HttpRequest, pasted: str = "") -> Upload:
    """The uploaded files (a zip's files with their folders), and the pasted suite (if any) as one more."""
    uploads = request.FILES.getlist("files")
    if not uploads and not pasted:
        raise ImportProblem(
            "paste the suite, or choose its files: the suite file, and its dataset or attachments"
        )
    if len(uploads) > MAX_UPLOADS:
        raise ImportProblem(f"at most {MAX_UPLOADS} files at a time")
    upload = Upload()
    total = 0
    for chosen in uploads:
        if chosen.name.lower().endswith(".zip"):
            data = chosen.read(services.MAX_TOTAL_BYTES + 1)
            if len(data) > services.MAX_TOTAL_BYTES:
                raise ImportProblem(
                    f"{chosen.name} is larger than {services.MAX_TOTAL_BYTES // 1_000_000} MB"
                )
            tree = read_zip(data, chosen.name)  # bounded by the same total as the files it holds
            for path, text in tree.files.items():
                if path in upload.files:
                    raise ImportProblem(f"{path} was uploaded twice")
                upload.files[path] = text
            upload.zipped, upload.left_out = True, upload.left_out + tree.left_out
            upload.hidden |= tree.hidden
            continue
        data = chosen.read(services.MAX_FILE_BYTES + 1)
        if len(data) > services.MAX_FILE_BYTES:
            raise ImportProblem(f"{chosen.name} is larger than {services.MAX_FILE_BYTES // 1_000_000} MB")
        total += len(data)
        if total > services.MAX_TOTAL_BYTES:
            raise ImportProblem(f"the files exceed {services.MAX_TOTAL_BYTES // 1_000_000} MB in all")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise ImportProblem(
                f"{chosen.name} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})"
            ) from None
        upload.files[chosen.name] = text
    if pasted:
        if len(pasted.encode("utf-8")) > MAX_SUITE_BYTES:
            raise ImportProblem(f"the pasted suite is larger than {MAX_SUITE_BYTES // 1_000_000} MB")
        # calibrate's samples are TOML, which YAML cannot read: `[[samples]]` on a line of its own says so.
        toml = any(line.strip() == "[[samples]]" for line in pasted.splitlines())
        upload.files[PASTED_TOML if toml else PASTED] = pasted
    return upload


def convert_upload(upload: Upload, kind: str) -> ImportResult | Imported:
    """One suite (a chosen kind, or files holding one suite), else every suite among them: a
    zip, or several suite files chosen at once. A single suite found in a zip is one suite too."""
    if kind or (not upload.zipped and len(suite_files(upload.files)) <= 1):
        return convert(upload.files, kind or None)
    imported = convert_all(upload.files, upload.hidden)
    if len(imported.results) > MAX_SUITES:
        raise ImportProblem(
            f"{len(imported.results)} suites were found; at most {MAX_SUITES} at a time: zip fewer folders"
        )
    if len(imported.results) == 1 and not imported.problems:
        return imported.results[0]
    return imported


def render_import(request: HttpRequest, context: dict, status: int = 200) -> HttpResponse:
    context.setdefault("kind", "")
    context["kind_choices"] = KIND_CHOICES
    return render(request, TEMPLATE, context, status=status)
