"""`evalsite run suite.yaml` without `--server`: the suite runs here, in this process, and the per-turn
report is printed. It needs no server, database or SECRET_KEY: named endpoints are read from the database
when one was set up; `mock` and the default endpoint (OPENAI_BASE_URL, OPENAI_API_KEY) always work.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from pydantic import ValidationError

from engine import suitevars
from engine.cache import open_disk_store, roles_of
from engine.calls import SlowReporter
from engine.clients import DEFAULT, MOCK, EndpointRegistry
from engine.clients.settings import Refusals
from engine.codegrade.run import CodeRunner
from engine.cost import before_run, estimate, no_prices
from engine.endpoint_checks import (
    ModelRef,
    locator,
    model_refs,
    no_endpoint,
    timeout_warnings,
)
from engine.errors import first_error
from engine.options import apply as apply_options
from engine.outcomes import Status
from engine.report import Detail, ReportWriter
from engine.results import RESULTS_FORMAT, EvalResult, RunReport, SuiteRef
from engine.runner import run_suite
from engine.schema import Suite
from engine.source import format_path
from engine.text import plural, terminal_safe

from .common import BROKEN, UserError, collect_from_here, read_suite_file, suite_to_run
from .database import endpoint_registry
from .options import run_options
from .outputs import StreamedJSON, amount_spent, exit_code, say_costs, say_stopped, write_outputs
from .progress import Progress, Tally
from .run import PROGRESS_EVERY


def check_model_refs(
    suite: Suite, model: str | None, registry: EndpointRegistry, unread: str | None,
    refs: list[ModelRef] | None = None,
) -> None:  # fmt: skip
    """Refuse a reference that names no endpoint before anything is spent, as a launch on the server does.
    `refs`: the suite's model_refs, when the caller has them already.

    "name/model" picks the named endpoint `name`; a `name` that no endpoint has is a typo, or an id meant
    whole for the default endpoint, which "default/anthropic/claude-3.5-sonnet" says (and which OpenRouter as
    the default endpoint takes as it is: engine.endpoint_checks.goes_whole). Otherwise the run would call the
    default endpoint with a model id no one chose.
    """
    seen = set()
    for found in model_refs(suite, model) if refs is None else refs:
        ref = found.ref.strip()
        where = format_path(found.path) if found.path else "--model"
        prefix, slash, rest = ref.partition("/")
        if not slash or ref in seen:
            continue
        seen.add(ref)
        if not prefix or not rest:
            raise UserError(f"{where} `{ref}`: write a model id, `endpoint/model` or `mock`")
        message = no_endpoint(registry, ref)
        if message is None:
            continue
        if unread:  # the named endpoints could not be read: say why rather than list none
            message = (
                f"`{ref}`: no endpoint named `{prefix}` is known here, since named endpoints live in the "
                f"admin's database and {unread} (run `make setup` and add `{prefix}` in the admin, under "
                f"Endpoints → Endpoints; `default/{ref}` sends `{ref}` whole to the default endpoint)"
            )
        raise UserError(f"{where} {message}")


# The built-in endpoints' prefixes: a reference under them needs no database.
BUILT_IN_PREFIXES = (f"{DEFAULT}/", f"{MOCK}/")


def _names_one(ref: str) -> bool:
    ref = ref.strip()
    return "/" in ref and not ref.startswith(BUILT_IN_PREFIXES)


def names_an_endpoint(suite: Suite, model: str | None, refs: list[ModelRef]) -> bool:
    """Whether the run may use an endpoint the admin named: a model reference with a slash (`name/model`,
    not `default/…` nor `mock/…`) among `refs` (the suite's model_refs), or request timeouts per endpoint.
    Only then are Django's apps and the database read, and the references checked one by one."""
    if isinstance(suite.request_timeout, dict) or _names_one(model or ""):
        return True
    return any(_names_one(found.ref) for found in refs)


def bind_vars(path: Path, suite: Suite, assignments: list[str] | None) -> tuple[Suite, dict[str, str]]:
    """The suite with its variables filled from --var NAME=VALUE (else their defaults), and the values."""
    try:
        given = suitevars.parse_assignments(assignments)
        return suitevars.bind(suite, given), suitevars.values(suite.vars or {}, given)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise UserError(f"{path}: with the values given, {where}: {message}; nothing was run") from None
    except ValueError as exc:
        raise UserError(f"{path}: {exc}; nothing was run") from None


def run_here(args: argparse.Namespace) -> int:
    model = args.model
    suite, files = suite_to_run(args.file, "nothing was run")
    suite, values = bind_vars(args.file, suite, getattr(args, "vars", None))
    suite = apply_options(suite, run_options(args))
    if not (model or suite.model):
        raise UserError(f"{args.file}: no model: set `model` in the suite or pass --model")
    refs = model_refs(suite, model)  # walked once, for both questions
    named = names_an_endpoint(suite, model, refs)
    registry, unread = endpoint_registry(named=named)
    if named:  # else no reference has a slash, and each would go to the default endpoint or `mock`
        check_model_refs(suite, model, registry, unread, refs)
    if isinstance(suite.request_timeout, dict):
        located = locator(read_suite_file(args.file).decode("utf-8-sig"))
        for problem in timeout_warnings(suite, registry, located):
            print(f"note: {args.file}:{problem}", file=sys.stderr)
    model_ref = model or suite.model
    if getattr(args, "concurrency_given", True):
        registry = raise_cap(registry, model_ref, args.concurrency)
    say_estimate(suite, registry, model)
    collect_from_here()
    refusals = Refusals()
    endpoint = registry.resolve(model_ref)[0]
    iterations = [ev.iterations or suite.iterations for ev in suite.evals]
    tally = Tally(sum(iterations))
    writer = ReportWriter(getattr(args, "detail", Detail.VERBOSE))
    streamed = stream_json(args, suite, model_ref, endpoint, values)
    progress = Progress(
        tally, live=sys.stderr.isatty(), every=getattr(args, "progress_every", PROGRESS_EVERY)
    )

    def ended(result: EvalResult) -> None:
        tally.add(result)
        progress.say(writer.result(result, iterations[result.index]))
        if streamed is not None:
            streamed.add(result)

    with progress, interrupted(tally, streamed, writer.detail != Detail.QUIET):
        progress.say(writer.header(suite.name or "", model_ref, endpoint, endpoint == MOCK))
        report = run_suite(
            suite,
            registry,
            model=model,
            concurrency=args.concurrency,
            on_result=ended,
            files=files,
            on_wait=lambda wait: progress.note(
                f"{wait.endpoint}: {wait.reason}, retrying in {wait.seconds:.0f} s"
            ),
            timeout=getattr(args, "timeout", None),
            on_slow=SlowReporter(progress.note),
            slow_min_seconds=settings.EVALSITE_SLOW_CALL_SECONDS,
            # Code checks run here, in the suite's folder, with the caller's environment: it is their machine.
            code=CodeRunner(folder=args.file.parent.resolve(), inherit_env=True),
            watched=tally.playing,
            on_spend=tally.paid,
            unpriced=tally.calls_unpriced(),
            refusals=refusals,
            store=open_disk_store(cache_note(progress)) if roles_of(suite) else None,
        )
    report.vars = values or None
    print(writer.summary(report), flush=True)
    write_outputs(args, report, suite.system, streamed=streamed)
    code = exit_code(report)
    if refusals.first is None:
        say_stopped(report)
    else:  # said once, with what to do, not per conversation; the rest were not started
        said = str(refusals.first).rstrip(".")
        fix = f"remove or change {refusals.first.where} (in the suite, or the --set that gives it) and run again"
        print(terminal_safe(f"{said}; no more conversations were started: {fix}"), file=sys.stderr)
        return BROKEN
    if code == BROKEN:
        say_errors(report)
    return code


def cache_note(progress: Progress):
    """How a problem with the local response cache is said: once, as a note above the progress line."""
    return lambda text: progress.note(f"note: {text}")


def say_estimate(suite: Suite, registry: EndpointRegistry, model: str | None, variants=None) -> None:
    """What the run may cost, and what that rests on, before anything is spent (engine.cost.before_run: when
    some endpoint it calls has prices, or a limit is set). `variants`: a matrix's, as (name, its suite, its
    model): a line each, and their sum."""
    variants = variants or [("", suite, model)]
    found = [(name, estimate(played, registry.endpoint_of, ref)) for name, played, ref in variants]
    say_costs(before_run(found, suite.max_cost))


@contextmanager
def interrupted(
    tally: Tally, streamed: StreamedJSON | list[StreamedJSON | None] | None, shown: bool
) -> Iterator[None]:
    """Ctrl-C: what the run kept, for the line the command ends with (evalsite.cli.main). `streamed`: the
    --json file, or a matrix's, one a variant."""
    try:
        yield
    except KeyboardInterrupt:
        spent = amount_spent(tally.spend, tally.unpriced)
        why = f" ({no_prices(tally.unpriced)})" if tally.unpriced else ""
        kept = f"{tally.done} of {plural(tally.total, 'conversation')} had ended, {spent} spent{why}"
        written = [one for one in (streamed if isinstance(streamed, list) else [streamed]) if one]
        for one in written:
            one.interrupted()
        files = [one.path for one in written]
        where = ["printed above"] if shown else []
        where += [f"in {', '.join(map(str, files))} with status `cancelled`"] if files else []
        if tally.done and where:
            kept += f" ({', and '.join(where)})"
        raise KeyboardInterrupt(f"{kept}; no summary was written") from None


def stream_json(
    args: argparse.Namespace,
    suite: Suite,
    model_ref: str,
    endpoint: str,
    values: dict[str, str],
    path: Path | None = None,
) -> StreamedJSON | None:
    """--json (or `path`, a matrix variant's), written as conversations end; None when it was not asked for,
    or is no regular file (a pipe, /dev/stdout), which gets the whole document at the end."""
    path = path or getattr(args, "json_path", None)
    if path is None or (path.exists() and not path.is_file()):
        return None
    head = {
        "format": RESULTS_FORMAT,
        "suite": SuiteRef(name=suite.name or "").model_dump(mode="json"),
        "model": model_ref,
        "endpoint": endpoint,
        "mock": endpoint == MOCK,
        "vars": values or None,
        # Named as the calls that went to them end (StreamedJSON.add).
        "unpriced": [],
        "cost_known": True,
    }
    return StreamedJSON(path, head)


def say_errors(report: RunReport) -> None:
    """Why the run is exit 3, on stderr: the first error of each kind, and what to check for that kind."""
    errors = [result for result in report.evals if result.status == Status.ERROR]
    unfinished = [result for result in errors if ended_unfinished(result)]
    errors = [result for result in errors if not ended_unfinished(result)]
    total = plural(len(report.evals), "conversation")
    graders = [result for result in errors if (result.error or "").startswith("code grader ")]
    errors = [result for result in errors if result not in graders]
    by_advice: dict[str, list[EvalResult]] = {}
    for result in errors:
        by_advice.setdefault(endpoint_advice(result.error or ""), []).append(result)
    for advice, alike in by_advice.items():
        print(
            terminal_safe(f"{len(alike)} of {total} ended in an endpoint error ({alike[0].error}); {advice}"),
            file=sys.stderr,
        )
    if graders:
        print(
            terminal_safe(
                f"{len(graders)} of {total} got no verdict from a code grader ({graders[0].error})",
            ),
            file=sys.stderr,
        )
    if unfinished:
        print(
            terminal_safe(
                f"{len(unfinished)} of {total} ended at a reply that did not finish "
                f"({unfinished[0].turns[-1].incomplete}); `incomplete_reply: fail` or `grade` in the suite "
                "counts such replies otherwise",
            ),
            file=sys.stderr,
        )


WHERE_URL = "OPENAI_BASE_URL, or the endpoint in the admin"
WHERE_KEY = "OPENAI_API_KEY, or the variable the endpoint in the admin names"


def endpoint_advice(error: str) -> str:
    """What to check after an endpoint error, by its kind: a rate limit is no matter of URL or key, nor is a
    refused request one of the key."""
    status = re.search(r"\bHTTP (\d{3}) from ", error)
    code = int(status.group(1)) if status else None
    if code == 429:
        return (
            "the endpoint kept rate-limiting: lower --concurrency (or the endpoint's concurrency), allow a "
            "longer retry budget (EVALSITE_RETRY_SECONDS, or the endpoint's retry for), or check the "
            "account's rate limits and quota"
        )
    if code in (401, 403):
        return f"check the endpoint's key ({WHERE_KEY})"
    if code == 404:
        return f"check the endpoint's URL ({WHERE_URL}) and the model's name"
    if code is not None and code < 500:
        return (
            "the endpoint refused the request: check the model's name and the suite's model_settings "
            "against what the endpoint accepts"
        )
    if code is not None:
        return "the endpoint kept failing for the whole retry budget: it may be down or overloaded; try later"
    if " timed out after " in error:
        return "the endpoint did not answer in time: allow longer (--timeout, or the suite's request_timeout)"
    if "sent an unreadable reply" in error:
        return (
            f"the endpoint sent no chat completion: check that its URL ({WHERE_URL}) is an OpenAI-style API"
        )
    if error.startswith("cannot reach "):
        return f"check the endpoint's URL ({WHERE_URL}) and that it is up"
    return (
        "check the endpoint's URL and key (OPENAI_BASE_URL and OPENAI_API_KEY, or the endpoint in the admin)"
    )


def ended_unfinished(result: EvalResult) -> bool:
    """An error at a reply that did not finish (incomplete_reply: error), not at the endpoint."""
    last = result.turns[-1] if result.turns else None
    return last is not None and last.incomplete is not None and not last.checks and last.passed is None


def raise_cap(registry: EndpointRegistry, model_ref: str, concurrency: int) -> EndpointRegistry:
    """The registry with room for the --concurrency given: the default endpoint's cap raised to it; a named
    endpoint's cap is the admin's to set, so one below it is refused before anything runs."""
    name, _ = registry.resolve(model_ref)
    cap = registry.max_concurrency(name)
    if concurrency <= cap:
        return registry
    if name == DEFAULT:
        return replace(registry, default=replace(registry.default, max_concurrency=concurrency))
    if name == MOCK:
        raise UserError(f"--concurrency {concurrency}: the mock endpoint plays at most {cap} at once")
    raise UserError(
        f"--concurrency {concurrency}: the endpoint {name} allows {cap} at once (Endpoints → Endpoints → {name} → "
        f"max concurrency in the admin); raise it there or pass --concurrency {cap}; nothing was run"
    )
