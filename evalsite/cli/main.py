"""The `evalsite` command line: its commands, one module each, under one parser.

A user's mistake is one line on stderr and exit code 2; a traceback means a bug in evalsite.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from . import api_tokens, calibrate, importing, run, validate
from .common import BROKEN, UserError

ABOUT = """\
Multi-turn LLM evaluations from the terminal, with the web app's engine.

Needs no server, database or SECRET_KEY. `mock` and the default endpoint (OPENAI_BASE_URL,
OPENAI_API_KEY) always work; named endpoints (`name/model`) are read from the database that
`make setup` creates, or from DATABASE_URL."""


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[argparse.Namespace], int]
    epilog: str = ""

    @property
    def description(self) -> str:
        return self.help[0].upper() + self.help[1:] + "."


def command_parser(command: Command, prog: str) -> argparse.ArgumentParser:
    """The parser of one command on its own, for its `manage.py` alias."""
    return _filled(argparse.ArgumentParser(prog=prog, **_described(command)), command)


def _described(command: Command) -> dict:
    return {
        "description": command.description,
        "epilog": command.epilog,
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }


def _filled(parser: argparse.ArgumentParser, command: Command) -> argparse.ArgumentParser:
    command.add_arguments(parser)
    parser.set_defaults(handle=command.handle)
    return parser


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


COMMANDS = {
    command.name: command
    for command in (
        Command(
            "run",
            "run a suite and print the per-turn report",
            run.add_run_arguments,
            run.run,
            run.EXIT_CODES,
        ),
        Command(
            "calibrate",
            "judge a calibration set's samples and print how far the judge agrees with the labels",
            calibrate.add_calibrate_arguments,
            calibrate.calibrate,
            "exit codes:\n  0  every judge met the set's gates (min_agreement, min_kappa), or it has none\n"
            "  1  a judge missed a gate\n  2  the set is invalid or cannot be read\n"
            "  3  the endpoint failed: no judgement got a score",
        ),
        Command(
            "import",
            "convert another tool's suites (vibecheck, Letta Evals, AgentV, promptfoo, agtlantis, calibrate "
            "(Bolt Foundry)), every one found in the files or folders given, to evalsite suites",
            importing.add_import_arguments,
            importing.import_files,
            importing.IMPORT_EXIT_CODES,
        ),
        Command(
            "token",
            "make, list or revoke a user's API tokens (for CI) on the server's database",
            api_tokens.add_token_arguments,
            api_tokens.token,
            "exit codes:\n  0  done\n  2  no such user or token, or the database is not set up",
        ),
        Command(
            "validate",
            "check suite files; each problem as file:line:col path: message",
            validate.add_validate_arguments,
            validate.validate,
            "exit codes:\n  0  every file is a valid suite\n  2  a file is invalid or cannot be read "
            "(the others are still checked)",
        ),
    )
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="evalsite",
        description=ABOUT,
        epilog=run.EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        _filled(commands.add_parser(name, help=command.help, **_described(command)), command)
    return top


def main(argv: list[str] | None = None) -> int:
    return execute(parser().parse_args(argv), "evalsite")
