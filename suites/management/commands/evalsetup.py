"""python manage.py evalsetup: first-run setup for a local dashboard.

Creates an `admin` superuser with a random password (kept in var/admin-password, readable only by you)
and loads the example suites for it. Safe to run again: it changes nothing that already exists.
"""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from engine.attached import read_suite_files
from engine.loader import load_suite
from projects.models import DEFAULT_SLUG, Membership, Project
from projects.roles import Role
from suites.models import Suite
from suites.services import create_suite

EXAMPLES = Path(settings.BASE_DIR) / "examples"


class Command(BaseCommand):
    help = "Create the local admin user and load the example suites."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        password_file = settings.VAR_DIR / "admin-password"
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
        project, _ = Project.objects.get_or_create(slug=DEFAULT_SLUG, defaults={"name": "Default"})
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": Role.ADMIN})
        loaded = 0
        for path in sorted(EXAMPLES.glob("*.yaml")):
            source = path.read_text()
            files = read_suite_files(path, source)
            name = load_suite(source, files=files).name
            if not Suite.objects.filter(project=project, name=name).exists():
                note = f"loaded from examples/{path.name}"
                create_suite(owner=user, source=source, note=note, files=files, project=project)
                loaded += 1
        if loaded:
            self.stdout.write(f"Loaded {loaded} example suites.")
        if password_file.exists():
            password = password_file.read_text().strip()
            self.stdout.write(
                self.style.SUCCESS(f"Sign in as {username} / {password}")
                + f"  (password kept in {password_file}; change it in the admin)"
            )
        else:
            self.stdout.write(f"Sign in as {username} with the password you set.")
