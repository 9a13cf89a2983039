"""python manage.py evalrun suite.yaml [--model M] [--json out.json]: `evalsite run` under Django's name."""

from evalsite.cli.alias import AliasCommand


class Command(AliasCommand):
    cli_name = "run"
