"""What `evalsite run` says of its cost and leaves behind, here or on a server: the estimate before it plays,
the files asked for, the line a stopped run ends with, and the exit code."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import orjson

from engine.compare import Comparison
from engine.cost import money, no_prices
from engine.exports import FORMATS, ExportFormat, RunExport
from engine.outcomes import Status
from engine.report import never_started
from engine.results import EvalResult, RunReport
from engine.text import plural

from .common import BROKEN, FAILED, PASSED, UserError, check_writable

EXPORTS = [entry for entry in FORMATS.values() if entry.cli is not None]


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "exports, for CI",
        "Each is one document, written when the run ends (--json is written as conversations end).",
    )
    for entry in EXPORTS:
        option = entry.cli
        group.add_argument(option.flag, dest=option.dest, type=Path, metavar=option.metavar, help=option.help)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before anything runs, a file asked for that cannot be written."""
    if getattr(args, "json_path", None):
        check_writable(args.json_path)
    for entry in EXPORTS:
        if getattr(args, entry.cli.dest, None):
            check_writable(getattr(args, entry.cli.dest), entry.cli.flag)


def beside(entry: ExportFormat) -> list[ExportFormat]:
    """The formats written next to this one's file."""
    return [other for other in FORMATS.values() if other.beside == entry.key]


