"""`manage.py evalrun` / `manage.py evalvalidate`: an `evalsite` command under Django's name.

manage.py marks the process as a terminal command before Django reads the settings, so these need no
SECRET_KEY or database either.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from .main import COMMANDS, command_parser, execute


class AliasCommand(BaseCommand):
    cli_name = ""

    @property
    def command(self):
        return COMMANDS[self.cli_name]

    @property
    def help(self) -> str:
        return f"`evalsite {self.cli_name}`: {self.command.help}."

    def add_arguments(self, parser):
        self.command.add_arguments(parser)

    def print_help(self, prog_name, subcommand):
        command_parser(self.command, f"{Path(prog_name).name} {subcommand}").print_help()

    def run_from_argv(self, argv):
        # The CLI's parser, messages and exit codes, not BaseCommand's ("CommandError: ...", exit 1).
        prog = f"{Path(argv[0]).name} {argv[1]}"
        raise SystemExit(execute(command_parser(self.command, prog).parse_args(argv[2:]), prog))

    def handle(self, *args, **options):
        # call_command(..., stdout=, stderr=) hands its streams in the options; the commands print to sys.*.
        out, err = options.pop("stdout", None) or sys.stdout, options.pop("stderr", None) or sys.stderr
        namespace = argparse.Namespace(**options, handle=self.command.handle)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = execute(namespace, self.cli_name)
        if code:
            raise CommandError(f"exit code {code}", returncode=code)
