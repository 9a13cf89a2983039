"""python manage.py evalvalidate suite.yaml [...]: `evalsite validate` under Django's name."""

from evalsite.cli.alias import AliasCommand


class Command(AliasCommand):
    cli_name = "validate"