def _dumped(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def _written_alike(data) -> bool:
    """Whether orjson writes this data as json.dumps does: it does but for floats below 1e-4 (0.00001 for
    1e-05, 2.5e-7 for 2.5e-07) and the ones that are not finite (null for NaN)."""
    kind = type(data)
    if kind is dict:
        return all(map(_written_alike, data.values()))
    if kind is list:
        return all(map(_written_alike, data))
    if kind is float:
        return data == 0.0 or 1e-4 <= abs(data) < math.inf
    return True


def _conversation_text(result: EvalResult) -> str:
    """A conversation as it stands in the document's `evals`: _dumped, indented to its place. json.dumps
    with an indent encodes in Python (its C encoder takes none), more CPU than the rest of a conversation's
    report; orjson writes the same text in C, and json.dumps is kept for the data orjson writes otherwise."""
    data = result.model_dump(mode="json")
    text = None
    if _written_alike(data):
        # What orjson refuses (an integer past 64 bits, say) json.dumps writes.
        with contextlib.suppress(TypeError):
            text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    if text is None:
        text = _dumped(data)
    # A dump holds no blank line (a newline within a string is escaped): every line gets the indent.
    return _INDENT + text.replace("\n", "\n" + _INDENT)


# Stands for the conversations in a document, where their text goes: a string no dump of a result holds.
_EVALS = "\x00evals\x00"
# Where the conversations go: in `evals`, in the document.
_INDENT = "    "
_MARK = _INDENT + _dumped(_EVALS)


class StreamedJSON:
    """--json written as conversations end, so that a run killed half-way leaves them on disk.

    The file is a JSON document at every moment: while the run goes, its header with status "running" and
    the conversations ended so far, in the order they ended (each is written over the closing brackets,
    which follow it again); once the run completes, the whole evalsite.results/1 document, in the
    conversations' order, moved over it at once. Each conversation is serialised once. The header's `unpriced`
    names the endpoints without prices that the conversations ended so far called: when one names a new one,
    the file is written again from its start."""

    def __init__(self, path: Path, head: dict) -> None:
        self.path = path
        self.head = head
        self.texts: dict[tuple[int, int], str] = {}
        try:
            self.file = path.open("wb")
            self._open_document()
        except OSError as exc:
            raise UserError(f"--json {path}: {exc.strerror or exc}", code=BROKEN) from None

    def _open_document(self) -> None:
        """The header and the conversations ended so far, from the file's start."""
        opening, closing = _dumped({**self.head, "status": "running", "evals": [_EVALS]}).split(_MARK)
        self.closing = (closing + "\n").encode()
        self.file.seek(0)
        self.file.write(opening.encode() + ",\n".join(self.texts.values()).encode())
        self.end = self.file.tell()
        self._close_document()

    def interrupted(self) -> None:
        """The document as a run stopped by Ctrl-C leaves it: the conversations that ended, its status
        `cancelled` and why, so it reads as neither finished nor still going."""
        self.file.close()
        head = {**self.head, "status": "cancelled", "stop_reason": "interrupted (Ctrl-C)", "evals": [_EVALS]}
        with contextlib.suppress(UserError):  # what was written as conversations ended stays
            self._replace(head, list(self.texts.values()))

    def _close_document(self) -> None:
        self.file.write(self.closing)
        self.file.truncate()
        self.file.flush()

    def add(self, result: EvalResult) -> None:
        text = _conversation_text(result)
        self.texts[(result.index, result.iteration)] = text
        unpriced = result.unpriced
        if not set(unpriced) <= set(self.head["unpriced"]):
            names = sorted({*self.head["unpriced"], *unpriced})
            self.head = {**self.head, "unpriced": names, "cost_known": False}
            self._open_document()
            return
        self.file.seek(self.end)
        self.file.write((b",\n" if len(self.texts) > 1 else b"") + text.encode())
        self.end = self.file.tell()
        self._close_document()

    def finish(self, report: RunReport) -> None:
        """The finished document, the same text as json.dumps of the report, written beside and moved over
        the streamed one, so that it is never half-written."""
        self.file.close()
        data = report.model_dump(mode="json", exclude={"evals"})
        keys = (*RunReport.model_fields, *RunReport.model_computed_fields)  # in the order the report has them
        data = {key: [_EVALS] if key == "evals" else data[key] for key in keys}
        evals = [
            self.texts.get((result.index, result.iteration)) or _conversation_text(result)
            for result in report.evals
        ]
        self._replace(data, evals)

    def _replace(self, data: dict, evals: list[str]) -> None:
        """`data` with the conversations' texts in its `evals`, written beside and moved over the file."""
        text = _dumped(data)
        if evals:
            # Written piece by piece: joining thousands of conversations into one text first copies them
            # all again, twice, for nothing.
            before, after = text.split(_MARK, 1)
            pieces = chain(
                [before, evals[0]], chain.from_iterable((",\n", item) for item in evals[1:]), [after, "\n"]
            )
        else:
            pieces = [text.replace(f"[\n{_MARK}\n  ]", "[]", 1), "\n"]
        partial = self.path.with_name(f".{self.path.name}.partial")
        try:
            with partial.open("w", encoding="utf-8") as file:
                file.writelines(pieces)
        except OSError as exc:
            raise UserError(f"--json {self.path}: {exc.strerror or exc}", code=BROKEN) from None
        try:
            os.replace(partial, self.path)
        except OSError as exc:
            raise UserError(f"--json {self.path}: {exc.strerror or exc}", code=BROKEN) from None


def write_outputs(args: argparse.Namespace, report: RunReport, system: str | None, *,
                  comparison: Comparison | None = None, run_url: str | None = None,
                  baseline_url: str | None = None, streamed: StreamedJSON | None = None) -> None:  # fmt: skip
    """Every file the command line asked for (`streamed`: --json, as written so far); a write that fails is
    exit 3 (the run happened)."""
    json_path = getattr(args, "json_path", None)
    if streamed is not None:
        streamed.finish(report)
        print(f"Wrote the results (JSON) to {json_path}")
    elif json_path is not None:
        # pydantic's own serializer: json.dumps(indent=2)'s layout and data, without building Python objects
        # and encoding each value in Python, which takes seconds for thousands of conversations.
        text = report.model_dump_json(indent=2) + "\n"
        _write(json_path, "--json", text)
        print(f"Wrote the results (JSON) to {json_path}")
    run = RunExport.of_report(
        report, system, comparison=comparison, run_url=run_url, baseline_url=baseline_url
    )
    for entry in EXPORTS:
        path = getattr(args, entry.cli.dest, None)
        if path is None:
            continue
        _write(path, entry.cli.flag, entry.text(run))
        print(f"Wrote the {entry.written} to {path}")
        for other in beside(entry):
            companion = path.with_name(f"{path.stem}.{other.suffix}")
            _write(path, entry.cli.flag, other.text(run), companion)
            print(f"Wrote the {other.written} to {companion}")


def _write(path: Path, option: str, text: str, target: Path | None = None) -> None:
    try:
        (target or path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{option} {path}: {exc.strerror or exc}", code=BROKEN) from None


def exit_code(report: RunReport) -> int:
    if report.stop_reason:  # stopped at its cost limit: the evals it did not play have no result
        return BROKEN
    if any(result.status == Status.ERROR for result in report.evals):
        return BROKEN
    return PASSED if report.status == Status.PASSED else FAILED


def say_costs(lines: Sequence[str]) -> None:
    """What the run may cost, on stderr before it plays (engine.cost.before_run, worked out here or by the
    server that launched it)."""
    for line in lines:
        print(f"cost: {line}", file=sys.stderr)


def say_stopped(report: RunReport, name: str = "") -> None:
    """Why a run its cost limit stopped has conversations without a verdict, on stderr (`name`: a matrix's
    variant)."""
    if not report.stop_reason:
        return
    cancelled = [result for result in report.evals if result.status == Status.CANCELLED]
    unplayed = sum(map(never_started, cancelled))
    parts = [f"{len(report.evals) - len(cancelled)} of {plural(len(report.evals), 'conversation')} played"]
    parts += [f"{len(cancelled) - unplayed} stopped mid-way"] if len(cancelled) > unplayed else []
    parts += ["the rest not started"] if unplayed else []
    why = f", {no_prices(report.unpriced)}" if report.unpriced else ""
    print(
        f"{f'{name}: ' if name else ''}stopped: {report.stop_reason} (spent "
        f"{amount_spent(report.totals.cost, report.unpriced)}{why}; {', '.join(parts)})",
        file=sys.stderr,
    )


def amount_spent(usd: float, unpriced: Sequence[str]) -> str:
    """What a run spent, for the lines it ends with: "$0.12"; "at least $0.12" or "an unknown amount" when
    endpoints it calls have no prices (`unpriced`), which the caller names."""
    if not unpriced:
        return money(usd)
    return f"at least {money(usd)}" if usd else "an unknown amount"
