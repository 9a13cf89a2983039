"""python manage.py evalrun suite.yaml [--model M] [--json out.json]: `evalsite run` under Django's name.

manage.py marks the process as a terminal command before Django reads the settings, so this needs no
SECRET_KEY and no migrated database either (evalsite/terminal.py); the code is evalsite.cli's.
"""

from evalsite.cli import AliasCommand


class Command(AliasCommand):
    cli_name = "run"
