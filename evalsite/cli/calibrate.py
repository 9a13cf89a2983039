"""`evalsite calibrate set.yaml`: judge a calibration set's samples, say how far each judge agrees with the
labels."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from engine.cache import open_disk_store
from engine.calibration.report import format_calibration
from engine.calibration.run import run_calibration
from engine.endpoint_checks import no_endpoint
from engine.schema.settings import CacheRoles

from .common import (
    BROKEN,
    FAILED,
    PASSED,
    InvalidSuite,
    UserError,
    check_writable,
    load_calibration_file,
    positive_int,
    problem_line,
)
from .database import endpoint_registry
from .local import raise_cap


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
        help="judge calls in flight at once (default 10); on the default endpoint it raises the cap to N, a "
        "named endpoint whose cap is lower refuses it",
    )  # fmt: skip
    parser.add_argument(
        "--cache", action=argparse.BooleanOptionalAction, default=None,
        help="answer each judge's first answer about a sample from the local response cache (its repeats ask "
        "again unless the set says `cache: {judge: true, repeats: true}`); --no-cache: never, whatever the set says",
    )  # fmt: skip


def calibrate(args: argparse.Namespace) -> int:
    if args.json_path:
        check_writable(args.json_path)
    try:
        loaded = load_calibration_file(args.file)
    except InvalidSuite as exc:
        print(*exc.lines, sep="\n", file=sys.stderr)
        raise UserError("the calibration set has problems; nothing was judged") from None
    for warning in loaded.warnings:
        print(f"warning: {problem_line(args.file, warning)}", file=sys.stderr)
    nameless = [judge.name for judge in loaded.spec.all_judges if not judge.model]
    if nameless and not args.model:
        raise UserError(f"{args.file}: judge {nameless[0]!r} names no `model`; set one or pass --model")
    registry, unread = endpoint_registry()
    for judge in loaded.spec.all_judges:  # refused as `evalsite run` refuses it (check_model_refs)
        ref = judge.model or args.model
        if message := no_endpoint(registry, ref):
            why = f" ({unread})" if unread else ""
            raise UserError(f"judge {judge.name!r} {message}{why}")
    for judge in loaded.spec.all_judges:  # a --concurrency given is what runs, or is refused (run's rule)
        registry = raise_cap(registry, judge.model or args.model, args.concurrency)
    if args.cache is not None:
        cache = CacheRoles(judge=True) if args.cache else None
        loaded = replace(loaded, spec=loaded.spec.model_copy(update={"cache": cache}))
    store = None
    if (loaded.spec.cache and loaded.spec.cache.judge) or args.cache:
        store = open_disk_store(lambda text: print(f"note: {text}", file=sys.stderr))
    report = run_calibration(
        loaded, registry, judge_model=args.model, concurrency=args.concurrency, store=store
    )
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
