"""`evalsite run suite.yaml`: run a suite here and print the per-turn report (local.py), or on a server
(remote.py).

This module holds the command's arguments and picks one of the two. It imports neither until it has picked:
a run on a server needs only the client's dependencies (`pip install evalsite`), a run here the server's
(`pip install 'evalsite[server]'`).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
from pathlib import Path

from engine.matrix import Variant, VariantError, parse_variants
from engine.report import Detail
from engine.schema.suite import TIMEOUT_MAX, TIMEOUT_MIN

from .common import UserError, positive_int
from .outputs import add_export_arguments, check_outputs

# Conversations in flight at once when --concurrency is not given.
DEFAULT_CONCURRENCY = 10
# Seconds between progress lines when stderr is not a terminal: a CI log that moves, without flooding it.
PROGRESS_EVERY = 10.0


def progress_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 for never)")
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


def usd(text: str) -> float:
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of US dollars above 0, e.g. 5 or 0.50")
    return value


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the suite (YAML); attached files are read from its folder")
    parser.add_argument(
        "--model",
        metavar="M",
        help="model to run instead of the suite's: a model id on the default endpoint, endpoint/model, "
        "or mock (without `judge` in the suite, also the judge). Several, comma-separated (a,b,c), compare "
        "them in one matrix; `model@temperature=0.7@seed=1` is a settings variant of a model",
    )
    parser.add_argument(
        "--variant", dest="variants", action="append", default=[], metavar="MODEL[@KEY=VALUE...]",
        help="one more variant for the matrix, as --model takes them but one each (a value may hold a comma: "
        "`m@stop=[',']`); repeat for each",
    )  # fmt: skip
    parser.add_argument(
        "--json",
        dest="json_path",
        type=Path,
        metavar="OUT.json",
        help="also write the results here (format evalsite.results/1); a run here writes each conversation "
        "as it ends, so a run cut short leaves those on disk (status `running`), and the whole document at "
        "the end",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"conversations in flight at once (default {DEFAULT_CONCURRENCY}, within the endpoint's cap). "
        "Given, it raises the default endpoint's cap (EVALSITE_DEFAULT_CONCURRENCY) to N; a named endpoint "
        "whose max concurrency in the admin is lower refuses it and nothing runs. With --server, the server's "
        "caps decide: more than the endpoint allows there is refused (exit 2). With several models (a "
        "matrix), N for each: they play together",
    )
    detail = parser.add_mutually_exclusive_group()
    detail.add_argument(
        "--verbose", dest="detail", action="store_const", const=Detail.VERBOSE, default=Detail.COMPACT,
        help="print every turn of every conversation (by default a conversation that passed is one line, and "
        "only the others are printed turn by turn)",
    )  # fmt: skip
    detail.add_argument(
        "--quiet", dest="detail", action="store_const", const=Detail.QUIET,
        help="print the summary alone",
    )  # fmt: skip
    parser.add_argument(
        "--progress-every", type=progress_seconds, default=PROGRESS_EVERY, metavar="SECONDS",
        help="in a run here or a matrix on a server, with stderr not a terminal (CI), print a progress line there "
        f"every SECONDS (default {PROGRESS_EVERY:g}; 0: never); on a terminal a live line shows it instead",
    )  # fmt: skip
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
    parser.add_argument(
        "--max-cost", type=usd, metavar="USD",
        help="stop the run once it has spent this much (over the suite's max_cost): no conversation starts and "
        "those playing stop before their next model call, their turns kept; the run exits 3 with `stopped: cost "
        "limit $X reached`",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a generation setting for the model under test, over the suite's model_settings: temperature, "
        "max_tokens, max_completion_tokens, top_p, seed, stop, response_format, reasoning_effort, "
        "extra_body.KEY, extra_headers.NAME; judge.KEY and user.KEY set the judge's and the simulated user's. "
        "Values are YAML: --set temperature=0.2 --set stop='[\"END\"]'. Repeat for each",
    )  # fmt: skip
    parser.add_argument(
        "--cache", action=argparse.BooleanOptionalAction, default=None,
        help="answer calls made before from the response cache (the model's, judges', simulated users'), over "
        "the suite's `cache`; here in ~/.cache/evalsite (XDG_CACHE_HOME), on a server in its own store",
    )  # fmt: skip
    add_export_arguments(parser)
    server = parser.add_argument_group(
        "on a server",
        "Run the suite on an evalsite server instead of here: its workers, endpoints and keys. In CI (or with "
        "--ref) the suite and its attached files are kept there under the branch or commit, never as the "
        "suite's latest version; otherwise they are saved as the next version of your suite of that name.",
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
        "--ref", metavar="REF",
        help="the branch, tag or commit this suite comes from; default: read from the CI's environment "
        "(GitHub Actions, GitLab CI, or git in any other CI or wherever no terminal is attached)",
    )  # fmt: skip
    server.add_argument(
        "--as-latest", action="store_true",
        help="save the suite as its next version, which the editor then shows, even where no terminal is "
        "attached or a CI is detected (a script of your own); from a terminal outside CI this is the default",
    )  # fmt: skip
    server.add_argument(
        "--fail-on-regression", action="store_true",
        help="gate on regressions alone: exit 1 when an eval that passed in --baseline does not pass now, "
        "else 0 even if other evals fail (each is listed with its reason)",
    )  # fmt: skip
    server.add_argument(
        "--fail-on-new-failures", action="store_true",
        help="gate on new evals: exit 1 when an eval the baseline does not have fails (without a baseline, "
        "any eval failing)",
    )  # fmt: skip


def variants_of(args: argparse.Namespace) -> list[Variant]:
    """What --model (comma-separated) and each --variant (one each, so a setting may hold a comma) name."""
    try:
        named = parse_variants([args.model] if args.model else [])
        return named + parse_variants(getattr(args, "variants", None) or [], split=False)
    except VariantError as exc:
        raise UserError(f"--model: {exc}") from None


def run(args: argparse.Namespace) -> int:
    model = args.model
    if model is not None and not model.strip():
        raise UserError("--model is empty: give a model id, `endpoint/model` or `mock`")
    check_outputs(args)
    variants = variants_of(args)
    matrix = len(variants) > 1 or any(variant.model_settings for variant in variants)
    if variants and not matrix:  # one model, from --model or a lone --variant
        args.model = variants[0].model
    # A --concurrency given is a demand (a run here raises or refuses the cap for it); the default is not.
    args.concurrency_given = args.concurrency is not None
    if args.concurrency is None:
        args.concurrency = DEFAULT_CONCURRENCY
    if getattr(args, "server", None):
        if getattr(args, "timeout", None) is not None:
            raise UserError(
                "--timeout applies to a run here; on a server, set `request_timeout` in the suite (or the "
                "endpoint's timeout in the server's admin)"
            )
        if matrix:
            if len(variants) < 2:
                raise UserError(
                    "`model@key=value` alone plays here; on a server, give one model's settings in the suite's "
                    "`model_settings`, or compare two variants or more"
                )
            from .matrix import run_matrix_on_server

            return run_matrix_on_server(args, variants)
        from .remote import run_on_server

        gc.enable()  # a run on a server loads nothing large here (evalsite.cli.main paused it for a run here)
        return run_on_server(args)
    if any(
        getattr(args, name, None)
        for name in ("baseline", "fail_on_regression", "fail_on_new_failures", "ref")
    ):
        raise UserError(
            "--baseline, --ref, --fail-on-regression and --fail-on-new-failures need a run on a server: "
            "add --server"
        )
    if matrix:
        from .matrix import run_matrix_here

        return run_matrix_here(args, variants)
    from .local import run_here

    return run_here(args)
