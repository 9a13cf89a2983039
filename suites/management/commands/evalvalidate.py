"""python manage.py evalvalidate suite.yaml [...]: check suite files; exit 1 on any problem."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engine.loader import SuiteError, load_suite, read_suite_files
from engine.text import plural


class Command(BaseCommand):
    help = "Validate suite files against the suite format; problems are printed as file:line:column path: message."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", type=Path)

    def handle(self, *args, files, **options):
        bad = 0
        for path in files:
            try:
                data = path.read_bytes()
            except OSError as exc:
                bad += 1
                self.stderr.write(f"{path}: {exc.strerror}")
                continue
            try:
                spec = load_suite(data, filename=str(path), files=read_suite_files(path, data))
            except SuiteError as exc:
                bad += 1
                for problem in exc.problems:
                    self.stderr.write(f"{path}:{problem}")
                continue
            self.stdout.write(f"{path}: ok — suite {spec.name!r}, {plural(len(spec.evals), 'eval')}")
        if bad:
            raise CommandError(
                f"{bad} of {plural(len(files), 'file')} {'has' if bad == 1 else 'have'} problems",
                returncode=1,
            )
