"""Comparing three models: three `evalsite run` processes, one after another, against one
`evalsite run --model a,b,c` (which plays the three together, --concurrency each), and the matrix page of
the result.

    python bench/matrix.py [--evals 300] [--concurrency 10] [--latency 0.1] [--repeat 3]

The fake endpoint (tests/fakeopenai) answers every call after --latency seconds. Each model plays the same
suite of single-turn evals; the ideal is evals / concurrency × latency per model: three times that one
after another, once for the three together. Printed: whole-process wall time over its ideal, for the three
processes and for the one matrix process (median of --repeat), and then the matrix page's server time and query count for a matrix of that size played in this
process (a fresh SQLite database in a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODELS = ("model-a", "model-b", "model-c")


def suite(evals: int) -> str:
    lines = ["name: matrix bench", "model: model-a", "evals:"]
    lines += [f"  - {{id: q{i}, prompt: 'question {i}', checks: [{{contains: OK}}]}}" for i in range(evals)]
    return "\n".join(lines) + "\n"


def timed(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evals", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from tests.fakeopenai import FakeOpenAI

    folder = Path(tempfile.mkdtemp(prefix="evalsite-matrix-"))
    path = folder / "suite.yaml"
    path.write_text(suite(args.evals))
    evalsite = str(Path(sys.executable).parent / "evalsite")
    one = args.evals / args.concurrency * args.latency
    ideal, together_ideal = len(MODELS) * one, one
    with FakeOpenAI(latency=args.latency) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "bench",
               "EVALSITE_VAR_DIR": str(folder), "EVALSITE_DEFAULT_CONCURRENCY": str(args.concurrency)}  # fmt: skip
        common = ["run", str(path), "--concurrency", str(args.concurrency)]
        apart, together = [], []
        for _ in range(args.repeat):
            apart.append(sum(timed([evalsite, *common, "--model", model], env) for model in MODELS))
            together.append(timed([evalsite, *common, "--model", ",".join(MODELS)], env))
    print(f"{args.evals} evals × {len(MODELS)} models, C={args.concurrency}, {args.latency * 1000:.0f} ms")
    print(
        f"three processes   {statistics.median(apart):6.2f} s  {statistics.median(apart) / ideal:.3f}× ideal "
        f"({ideal:.2f} s, one after another)"
    )
    print(
        f"one matrix        {statistics.median(together):6.2f} s  "
        f"{statistics.median(together) / together_ideal:.3f}× ideal ({together_ideal:.2f} s, together)"
    )
    page(args.evals)


def page(evals: int) -> None:
    """The matrix page of `evals` × three variants, played on the built-in mock: server time and queries."""
    os.environ["EVALSITE_DEV"] = "1"
    os.environ["EVALSITE_VAR_DIR"] = tempfile.mkdtemp(prefix="evalsite-matrix-page-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from engine.matrix import parse_variants
    from runs.matrix import create_matrix
    from suites.services import create_suite
    from tests.factories import join, play

    settings.ALLOWED_HOSTS = ["*"]
    settings.STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pw-123")
    join(user)
    source = suite(evals).replace("model: model-a", "model: mock\nmock: {default: OK, latency_ms: 0}")
    version = create_suite(owner=user, source=source).latest_version
    matrix = create_matrix(
        version=version, user=user, variants=parse_variants(["mock,mock@seed=1,mock@seed=2"])
    )
    for run in matrix.runs.all():
        play(run)
    client = Client()
    client.force_login(user)
    url = reverse("matrices:detail", args=[matrix.pk])
    client.get(url)
    times = []
    for _ in range(5):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            assert client.get(url).status_code == 200
            times.append(time.perf_counter() - start)
    print(
        f"matrix page, {evals} × 3: {statistics.median(times) * 1000:.0f} ms (median of 5), {len(queries)} queries"
    )


if __name__ == "__main__":
    main()
