"""What `evalsite run` sets over its suite from the command line (engine.options): generation settings
(`--set`), the response cache (`--cache`, `--no-cache`) and the cost limit (`--max-cost`)."""

from __future__ import annotations

import argparse

from engine.options import RunOptions


def run_options(args: argparse.Namespace) -> RunOptions:
    """What the command line sets over the suite (engine.options): generation settings, the cache, the cost
    limit. A run here applies them to the suite it loads; a run on a server sends them with the launch."""
    given: dict = {"max_cost": getattr(args, "max_cost", None)}
    if getattr(args, "cache", None) is not None:  # --cache: every role on, --no-cache: every role off
        given["cache"] = args.cache
    return RunOptions.model_validate(given)
