"""`evalsite`, the terminal commands: `evalsite run suite.yaml`, `evalsite validate suite.yaml`,
`evalsite import FILE ... --out suite.yaml`.

They run in a bare checkout or after a plain `pip install`, from any folder: no SECRET_KEY, no server, no
database (evalsite/terminal.py). Named endpoints are read from the database when one was set up; `mock` and
the default endpoint (OPENAI_BASE_URL, OPENAI_API_KEY) always work. `manage.py evalrun` and
`manage.py evalvalidate` are the same commands under Django's name.

A mistake the user can fix is one line on stderr that says what to do, with exit code 2; a traceback
means a bug in evalsite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from engine.attached import MAX_FILE_BYTES, megabytes, read_limited, read_suite_files
from engine.calibration import LoadedSet, load_calibration
from engine.calls import SlowReporter
from engine.loader import file_references, is_calibration, load_suite
from engine.outcomes import Status
from engine.schema import Suite
from engine.schema.suite import TIMEOUT_MAX, TIMEOUT_MIN
from engine.source import MAX_SUITE_BYTES, SuiteError, format_path, parse_yaml
from engine.text import plural
from evalsite import terminal

if TYPE_CHECKING:
    from engine.clients import EndpointRegistry
    from engine.results import EvalResult, RunReport

PASSED, FAILED, INVALID, BROKEN = 0, 1, 2, 3

ABOUT = """\
Multi-turn LLM evaluations from the terminal, with the web app's engine.

Needs no server, database or SECRET_KEY. `mock` and the default endpoint (OPENAI_BASE_URL,
OPENAI_API_KEY) always work; named endpoints (`name/model`) are read from the database that
`make setup` creates, or from DATABASE_URL."""

EXIT_CODES = """\
exit codes:
    0  the run passed: every eval passed (with gates: every gate held)
    1  the run did not pass: an eval failed, or a gate did
    2  nothing was run: the suite is invalid or cannot be read, or the command is wrong
       (a bad --model, a --json path that cannot be written)
    3  the endpoint or the machine failed: a conversation ended in an endpoint error
       (unreachable, HTTP 401, every retry spent), or evalsite crashed
  130  interrupted (Ctrl-C)

