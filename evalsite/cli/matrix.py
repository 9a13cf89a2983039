"""`evalsite run --model a,b,c` (or `--variant` repeated): one suite against several models, or settings
variants of one (`gpt-4o-mini@temperature=0.7`, engine.matrix), played here together, each --concurrency
at a time, then the grid of evals × variants on the terminal and the exports a run has: JUnit with a
testsuite per variant, a CSV of the grid, a Markdown table."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from engine.clients import DEFAULT, MOCK
from engine.exports import FORMATS, junit_xml
from engine.matrix import (
    Variant,
    build_grid,
    column_of_report,
    end_line,
    grid_csv,
    grid_markdown,
    grid_text,
    matrix_junit,
)
from engine.options import RunOptions
from engine.options import apply as apply_options
from engine.outcomes import Status
from engine.report import never_started
from engine.results import RunReport
from engine.text import plural, terminal_safe

from .common import BROKEN, FAILED, PASSED, UserError, suite_to_run
from .following import Followed, follow_all
from .options import run_options
from .outputs import exit_code, say_costs, say_stopped
from .remote import Server, _detail, followed, launch_body, settled_results
from .run import PROGRESS_EVERY


def json_paths(path: Path, variants: list[Variant]) -> list[Path]:
    """--json OUT.json for a matrix: a results file per variant beside it, OUT.<variant>.json. Names that
    read alike once made file-safe (`x/y` and `x-y`, stop sequences that differ in punctuation) are told
    apart by their place in the list, so no variant's file is written over another's."""
    slugs = [_slug(variant.name) or str(n) for n, variant in enumerate(variants)]
    taken = [slug.lower() for slug in slugs]  # a file system may not tell case apart
    return [
        path.with_name(f"{path.stem}.{slug if taken.count(slug.lower()) == 1 else f'{slug}-{n + 1}'}.json")
        for n, slug in enumerate(slugs)
    ]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def say_variant_errors(report: RunReport, name: str) -> None:
    """Why a variant's cells say error, on stderr: how many, and the first one's reason (the grid has no room
    for it)."""
    errors = [result for result in report.evals if result.status == Status.ERROR]
    if errors:
        print(
            terminal_safe(
                f"{name}: {len(errors)} of {plural(len(report.evals), 'conversation')} ended in an error "
                f"(the first: {errors[0].error or errors[0].verdict})"
            ),
            file=sys.stderr,
        )


def shared_caps(registry, variants: list[Variant], concurrency: int) -> str:
    """What a named endpoint's cap holds the variants on it to, when it is less than they would play: they
    share its slots (the default endpoint's is raised for each, matrix_cap)."""
    on: dict[str, int] = {}
    for variant in variants:
        name = registry.resolve(variant.model)[0]
        if name not in (DEFAULT, MOCK):
            on[name] = on.get(name, 0) + 1
    held = [
        f"{name} allows {cap} at once, shared by its {count} variants"
        for name, count in on.items()
        if count * concurrency > (cap := registry.max_concurrency(name))
    ]
    return f" ({'; '.join(held)})" if held else ""


def run_matrix_here(args: argparse.Namespace, variants: list[Variant]) -> int:
    # A run here needs the server's dependencies (Django for named endpoints); one on a server does not.
    from django.conf import settings

    from engine.cache import open_disk_store, roles_of
    from engine.calls import SlowReporter
    from engine.codegrade.run import CodeRunner
    from engine.runner import Play, run_plays

    from .database import endpoint_registry
    from .local import bind_vars, cache_note, check_model_refs, interrupted, say_estimate, stream_json
    from .progress import Progress, Tally

    suite, files = suite_to_run(args.file, "nothing was run")
    suite, values = bind_vars(args.file, suite, getattr(args, "vars", None))
    suite = apply_options(suite, run_options(args))
    registry, unread = endpoint_registry()
    for variant in variants:  # every reference and cap checked before the first variant spends anything
        check_model_refs(suite, variant.model, registry, unread)
    if getattr(args, "concurrency_given", True):
        registry = matrix_cap(registry, variants, args.concurrency)
    played = [apply_options(suite, RunOptions(model_settings=variant.model_settings)) for variant in variants]
    # One progress line for the whole matrix: every variant's conversations, as they end.
    tally = Tally(len(variants) * sum(ev.iterations or suite.iterations for ev in suite.evals))
    every = getattr(args, "progress_every", PROGRESS_EVERY)
    say_estimate(
        suite,
        registry,
        None,
        [(variant.name, one, variant.model) for variant, one in zip(variants, played, strict=True)],
    )
    json_path = getattr(args, "json_path", None)
    paths = json_paths(json_path, variants) if json_path is not None else [None] * len(variants)
    streamed = [
        stream_json(args, suite, variant.model, registry.resolve(variant.model)[0], values, path)
        if path is not None
        else None
        for variant, path in zip(variants, paths, strict=True)
    ]
    with (
        Progress(tally, live=sys.stderr.isatty(), every=every) as progress,
        interrupted(tally, streamed, False),
    ):
        names = ", ".join(variant.name for variant in variants)
        progress.say(
            f"Playing {len(variants)} variants together, {args.concurrency} at a time each: {names}"
            + shared_caps(registry, variants, args.concurrency)
        )

        def ended(number: int, variant: Variant):
            def say(report: RunReport) -> None:
                totals = report.totals
                progress.say(
                    end_line(
                        f"[{number}/{len(variants)}] {variant.name}",
                        totals.passed,
                        totals.failed,
                        totals.error,
                        totals.evals,
                        stop_reason=report.stop_reason or "",
                        cancelled=totals.cancelled,
                        not_started=sum(map(never_started, report.evals)),
                    )  # fmt: skip
                )

            return say

        # One for all: they share its folder.
        store = open_disk_store(cache_note(progress)) if any(map(roles_of, played)) else None
        plays = [
            Play(
                variant_suite,
                registry,
                model=variant.model,
                concurrency=args.concurrency,
                files=files,
                on_result=ended_one(tally, json_file),
                on_ended=ended(number, variant),
                watched=tally.playing,
                on_spend=tally.paid,
                unpriced=tally.calls_unpriced(),
                timeout=getattr(args, "timeout", None),
                on_wait=lambda wait: progress.note(
                    f"{wait.endpoint}: {wait.reason}, retrying in {wait.seconds:.0f} s"
                ),
                on_slow=SlowReporter(progress.note),
                slow_min_seconds=settings.EVALSITE_SLOW_CALL_SECONDS,
                code=CodeRunner(folder=args.file.parent.resolve(), inherit_env=True),
                store=store if roles_of(variant_suite) else None,
            )
            for number, (variant, variant_suite, json_file) in enumerate(
                zip(variants, played, streamed, strict=True), 1
            )
        ]
        reports = run_plays(plays)
    for report in reports:
        report.vars = values or None
    columns = [
        column_of_report(str(number), variant.name, report)
        for number, (variant, report) in enumerate(zip(variants, reports, strict=True), 1)
    ]
    return finish(args, variants, reports, columns, suite.system, streamed)


def ended_one(tally, json_file):
    """A variant's conversation ended: counted, and written to the variant's --json file as it ends."""
    if json_file is None:
        return tally.add

    def ended(result) -> None:
        tally.add(result)
        json_file.add(result)

    return ended


def matrix_cap(registry, variants: list[Variant], concurrency: int):
    """The registry with room for `concurrency` conversations of each variant: a named endpoint's cap must
    allow one variant's (it bounds all of them on it together, as on a server); the default endpoint's is
    raised to `concurrency` for each variant on it."""
    from .local import raise_cap

    for variant in variants:
        raise_cap(registry, variant.model, concurrency)  # refuses a named endpoint's lower cap
    on_default = sum(registry.resolve(variant.model)[0] == DEFAULT for variant in variants)
    if not on_default:
        return registry
    cap = max(registry.default.max_concurrency, concurrency * on_default)
    return replace(registry, default=replace(registry.default, max_concurrency=cap))


def finish(args, variants: list[Variant], reports, columns, system: str | None, streamed=None) -> int:
    """The grid on the terminal, the files asked for, and the exit code: each variant's as a run of its
    own (gates too), the worst of them. `streamed`: the variants' --json files written as they played."""
    grid = build_grid(columns)
    print()
    print(terminal_safe(grid_text(grid)))
    write_matrix_outputs(args, variants, reports, grid, system, streamed)
    for variant, report in zip(variants, reports, strict=True):
        say_stopped(report, variant.name)
        say_variant_errors(report, variant.name)
    codes = {exit_code(report) for report in reports}
    return BROKEN if BROKEN in codes else FAILED if FAILED in codes else PASSED


WRITTEN = {"junit": "JUnit XML (a testsuite per variant)", "csv": "CSV grid", "md": "Markdown table"}


def write_matrix_outputs(args, variants, reports, grid, system, streamed=None) -> None:
    json_path = getattr(args, "json_path", None)
    if json_path is not None:
        streamed = streamed or [None] * len(variants)
        for path, report, json_file in zip(json_paths(json_path, variants), reports, streamed, strict=True):
            if json_file is not None:
                json_file.finish(report)
            else:
                _write(
                    path,
                    "--json",
                    json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n",
                )
            print(f"Wrote the results (JSON) to {path}")
    writers = {
        "junit": lambda: matrix_junit(
            [
                (variant.name, junit_xml(report, system))
                for variant, report in zip(variants, reports, strict=True)
            ]
        ),
        "csv": lambda: grid_csv(grid),
        "md": lambda: grid_markdown(grid),
    }
    for key, write in writers.items():
        option = FORMATS[key].cli
        path = getattr(args, option.dest, None)
        if path is not None:
            _write(path, option.flag, write())
            print(f"Wrote the matrix's {WRITTEN[key]} to {path}")


def _write(path: Path, option: str, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{option} {path}: {exc.strerror or exc}", code=BROKEN) from None


def run_matrix_on_server(args: argparse.Namespace, variants: list[Variant]) -> int:
    """POST /api/matrices with the suite and its files, follow every variant's run at once until all have
    ended (the server plays them side by side; following.py), then the same grid and files as a matrix played
    here."""
    token = (args.token or os.environ.get("EVALSITE_TOKEN", "")).strip()
    if not token:
        raise UserError("--server needs an API token: set EVALSITE_TOKEN (or pass --token)")
    if args.baseline or args.fail_on_regression or getattr(args, "fail_on_new_failures", False):
        raise UserError("--baseline and the --fail-on-* gates compare one run: give one --model with them")
    suite, files = suite_to_run(args.file, "nothing was sent")
    server = Server(args.server, token)
    body = {
        **launch_body(args, files),
        "variants": [
            {"model": v.model, "label": v.label or None,
             "model_settings": v.model_settings.given() if v.model_settings else None}
            for v in variants
        ],
    }  # fmt: skip
    status, launched = server.launch(body, "/api/matrices")  # sent again with its key if it got no answer
    if status not in (200, 201):  # 200: a retry's answer, the matrix the first try made
        raise UserError(f"the server did not start the matrix ({status}): {_detail(launched)}")
    print(f"Matrix {launched['id']} of {launched['suite']} v{launched['version']}: {launched['url']}",
          file=sys.stderr, flush=True)  # fmt: skip
    say_costs(launched.get("estimate") or [])  # worked out by the server, as a matrix played here says it
    if shared := [each["text"] for each in launched.get("shared_slots") or []]:
        print(terminal_safe(f"The variants on one endpoint share its slots: {'; '.join(shared)}"),
              file=sys.stderr, flush=True)  # fmt: skip
    runs = [variant["run"]["id"] for variant in launched["variants"]]
    labels = [variant["label"] for variant in launched["variants"]]
    # Each run is named as the local matrix names a variant: its number and name, or the figures of one
    # variant could not be told from another's.
    followed_runs = [
        Followed(run_id, terminal_safe(f"[{n}/{len(runs)}] {label}"))
        for n, (run_id, label) in enumerate(zip(runs, labels, strict=True), 1)
    ]
    try:
        with followed("the matrix", launched["url"]):
            follow_all(server, followed_runs, every=getattr(args, "progress_every", PROGRESS_EVERY))
    except KeyboardInterrupt:
        for run_id in runs:
            server.call("POST", f"/api/runs/{run_id}/cancel")
        print(f"\ncancelled the matrix's runs on the server: {launched['url']}", file=sys.stderr)
        raise
    with followed("the matrix", launched["url"]):
        reports = [settled_results(server, run_id) for run_id in runs]
    # A run its cost limit stopped is no cancel: its own line says why (finish, say_stopped).
    cancelled = [label for label, run in zip(labels, followed_runs, strict=True) if run.cancelled]
    for label in cancelled:
        print(f"{label}: its run was cancelled on the server", file=sys.stderr)
    columns = [
        column_of_report(run_id, label, r) for run_id, label, r in zip(runs, labels, reports, strict=True)
    ]
    code = finish(args, variants, reports, columns, suite.system)
    print(f"Matrix page: {launched['url']}")
    return BROKEN if cancelled else code
