"""`evalsite token create|list|revoke`: a user's API tokens, for CI, made on the server's own database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from engine.text import plural

from .common import PASSED, UserError
from .database import setup_django


def add_token_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True, dest="action")
    create = actions.add_parser("create", help="make a token; prints it alone on stdout, once")
    create.add_argument("--user", required=True, help="the user the token acts as")
    create.add_argument("--name", required=True, help="what the token is for, e.g. ci")
    create.add_argument(
        "--project", help="the slug of the project the token acts in (default: the default project)"
    )
    listing = actions.add_parser("list", help="a user's tokens: name, start, created, last used, status")
    listing.add_argument("--user", required=True)
    revoke = actions.add_parser("revoke", help="revoke a user's active tokens of that name, at once")
    revoke.add_argument("--user", required=True)
    revoke.add_argument("--name", required=True)


def _server_database() -> None:
    """Django on the server's database (DATABASE_URL, or the one `make setup` made), which must be set up:
    a token is only useful where the web app will look for it."""
    setup_django()
    database = connections[DEFAULT_DB_ALIAS]
    name = str(database.settings_dict["NAME"])
    if database.vendor == "sqlite" and name != ":memory:" and not Path(name).is_file():
        raise UserError(f"there is no database at {name}: run `make setup` first, or set DATABASE_URL")
    try:
        tables = database.introspection.table_names()
    except DatabaseError as exc:
        raise UserError(f"the database cannot be read: {str(exc).strip().splitlines()[0]}") from None
    if "runs_apitoken" not in tables:
        raise UserError("the database is not migrated: run `make setup` (or `manage.py migrate`) first")


def token(args: argparse.Namespace) -> int:
    _server_database()
    # Imported once Django is set up: the CLI runs suites without Django configured.
    from projects.access import role_of
    from projects.models import Project
    from runs import tokens

    user = get_user_model().objects.filter(username=args.user).first()
    if user is None:
        raise UserError(f"no user named {args.user!r}")
    if args.action == "create":
        project = Project.objects.filter(slug=args.project).first() if args.project else Project.default()
        if project is None:
            raise UserError(f"no project with the slug {args.project!r}")
        if role_of(user, project.pk) is None:
            raise UserError(f"{user.get_username()} is not a member of the project {project.slug!r}")
        row, secret = tokens.create_token(user, args.name, project)
        print(secret)
        print(f"token {row.name!r} for {user.get_username()} in {project.slug}: shown once, keep it in your CI's "
              "secrets", file=sys.stderr)  # fmt: skip
    elif args.action == "list":
        for row in tokens.tokens_of(user):
            used = row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "never"
            state = "active" if row.is_active else "revoked"
            print(f"{row.name}\t{row.hint}…\t{row.project.slug}\tcreated {row.created_at.isoformat(timespec='seconds')}"
                  f"\tlast used {used}\t{state}")  # fmt: skip
    else:
        revoked = sum(tokens.revoke(user, row.pk) for row in tokens.tokens_of(user) if row.name == args.name)
        if not revoked:
            raise UserError(f"{user.get_username()} has no active token named {args.name!r}")
        print(f"revoked {plural(revoked, 'token')} named {args.name!r}", file=sys.stderr)
    return PASSED
