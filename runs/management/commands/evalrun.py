"""python manage.py evalrun suite.yaml [--model M] [--json out.json]: run a suite without the web stack.

Uses the same engine and endpoints (default endpoint from OPENAI_BASE_URL / OPENAI_API_KEY, named
endpoints from the admin) as the workers, prints the per-turn report, and exits 1 if any eval failed or
errored.
"""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engine.loader import SuiteError, load_suite, read_suite_files
from engine.report import format_report
from engine.runner import run_suite
from runs.endpoints import build_registry


class Command(BaseCommand):
    help = "Run a suite file from the terminal and print the per-turn report."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--model", help="Override the suite's model (e.g. gpt-4o-mini, fast/llama-3, mock)."
        )
        parser.add_argument(
            "--json", dest="json_path", type=Path, help="Write results (evalsite.results/1) here."
        )
        parser.add_argument("--concurrency", type=int, default=10)

    def handle(self, *args, file, model, json_path, concurrency, **options):
        try:
            data = file.read_bytes()
            files = read_suite_files(file, data)
            spec = load_suite(data, filename=str(file), files=files)
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror}", returncode=2) from None
        except SuiteError as exc:
            for problem in exc.problems:
                self.stderr.write(f"{file}:{problem}")
            raise CommandError("the suite has problems; nothing was run", returncode=2) from None
        try:
            report = run_suite(spec, build_registry(), model=model, concurrency=concurrency, files=files)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stdout.write(format_report(report))
        if json_path:
            json_path.write_text(
                json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
            )
            self.stdout.write(f"Results written to {json_path}")
        if report.status != "passed":
            sys.exit(1)
