"""The fault harness's short version (bench/faults.py --quick): a run through two supervised worker processes
while a worker is killed, another stopped, the broker restarted (Redis only), PostgreSQL crashes and starts
again (a server of the harness's own), the model server goes away, a 429/500 storm blows, ReDoS replies
arrive and a gateway answers 200s that are no chat completion (JSON cut short, an HTML page, empty
choices). Every conversation finishes exactly once, no turn is
duplicated or lost, none is stuck or errored, and no worker dies that was not killed.

It runs on the production path, PostgreSQL + Redis (`make test-pg`), on a database of its own beside the
tests' (their name + `_faults`). On the SQLite pass it runs only with EVALSITE_FAULTS_SQLITE=1: the whole
suite has to stay well under 15 minutes on two cores, and `python bench/faults.py --backends embedded`
plays the full matrix on SQLite + the filesystem broker (its figures are in the README).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from tests.conftest import ROOT
from tests.live_services import PostgresServer

pytestmark = [pytest.mark.e2e]


def _backend_env() -> tuple[str, dict[str, str]]:
    env = dict(os.environ)
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        return "embedded", env
    database = urlsplit(os.environ["DATABASE_URL"])
    env["FAULTS_PG_URL"] = database._replace(path=database.path + "_faults").geturl()
    env["FAULTS_REDIS_URL"] = settings.CELERY_BROKER_URL  # only without a redis-server binary to start
    return "postgres", env


@pytest.mark.timeout(300)
def test_every_conversation_finishes_exactly_once_whatever_fails(tmp_path):
    backend, env = _backend_env()
    if backend == "embedded" and os.environ.get("EVALSITE_FAULTS_SQLITE") != "1":
        pytest.skip(
            "the fault harness runs on the PostgreSQL + Redis pass (EVALSITE_FAULTS_SQLITE=1 runs it here)"
        )
    report = tmp_path / "faults.json"
    process = subprocess.run(
        [sys.executable, "bench/faults.py", "--quick", "--backends", backend, "--json", str(report)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=290,
    )  # fmt: skip
    assert report.exists(), process.stdout[-4000:] + process.stderr[-4000:]
    results = {result["scenario"]: result for result in json.loads(report.read_text())}
    expected = {"baseline", "kill", "sigterm", "outage", "storm", "redos", "garbage", "html", "empty"}
    if backend == "postgres" and shutil.which("redis-server"):
        expected.add("redis")  # the harness restarts a redis-server of its own
    if backend == "postgres" and PostgresServer.available():
        expected.add("pgrestart")  # and a PostgreSQL server of its own
    assert set(results) == expected, process.stdout

    for name, result in results.items():
        assert result["broken"] == [], f"{name}: {result['broken']}\n{process.stdout}"
        assert result["finished_once"] == result["conversations"] == 20, name
        assert (result["duplicated"], result["lost"], result["misplaced"]) == (0, 0, 0), name
        assert (result["stuck"], result["errored"], result["worker_deaths_unplanned"]) == (0, 0, 0), name
        assert len(result["faults"]) == (0 if name == "baseline" else 1), name
        assert all(fault["recovery"] is not None for fault in result["faults"]), name
    # Each fault did happen.
    assert results["kill"]["faults"][0]["detail"]["held"] >= 1  # the victim was playing part of the run
    assert results["kill"]["workers_started"] == 1  # and the supervisor started it again
    assert results["sigterm"]["faults"][0]["detail"]["exited_after"] < 10
    assert results["storm"]["calls"].get("429", 0) >= 1
    assert results["redos"]["regex_timeouts"] >= 1
    for name in ("garbage", "html", "empty"):
        assert results[name]["calls"].get("200 no reply", 0) >= 1, name
    for name in ("redis", "pgrestart"):  # the workers waited the outage out
        if name in results:
            assert results[name]["workers_alive"] == 2 and results[name]["workers_started"] == 0, name
    assert process.returncode == 0, process.stdout
