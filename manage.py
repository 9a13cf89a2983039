#!/usr/bin/env python
import os
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.management import execute_from_command_line

from evalsite import terminal

# Commands that serve nothing and must run in a bare checkout: no SECRET_KEY, no var/ folder, no database
# (evalsite/terminal.py). They are `evalsite run` and `evalsite validate` under Django's name.
TERMINAL_COMMANDS = ("evalrun", "evalvalidate")


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    command = sys.argv[2:3] if sys.argv[1:2] == ["help"] else sys.argv[1:2]
    if command and command[0] in TERMINAL_COMMANDS:
        terminal.active = True  # before Django reads the settings
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting the deployer must give (SECRET_KEY, a DATABASE_URL that parses): the message says which,
        # and a traceback through Django's settings import would bury it.
        sys.exit(f"evalsite: {exc}")


if __name__ == "__main__":
    main()