When some evals fail and others end in an endpoint error, the exit code is 3: the run's result
is unknown until the endpoint works (the run's status is `error`, as in the web app)."""


class UserError(Exception):
    """A mistake the user can fix: printed as one line, never as a traceback."""

    def __init__(self, message: str, code: int = INVALID):
        super().__init__(message)
        self.code = code


# --- reading suites ----------------------------------------------------------------------------------------


def read_suite_file(path: Path, limit: int = MAX_SUITE_BYTES) -> bytes:
    """The file's bytes; UserError, before anything is read, when os.stat says it is over `limit`."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise UserError(
                f"{path}: larger than {limit // 1_000_000} MB ({megabytes(size)}); nothing was read"
            )
        data = read_limited(path, limit)
    except IsADirectoryError:
        examples = sorted(str(p) for p in path.glob("*.y*ml"))[:3]
        hint = f", e.g. {', '.join(examples)}" if examples else ""
        raise UserError(f"{path}: is a folder; give a suite file{hint}") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (paths are relative to {Path.cwd()})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise UserError(f"{path}: larger than {limit // 1_000_000} MB; read no further")
    return data


class InvalidSuite(Exception):
    """The suite's problems, each as a printable line."""

    def __init__(self, lines: list[str]):
        super().__init__(lines)
        self.lines = lines


def load_suite_file(path: Path) -> tuple[Suite, dict[str, str]]:
    """The suite and its attached files, read from the suite's folder; InvalidSuite lists its problems."""
    data = read_suite_file(path)
    try:
        files = read_suite_files(path, data)
    except OSError as exc:
        name = exc.filename or "an attached file"
        raise UserError(
            f"{name}: cannot read it ({exc.strerror or exc}); {path} names it as an attached file"
        ) from None
    except SuiteError as exc:
        raise InvalidSuite(_problem_lines(path, exc)) from None
    try:
        return load_suite(data, filename=str(path), files=files), files
    except SuiteError as exc:
        lines = _problem_lines(path, exc)
        missing = [name for name in file_references(data) if name not in files]
        if missing:
            folder = path.parent.resolve()
            lines.append(
                f"{path}: attached files are read from its folder ({folder}), which has no file "
                + ", ".join(missing)
            )
        raise InvalidSuite(lines) from None


def _problem_lines(path: Path, exc: SuiteError) -> list[str]:
    """Each problem as `file:line:col path: message`; a problem in an attached file names that file."""
    return [_problem_line(path, problem) for problem in exc.problems]


# --- endpoints ---------------------------------------------------------------------------------------------


def setup_django() -> None:
    """Django in terminal mode (evalsite/terminal.py): no SECRET_KEY needed, nothing created."""
    from django.core.exceptions import ImproperlyConfigured

    terminal.active = True
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    try:
        import django

        django.setup()
    except ImproperlyConfigured as exc:
        raise UserError(f"settings: {exc}") from None


def endpoint_registry() -> tuple[EndpointRegistry, str | None]:
    """The endpoints as the workers see them, and why the named ones could not be read (None if they were)."""
    setup_django()
    from runs.endpoints import terminal_registry

    return terminal_registry()


def check_model_refs(suite: Suite, model: str | None, registry: EndpointRegistry, unread: str | None) -> None:
    """Refuse a reference that names no endpoint before anything is spent, or say where it goes.

    "name/model" picks the named endpoint `name`; when there is none it goes whole to the default endpoint,
    which is right for ids such as OpenRouter's "anthropic/claude-3.5-sonnet" once OPENAI_BASE_URL points
    there, and a typo (or a missing database) otherwise: OpenAI's own API has no model id with a slash.
    """
    from engine.endpoint_checks import closest_endpoint, model_refs, unnamed_prefix

    default_url = os.environ.get("OPENAI_BASE_URL")
    seen = set()
    for found in model_refs(suite, model):
        ref = found.ref.strip()
        where = format_path(found.path) if found.path else "--model"
        prefix, slash, rest = ref.partition("/")
        if not slash or ref in seen:
            continue
        seen.add(ref)
        if not prefix or not rest:
            raise UserError(f"{where} `{ref}`: write a model id, `endpoint/model` or `mock`")
        if unnamed_prefix(registry, ref) is None:
            continue
        if unread:
            why = f"named endpoints live in the admin's database, and {unread}"
            fix = f"run `make setup` and add `{prefix}` in the admin (Runs → Endpoints)"
        else:
            known = ", ".join(f"`{name}`" for name in sorted(registry.named)) or "none"
            close = closest_endpoint(registry, prefix)
            why = f"did you mean `{close}`? " if close else ""
            why += f"endpoints in the admin: {known}"
            fix = f"add `{prefix}` in the admin (Runs → Endpoints)"
        if default_url:
            note = f"{where} `{ref}` goes whole to the default endpoint ({default_url}): no endpoint is "
            print(f"note: {note}named `{prefix}` ({why})", file=sys.stderr)
            continue
        raise UserError(
            f"{where} `{ref}`: no endpoint named `{prefix}` ({why}). To use it, {fix}; or set "
            f"OPENAI_BASE_URL to send `{ref}` whole to the default endpoint; or use `mock`"
        )


# --- evalsite run ------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def timeout_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not TIMEOUT_MIN <= value <= TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds from {TIMEOUT_MIN:g} to {TIMEOUT_MAX:g}"
        )
    return value


