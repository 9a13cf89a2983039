"""While PostgreSQL is down, pages and the API answer 503 with a Retry-After hint within 2 s, instead of
hanging on the connection pool or answering 500; once it is back they answer as before.

The web app runs as in production (gunicorn) on a PostgreSQL server of the test's own, stopped as a crash
stops it (`pg_ctl stop -m immediate`): never the machine's. The same on both passes, so it runs on the
SQLite one.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import ROOT
from tests.live_services import PostgresServer, free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not PostgresServer.available(), reason="no PostgreSQL server binaries to start one"),
    pytest.mark.skipif(
        settings.CELERY_BROKER_URL.startswith("redis"), reason="a server of its own: the SQLite pass runs it"
    ),
]


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: str
    took: float


def get(port: int, path: str, **headers: str) -> Answer:
    """One GET, redirects not followed, timed."""
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode()
    finally:
        connection.close()
    return Answer(response.status, response.headers, body, time.monotonic() - started)


@pytest.fixture
def web():
    """gunicorn serving the app from a PostgreSQL server of its own: (its port, the server)."""
    # Not under pytest's tmp_path: the postgres user must pass through its folders, and other pytest sessions
    # on the machine prune them.
    folder = Path(tempfile.mkdtemp(prefix="evalsite-pgdown-"))
    server = PostgresServer(folder / "postgres")
    server.start()
    env = {**os.environ, "DATABASE_URL": server.url, "EVALSITE_DEV": "1", "EVALSITE_VAR_DIR": str(folder / "var"),
           "DJANGO_SETTINGS_MODULE": "evalsite.settings", "DEBUG": "0"}  # fmt: skip
    env.pop("CELERY_BROKER_URL", None)
    port = free_port()
    process = None
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "evalsite.wsgi:application", "--bind", f"127.0.0.1:{port}",
             "--workers", "1", "--timeout", "60"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, "/accounts/login/")
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.2)
        yield port, server
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        server.remove()
        shutil.rmtree(folder, ignore_errors=True)


def test_pages_and_the_api_answer_503_fast_while_the_database_is_down(web):
    port, server = web
    # Each reads the database: the page a session, the API a token.
    page = ("/runs/", {"Cookie": "sessionid=not-a-session"})
    api = (f"/api/runs/{uuid.uuid4()}", {"Authorization": "Bearer evs_not-a-token"})
    assert get(port, page[0], **page[1]).status == 302  # to sign in
    assert get(port, api[0], **api[1]).status == 401

    server.stop("immediate")
    for _ in range(2):  # the first request finds its pooled connection broken, the next none at all
        answer = get(port, page[0], **page[1])
        assert answer.status == 503, answer.body[:500]
        assert answer.took < 2.0
        assert answer.headers["Retry-After"].isdigit()
        assert "Database unavailable" in answer.body
        assert answer.headers["Content-Type"].startswith("text/html")

        answer = get(port, api[0], **api[1])
        assert answer.status == 503, answer.body[:500]
        assert answer.took < 2.0
        assert answer.headers["Retry-After"].isdigit()
        assert json.loads(answer.body) == {
            "detail": "The database is unavailable; try again in a few seconds."
        }

    server.start()
    deadline = time.monotonic() + 15
    while (status := get(port, api[0], **api[1]).status) == 503 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 401  # answered as before the restart
    assert get(port, page[0], **page[1]).status == 302
