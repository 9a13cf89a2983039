"""The `evalsite` command line: its commands, one module each, under one parser.

A user's mistake is one line on stderr and exit code 2; a traceback means a bug in evalsite.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

try:
    from django.core.exceptions import ImproperlyConfigured
except ImportError:  # the client install has no Django, and so no server settings to misread

    class ImproperlyConfigured(Exception):
        pass


from .common import BROKEN, INVALID, UserError

ABOUT = """\
Multi-turn LLM evaluations from the terminal, with the web app's engine.

Needs no server, database or SECRET_KEY. `mock` and the default endpoint (OPENAI_BASE_URL,
OPENAI_API_KEY) always work; named endpoints (`name/model`) are read from the database that
`make setup` creates, or from DATABASE_URL."""


@dataclass(frozen=True)
class Command:
    """One command, its module loaded by name when it runs (as Django loads management commands): `validate`
    then never pays for the model clients that `run` needs."""

    name: str
    help: str
    module: str  # under evalsite.cli
    add_arguments_name: str
    handle_name: str
    epilog: str = ""
    # Whether the command keeps the cyclic garbage collector paused while it loads (see main): `run` turns
    # it back on for the conversations, `validate` ends first. The others turn it on as they start.
    loads_paused: bool = False

    @property
    def add_arguments(self) -> Callable[[argparse.ArgumentParser], None]:
        return getattr(import_module(f"evalsite.cli.{self.module}"), self.add_arguments_name)

    @property
    def handle(self) -> Callable[[argparse.Namespace], int]:
        return getattr(import_module(f"evalsite.cli.{self.module}"), self.handle_name)

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
    parser.set_defaults(handle=command.handle, loads_paused=command.loads_paused)
    return parser


def execute(args: argparse.Namespace, prog: str) -> int:
    """Run the parsed command (`args.handle`): its exit code, and one line on stderr for a user error."""
    if not getattr(args, "loads_paused", False):
        gc.enable()
    try:
        return args.handle(args)
    except UserError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.code
    except (
        ImproperlyConfigured
    ) as exc:  # a setting in the environment that cannot be read: the caller's to fix
        print(f"{prog}: {exc}", file=sys.stderr)
        return INVALID
    except KeyboardInterrupt as exc:
        # A command that kept something of its work says what in the interrupt it raises again.
        kept = "; ".join(map(str, exc.args)) or "no report or results were written"
        print(f"\n{prog}: interrupted; {kept}", file=sys.stderr, flush=True)
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


RUN_EXIT_CODES = """\
exit codes:
    0  the run passed: every eval passed (with gates: every gate held)
    1  the run did not pass: an eval failed, or a gate did
    2  nothing was run: the suite is invalid or cannot be read, or the command is wrong
       (a bad --model, a --json path that cannot be written, a --concurrency above a named
       endpoint's max concurrency)
    3  the endpoint or the machine failed: a conversation ended in an endpoint error
       (unreachable, HTTP 401, every retry spent), or evalsite crashed; or the run reached
       its cost limit (--max-cost, the suite's max_cost) and stopped with evals not played
       or played in part;
       or, with --server, the run was launched and then lost (the token revoked while it
       polls, the server away): it goes on on the server, at the URL the last line names
  130  interrupted (Ctrl-C)

When some evals fail and others end in an endpoint error, the exit code is 3: the run's result
is unknown until the endpoint works (the run's status is `error`, as in the web app).

With --server and a gate, only the gate decides between 0 and 1 (3 still wins; so does a run
cancelled on the server):
  --fail-on-regression    1 when an eval that passed in --baseline does not pass now
  --fail-on-new-failures  1 when an eval the baseline does not have fails
Every failing eval is listed on stderr with its reason: regressions, new failures, the others."""

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

COMMANDS = {
    command.name: command
    for command in (
        Command(
            "run",
            "run a suite and print the per-turn report",
            "run",
            "add_run_arguments",
            "run",
            RUN_EXIT_CODES,
            loads_paused=True,
        ),
        Command(
            "calibrate",
            "judge a calibration set's samples and print how far the judge agrees with the labels",
            "calibrate",
            "add_calibrate_arguments",
            "calibrate",
            "exit codes:\n  0  every judge met the set's gates (min_agreement, min_kappa), or it has none\n"
            "  1  a judge missed a gate\n  2  the set is invalid or cannot be read\n"
            "  3  the endpoint failed: no judgement got a score",
        ),
        Command(
            "import",
            "convert another tool's suites (vibecheck, Letta Evals, AgentV, promptfoo, agtlantis, calibrate "
            "(Bolt Foundry)), every one found in the files or folders given, to evalsite suites",
            "importing",
            "add_import_arguments",
            "import_files",
            IMPORT_EXIT_CODES,
        ),
        Command(
            "token",
            "make, list or revoke a user's API tokens (for CI) on the server's database",
            "api_tokens",
            "add_token_arguments",
            "token",
            "exit codes:\n  0  done\n  2  no such user or token, or the database is not set up",
        ),
        Command(
            "validate",
            "check suite files; each problem as file:line:col path: message",
            "validate",
            "add_validate_arguments",
            "validate",
            "exit codes:\n  0  every file is a valid suite\n  2  a file is invalid or cannot be read "
            "(the others are still checked)",
            loads_paused=True,
        ),
    )
}


def parser(argv: list[str]) -> argparse.ArgumentParser:
    """The whole parser, with the arguments of the one command `argv` names (the others list their help)."""
    top = argparse.ArgumentParser(
        prog="evalsite",
        description=ABOUT,
        epilog=RUN_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(title="commands", metavar="COMMAND", required=True)
    chosen = next((word for word in argv if not word.startswith("-")), None)
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help, **_described(command))
        if name == chosen:
            _filled(sub, command)
    return top


def main(argv: list[str] | None = None) -> int:
    # Modules and a suite are built once and kept to the end: the cyclic collector would walk them again and
    # again as they grow, for nothing (a third of a large suite's loading). It is paused until the command
    # has loaded what it keeps (Command.loads_paused).
    gc.disable()
    argv = sys.argv[1:] if argv is None else argv
    try:
        return execute(parser(argv).parse_args(argv), "evalsite")
    finally:
        gc.enable()