def bind_vars(path: Path, suite: Suite, assignments: list[str] | None) -> tuple[Suite, dict[str, str]]:
    """The suite with its variables filled from --var NAME=VALUE (else their defaults), and the values."""
    from pydantic import ValidationError

    from engine import suitevars

    try:
        given = suitevars.parse_assignments(assignments)
        return suitevars.bind(suite, given), suitevars.values(suite.vars or {}, given)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(map(str, error["loc"]))
        raise UserError(f"{path}: with the values given, {where}: {error['msg']}; nothing was run") from None
    except ValueError as exc:
        raise UserError(f"{path}: {exc}; nothing was run") from None


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the suite (YAML); attached files are read from its folder")
    parser.add_argument(
        "--model",
        metavar="M",
        help="model to run instead of the suite's: a model id on the default endpoint, endpoint/model, "
        "or mock (without `judge` in the suite, also the judge)",
    )
    parser.add_argument(
        "--json",
        dest="json_path",
        type=Path,
        metavar="OUT.json",
        help="also write the results here (format evalsite.results/1)",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=10,
        metavar="N",
        help="conversations in flight at once (default 10; the endpoint's cap applies too)",
    )
    parser.add_argument(
        "--timeout",
        type=timeout_seconds,
        metavar="SECONDS",
        help="seconds one model request may take before it is abandoned and retried (within the endpoint's "
        "retry budget), for every endpoint; over the suite's request_timeout, which is over the endpoint's "
        "own (EVALSITE_REQUEST_TIMEOUT, default 60, or the admin's)",
    )
    parser.add_argument(
        "--var", dest="vars", action="append", default=[], metavar="NAME=VALUE",
        help="a value for the suite's variable NAME ({{var:NAME}} in the suite), over its default in "
        "`vars`; repeat for each",
    )  # fmt: skip
    exports = parser.add_argument_group("exports, for CI")
    exports.add_argument(
        "--junit", dest="junit_path", type=Path, metavar="OUT.xml",
        help="write JUnit XML: a testcase per eval (per iteration), failed gates too, the transcript in system-out",
    )  # fmt: skip
    exports.add_argument(
        "--csv", dest="csv_path", type=Path, metavar="OUT.csv",
        help="write a CSV row per eval (per iteration) here, and a row per turn beside it (OUT.turns.csv)",
    )  # fmt: skip
    exports.add_argument(
        "--markdown", dest="markdown_path", type=Path, metavar="OUT.md",
        help="write a Markdown summary for a pull-request comment (with --baseline: its regressions)",
    )  # fmt: skip
    server = parser.add_argument_group(
        "on a server",
        "Run the suite on an evalsite server instead of here: its workers, endpoints and keys. The suite and "
        "its attached files are saved there as the next version of your suite of that name.",
    )
    server.add_argument(
        "--server", metavar="URL", default=os.environ.get("EVALSITE_SERVER") or None,
        help="the server's address, e.g. https://evals.example.com (or EVALSITE_SERVER)",
    )  # fmt: skip
    server.add_argument(
        "--token", metavar="T", default=None,
        help="an API token (or EVALSITE_TOKEN, better: a command line is visible to other users)",
    )  # fmt: skip
    server.add_argument(
        "--baseline", metavar="RUN",
        help="a run id on the server to compare with, or `pinned` for the suite's pinned baseline: the report "
        "and --markdown list regressions",
    )  # fmt: skip
    server.add_argument(
        "--fail-on-regression", action="store_true",
        help="exit 1 when an eval that passed in --baseline does not pass now",
    )  # fmt: skip


def check_writable(path: Path, option: str = "--json") -> None:
    if path.is_dir():
        raise UserError(
            f"{option} {path}: is a folder; give a file name, e.g. {path / ('results' + (path.suffix or '.out'))}"
        )
    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"{option} {path}: there is no folder {folder}; create it or write elsewhere")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"{option} {path}: cannot write there (permission denied); write elsewhere")


OUTPUTS = (
    ("json_path", "--json"),
    ("junit_path", "--junit"),
    ("csv_path", "--csv"),
    ("markdown_path", "--markdown"),
)


