#!/usr/bin/env python
import os
import sys

# Commands that serve nothing and must run in a bare checkout: no SECRET_KEY, no var/ folder, no database
# (evalsite/terminal.py). They are `evalsite run` and `evalsite validate` under Django's name.
TERMINAL_COMMANDS = ("evalrun", "evalvalidate")


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    if len(sys.argv) > 1 and sys.argv[1] in TERMINAL_COMMANDS:
        from evalsite import terminal

        terminal.active = True
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