def write_outputs(args: argparse.Namespace, report: RunReport, system: str | None, *, comparison=None,
                  run_url: str | None = None, baseline_url: str | None = None) -> None:  # fmt: skip
    """Every export the command line asked for; a write that fails is exit 3 (the run happened)."""
    from engine import exports

    texts = {
        "json_path": lambda: json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n",
        "junit_path": lambda: exports.junit_xml(report, system),
        "markdown_path": lambda: exports.markdown_summary(
            report, comparison=comparison, run_url=run_url, baseline_url=baseline_url
        ),
        "csv_path": lambda: exports.evals_csv(report),
    }
    for attribute, option in OUTPUTS:
        path = getattr(args, attribute, None)
        if path is None:
            continue
        try:
            path.write_text(texts[attribute](), encoding="utf-8")
            if attribute == "csv_path":
                turns = path.with_name(path.stem + ".turns.csv")
                turns.write_text(exports.turns_csv(report), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{option} {path}: {exc.strerror or exc}", code=BROKEN) from None
        if attribute == "json_path":
            print(f"Results written to {path}")
        elif attribute == "csv_path":
            print(f"CSV written to {path} (evals) and {turns} (turns)")
        else:
            print(f"{option.removeprefix('--').capitalize()} written to {path}")


def exit_code(report: RunReport) -> int:
    if any(result.status == Status.ERROR for result in report.evals):
        return BROKEN
    return PASSED if report.status == Status.PASSED else FAILED


def say_wait(wait) -> None:
    """A model call waits to retry (engine.retries): say so, or a long outage looks like a hang."""
    print(f"{wait.endpoint}: {wait.reason}, retrying in {wait.seconds:.0f} s", file=sys.stderr, flush=True)


def say_slow() -> SlowReporter:
    """Calls the endpoint sits on, said on stderr, so a hung endpoint never looks like a hung evalsite."""
    return SlowReporter(lambda line: print(line, file=sys.stderr, flush=True))


def run(args: argparse.Namespace) -> int:
    # The model client (openai) takes most of a second to import: only `run` pays for it.
    from engine.codegrade.run import CodeRunner
    from engine.endpoint_checks import locator, timeout_warnings
    from engine.report import format_report
    from engine.runner import run_suite

    model = args.model
    if model is not None and not model.strip():
        raise UserError("--model is empty: give a model id, `endpoint/model` or `mock`")
    for attribute, option in OUTPUTS:
        if getattr(args, attribute, None):
            check_writable(getattr(args, attribute), option)
    if getattr(args, "server", None):
        from evalsite.remote import run_on_server

        if getattr(args, "timeout", None) is not None:
            raise UserError(
                "--timeout applies to a run here; on a server, set `request_timeout` in the suite (or the "
                "endpoint's timeout in the server's admin)"
            )

        return run_on_server(args)
    if getattr(args, "baseline", None) or getattr(args, "fail_on_regression", False):
        raise UserError("--baseline and --fail-on-regression compare with a run on a server: add --server")
    try:
        suite, files = load_suite_file(args.file)
    except InvalidSuite as exc:
        print(*exc.lines, sep="\n", file=sys.stderr)
        raise UserError("the suite has problems; nothing was run") from None
    suite, values = bind_vars(args.file, suite, getattr(args, "vars", None))
    if not (model or suite.model):
        raise UserError(f"{args.file}: no model: set `model` in the suite or pass --model")
    registry, unread = endpoint_registry()
    check_model_refs(suite, model, registry, unread)
    if isinstance(suite.request_timeout, dict):
        located = locator(read_suite_file(args.file).decode("utf-8-sig"))
        for problem in timeout_warnings(suite, registry, located):
            print(f"note: {args.file}:{problem}", file=sys.stderr)
    say_cap(registry, model or suite.model, args.concurrency)
    report = run_suite(
        suite,
        registry,
        model=model,
        concurrency=args.concurrency,
        files=files,
        on_wait=say_wait,
        timeout=getattr(args, "timeout", None),
        on_slow=say_slow(),
        slow_min_seconds=settings.EVALSITE_SLOW_CALL_SECONDS,
        # Code checks run here, in the suite's folder, with the caller's environment: it is their machine.
        code=CodeRunner(folder=args.file.parent.resolve(), inherit_env=True),
    )
    report.vars = values or None
    print(format_report(report))
    write_outputs(args, report, suite.system)
    code = exit_code(report)
    if code == BROKEN:
        errors = [result for result in report.evals if result.status == Status.ERROR]
        unfinished = [result for result in errors if ended_unfinished(result)]
        errors = [result for result in errors if not ended_unfinished(result)]
        total = plural(len(report.evals), "conversation")
        graders = [result for result in errors if (result.error or "").startswith("code grader ")]
        errors = [result for result in errors if result not in graders]
        if errors:
            print(
                f"{len(errors)} of {total} ended in an endpoint error ({errors[0].error}); check the "
                "endpoint's URL and key (OPENAI_BASE_URL and OPENAI_API_KEY, or the endpoint in the admin)",
                file=sys.stderr,
            )
        if graders:
            print(
                f"{len(graders)} of {total} got no verdict from a code grader ({graders[0].error})",
                file=sys.stderr,
            )
        if unfinished:
            print(
                f"{len(unfinished)} of {total} ended at a reply that did not finish "
                f"({unfinished[0].turns[-1].incomplete}); `incomplete_reply: fail` or `grade` in the suite "
                "counts such replies otherwise",
                file=sys.stderr,
            )
    return code


def ended_unfinished(result: EvalResult) -> bool:
    """An error at a reply that did not finish (incomplete_reply: error), not at the endpoint."""
    last = result.turns[-1] if result.turns else None
    return last is not None and last.incomplete is not None and not last.checks and last.passed is None


def say_cap(registry: EndpointRegistry, model_ref: str, concurrency: int) -> None:
    """A --concurrency above the endpoint's own limit is held to it: say so, and where the limit is set."""
    from engine.clients import DEFAULT

    name, _ = registry.resolve(model_ref)
    cap = registry.max_concurrency(name)
    if concurrency > cap:
        where = (
            "EVALSITE_DEFAULT_CONCURRENCY"
            if name == DEFAULT
            else f"the endpoint {name}'s max concurrency in the admin"
        )
        print(
            f"concurrency {concurrency} held to {cap}, the {name} endpoint's limit ({where})", file=sys.stderr
        )


# --- evalsite calibrate ------------------------------------------------------------------------------------


def load_calibration_file(path: Path) -> LoadedSet:
    """The calibration set and its samples; InvalidSuite lists its problems."""
    data = read_suite_file(path)
    try:
        files = read_suite_files(path, data)
    except OSError as exc:
        raise UserError(
            f"{exc.filename or 'an attached file'}: cannot read it ({exc.strerror or exc})"
        ) from None
    except SuiteError as exc:
        raise InvalidSuite(_problem_lines(path, exc)) from None
    try:
        return load_calibration(data, filename=str(path), files=files)
    except SuiteError as exc:
        raise InvalidSuite(_problem_lines(path, exc)) from None


def _holds_calibration(path: Path) -> bool:
    try:
        raw, _ = parse_yaml(read_suite_file(path))
    except SuiteError:
        return False  # reported by the suite loader, which says what a suite needs
    return is_calibration(raw)


def _problem_line(path: Path, problem) -> str:
    return os.path.join(os.path.dirname(path), str(problem)) if problem.file else f"{path}:{problem}"


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the calibration set (YAML); attached files from its folder")
    parser.add_argument(
        "--model",
        metavar="M",
        help="judge model for judges that name none: a model id, endpoint/model or mock",
    )
    parser.add_argument(
        "--json", dest="json_path", type=Path, metavar="OUT.json",
        help="also write the figures here (format evalsite.calibration/1)",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=positive_int, default=10, metavar="N",
        help="judge calls in flight at once (default 10; the endpoint's cap applies too)",
    )  # fmt: skip


def calibrate(args: argparse.Namespace) -> int:
    from engine.calibration.report import format_calibration
    from engine.calibration.run import run_calibration
    from engine.endpoint_checks import unnamed_prefix

    if args.json_path:
        check_writable(args.json_path)
    try:
        loaded = load_calibration_file(args.file)
    except InvalidSuite as exc:
        print(*exc.lines, sep="\n", file=sys.stderr)
        raise UserError("the calibration set has problems; nothing was judged") from None
    for warning in loaded.warnings:
        print(f"warning: {_problem_line(args.file, warning)}", file=sys.stderr)
    nameless = [judge.name for judge in loaded.spec.all_judges if not judge.model]
    if nameless and not args.model:
        raise UserError(f"{args.file}: judge {nameless[0]!r} names no `model`; set one or pass --model")
    registry, unread = endpoint_registry()
    for judge in loaded.spec.all_judges:
        ref = judge.model or args.model
        prefix = unnamed_prefix(registry, ref)
        if prefix and not os.environ.get("OPENAI_BASE_URL"):
            why = unread or f"endpoints in the admin: {', '.join(sorted(registry.named)) or 'none'}"
            raise UserError(f"judge {judge.name!r} `{ref}`: no endpoint named `{prefix}` ({why})")
    report = run_calibration(loaded, registry, judge_model=args.model, concurrency=args.concurrency)
    print(format_calibration(report))
    if args.json_path:
        payload = {"format": "evalsite.calibration/1", **report.model_dump(mode="json")}
        try:
            args.json_path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise UserError(f"--json {args.json_path}: {exc.strerror or exc}", code=BROKEN) from None
        print(f"Figures written to {args.json_path}")
    errors = [row for judge in report.judges for row in judge.samples if any(row.errors)]
    if errors and all(judge.metrics.judgements == judge.metrics.unscored for judge in report.judges):
        return BROKEN
    return PASSED if report.status == "passed" else FAILED


# --- evalsite import ---------------------------------------------------------------------------------------

IMPORT_EXIT_CODES = """\
Give files or folders: every suite among them is found (folders are searched through, leaving out .git,
node_modules, caches, hidden files and binaries; hidden folders are read only for files a suite names),
and each file a suite refers to is read from where its tool reads it, from the suite file's folder. Each suite is written into --out DIR (default: imported/): as
DIR/NAME.yaml, or DIR/NAME/NAME.yaml with its attached files beside it. One suite and --out NAME.yaml
writes that file. Losses (a check, a grader or a user turn that could not be carried) are listed on
stderr as file:line key: message.

exit codes:
  0  converted: every suite was written, is valid, and lost nothing that graded or drove it
  1  written, but something is to see to: a suite lost a check, grader or user turn (listed on stderr),
     a file it refers to was not given ("Files it needs"), it is not valid yet (problems listed), or
     another suite file among them could not be converted ("not imported" on stderr)
  2  nothing was written: no suite could be converted (the same message as the Import page),
     a file cannot be read, or --out would overwrite a file (pass --force)"""


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    from engine.imports import KINDS

    parser.add_argument(
        "files", nargs="+", type=Path, metavar="PATH",
        help="files or folders: the other tools' suite files and the files they refer to (datasets, "
        "prompt, rubric and grader files)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, metavar="DIR",
        help="the folder to write the suites into (default: imported/); NAME.yaml for a single suite",
    )  # fmt: skip
    parser.add_argument(
        "--kind", choices=["auto", *KINDS], default="auto",
        help="the tool that wrote the files, for one suite given as files (default: auto-detect every "
        "suite, as the Import page does)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="overwrite files that already exist")


def import_files(args: argparse.Namespace) -> int:
    """`evalsite import`: the Import page's converter (engine.imports.convert) from the terminal."""
    from engine.imports import ImportProblem, convert

    if args.kind == "auto":
        from evalsite.importing import import_tree

        return import_tree(args)
    if args.out is None:
        raise UserError("--kind needs --out SUITE.yaml")
    uploads: dict[str, bytes] = {}
    # Named from the folder the files share, as a folder import names them (`decks/a.deck.md`, never the
    # absolute path a deck's embeds would be resolved against).
    base = Path(os.path.commonpath([path.resolve().parent for path in args.files]))
    for path in args.files:
        uploads[path.resolve().relative_to(base).as_posix()] = read_suite_file(path, MAX_FILE_BYTES)
    try:
        result = convert(uploads, None if args.kind == "auto" else args.kind)
    except ImportProblem as exc:
        raise UserError(str(exc)) from None
    folder = args.out.parent
    if not args.out.is_dir():
        folder.mkdir(parents=True, exist_ok=True)  # `--out imported/suite.yaml` makes imported/
    check_writable(args.out, "--out")
    writes = {args.out: result.source, **{folder / name: text for name, text in result.files.items()}}
    inputs = {path.resolve() for path in args.files}
    for path, text in writes.items():
        # Never overwrite silently: an input file in the same folder (a Letta dataset.jsonl) would be
        # replaced by its converted form.
        if path.exists() and not args.force:
            try:
                same = path.read_text(encoding="utf-8") == text
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                what = "one of the files being imported" if path.resolve() in inputs else "a file"
                raise UserError(f"{path} exists ({what}): write elsewhere with --out, or pass --force")
    for path, text in writes.items():
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{path}: cannot write it ({exc.strerror or exc})") from None
    from evalsite.importing import Unit, report_unit

    return report_unit(Unit(result, args.out, writes), detailed=True)


# --- evalsite validate -------------------------------------------------------------------------------------


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="file", help="suite files (YAML)")


def validate(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        try:
            if _holds_calibration(path):
                loaded = load_calibration_file(path)
                for warning in loaded.warnings:
                    print(f"warning: {_problem_line(path, warning)}", file=sys.stderr)
                print(
                    f"{path}: ok — calibration set {loaded.spec.name!r}, "
                    f"{plural(len(loaded.samples), 'sample')}, {plural(len(loaded.spec.all_judges), 'judge')}"
                )
                continue
            suite, _ = load_suite_file(path)
        except UserError as exc:
            bad += 1
            print(exc, file=sys.stderr)
            continue
        except InvalidSuite as exc:
            bad += 1
            print(*exc.lines, sep="\n", file=sys.stderr)
            continue
        needed = [name for name, default in (suite.vars or {}).items() if default is None]
        given = f"; give {', '.join(needed)} when launching (--var NAME=VALUE)" if needed else ""
        print(f"{path}: ok — suite {suite.name!r}, {plural(len(suite.evals), 'eval')}{given}")
    if bad:
        raise UserError(
            f"{bad} of {plural(len(args.files), 'file')} {'has' if bad == 1 else 'have'} problems"
        )
    return PASSED


# --- API tokens, for CI: made on the server's own database ------------------------------------------------


def add_token_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True, dest="action")
    create = actions.add_parser("create", help="make a token; prints it alone on stdout, once")
    create.add_argument("--user", required=True, help="the user the token acts as")
    create.add_argument("--name", required=True, help="what the token is for, e.g. ci")
    listing = actions.add_parser("list", help="a user's tokens: name, start, created, last used, status")
    listing.add_argument("--user", required=True)
    revoke = actions.add_parser("revoke", help="revoke a user's active tokens of that name, at once")
    revoke.add_argument("--user", required=True)
    revoke.add_argument("--name", required=True)


def _server_database() -> None:
    """Django on the server's database (DATABASE_URL, or the one `make setup` made), which must be set up:
    a token is only useful where the web app will look for it."""
    setup_django()
    from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

    database = connections[DEFAULT_DB_ALIAS]
    name = str(database.settings_dict["NAME"])
    if database.vendor == "sqlite" and name != ":memory:" and not Path(name).is_file():
        raise UserError(f"there is no database at {name}: run `make setup` first, or set DATABASE_URL")
    try:
        tables = database.introspection.table_names()
    except DatabaseError as exc:
        raise UserError(f"the database cannot be read: {str(exc).strip().splitlines()[0]}") from None
    if "runs_apitoken" not in tables:
        raise UserError("the database is not migrated: run `make setup` (or `manage.py migrate`) first")


def token(args: argparse.Namespace) -> int:
    _server_database()
    from django.contrib.auth import get_user_model

    from runs import tokens

    user = get_user_model().objects.filter(username=args.user).first()
    if user is None:
        raise UserError(f"no user named {args.user!r}")
    if args.action == "create":
        row, secret = tokens.create_token(user, args.name)
        print(secret)
        print(f"token {row.name!r} for {user.get_username()}: shown once, keep it in your CI's secrets",
              file=sys.stderr)  # fmt: skip
    elif args.action == "list":
        for row in tokens.tokens_of(user):
            used = row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "never"
            state = "active" if row.is_active else "revoked"
            print(f"{row.name}\t{row.hint}…\tcreated {row.created_at.isoformat(timespec='seconds')}\t"
                  f"last used {used}\t{state}")  # fmt: skip
    else:
        revoked = sum(tokens.revoke(user, row.pk) for row in tokens.tokens_of(user) if row.name == args.name)
        if not revoked:
            raise UserError(f"{user.get_username()} has no active token named {args.name!r}")
        print(f"revoked {plural(revoked, 'token')} named {args.name!r}", file=sys.stderr)
    return PASSED


# --- the command line --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[argparse.Namespace], int]
    epilog: str = ""


COMMANDS = {
    "run": Command(
        "run a suite and print the per-turn report",
        add_run_arguments,
        run,
        EXIT_CODES,
    ),
    "calibrate": Command(
        "judge a calibration set's samples and print how far the judge agrees with the labels",
        add_calibrate_arguments,
        calibrate,
        "exit codes:\n  0  every judge met the set's gates (min_agreement, min_kappa), or it has none\n"
        "  1  a judge missed a gate\n  2  the set is invalid or cannot be read\n"
        "  3  the endpoint failed: no judgement got a score",
    ),
    "import": Command(
        "convert another tool's suites (vibecheck, Letta Evals, AgentV, promptfoo, agtlantis, calibrate "
        "(Bolt Foundry)), every one found in the "
        "files or folders given, to evalsite suites",
        add_import_arguments,
        import_files,
        IMPORT_EXIT_CODES,
    ),
    "token": Command(
        "make, list or revoke a user's API tokens (for CI) on the server's database",
        add_token_arguments,
        token,
        "exit codes:\n  0  done\n  2  no such user or token, or the database is not set up",
    ),
    "validate": Command(
        "check suite files; each problem as file:line:col path: message",
        add_validate_arguments,
        validate,
        "exit codes:\n  0  every file is a valid suite\n  2  a file is invalid or cannot be read "
        "(the others are still checked)",
    ),
}


def command_parser(name: str, prog: str) -> argparse.ArgumentParser:
    """The parser of one command on its own, for its `manage.py` alias."""
    command = COMMANDS[name]
    parser = argparse.ArgumentParser(
        prog=prog,
        description=command.help[0].upper() + command.help[1:] + ".",
        epilog=command.epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_arguments(parser)
    parser.set_defaults(handle=command.handle)
    return parser


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="evalsite",
        description=ABOUT,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = commands.add_parser(
            name,
            help=command.help,
            description=command.help[0].upper() + command.help[1:] + ".",
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
        sub.set_defaults(handle=command.handle)
    return top


def execute(args: argparse.Namespace, prog: str) -> int:
    """Run the parsed command (`args.handle`): its exit code, and one line on stderr for a user error."""
    try:
        return args.handle(args)
    except UserError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted; no report or results were written", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Conversations still in flight hold threads that the interpreter would wait for at exit, up to a
        # request timeout each; nothing of theirs is kept, so do not wait.
        os._exit(128 + signal.SIGINT)
    except Exception:
        traceback.print_exc()
        print(
            f"{prog}: evalsite crashed, which is a bug; please report it with the lines above",
            file=sys.stderr,
        )
        return BROKEN


def main(argv: list[str] | None = None) -> int:
    return execute(parser().parse_args(argv), "evalsite")


class AliasCommand(BaseCommand):
    """`manage.py evalrun` / `manage.py evalvalidate`: a command of this module under Django's name.

    manage.py marks the process as a terminal command before Django reads the settings, so these need no
    SECRET_KEY or database either.
    """

    cli_name = ""

    @property
    def help(self) -> str:
        return f"`evalsite {self.cli_name}`: {COMMANDS[self.cli_name].help}."

    def add_arguments(self, parser):
        COMMANDS[self.cli_name].add_arguments(parser)

    def print_help(self, prog_name, subcommand):
        command_parser(self.cli_name, f"{Path(prog_name).name} {subcommand}").print_help()

    def run_from_argv(self, argv):
        # This module's parser, messages and exit codes, not BaseCommand's ("CommandError: ...", exit 1).
        prog = f"{Path(argv[0]).name} {argv[1]}"
        raise SystemExit(execute(command_parser(self.cli_name, prog).parse_args(argv[2:]), prog))

    def handle(self, *args, **options):
        # call_command(..., stdout=, stderr=) hands its streams in the options; the commands print to sys.*.
        out, err = options.pop("stdout", None) or sys.stdout, options.pop("stderr", None) or sys.stderr
        namespace = argparse.Namespace(**options, handle=COMMANDS[self.cli_name].handle)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = execute(namespace, self.cli_name)
        if code:
            raise CommandError(f"exit code {code}", returncode=code)


if __name__ == "__main__":
    # `python -m evalsite.cli` runs this file as __main__; evalsite.importing imports evalsite.cli, a second
    # copy with its own UserError. Running the imported copy keeps one set of classes for both entry points.
    from evalsite.cli import main as _main

    sys.exit(_main())
