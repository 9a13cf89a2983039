"""Shared fixtures: users, the fake OpenAI server, and real Celery workers in their own processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings

from tests.fakeopenai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
FAKE_KEY_ENV = "EVALSITE_TEST_FAKE_KEY"
FAKE_KEY = "sk-test-fake"


def pytest_sessionfinish(session, exitstatus):
    # The var dir is this process's own (tests/settings.py); a worker subprocess may set it too, so only the
    # process that created it removes it.
    var_dir = Path(settings.VAR_DIR)
    if var_dir.name == str(os.getpid()):
        shutil.rmtree(var_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def fake_openai_server():
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        yield fake


@pytest.fixture
def fake_openai(fake_openai_server):
    """The fake OpenAI-compatible endpoint, clean for each test."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture(autouse=True)
def _heartbeat_stopped_after_test():
    """A test that plays a conversation in this process (runs.execution.execute) starts the worker heartbeat
    thread; it must not outlive the test's database."""
    yield
    from runs.execution import heartbeat

    heartbeat.stop()


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")


@pytest.fixture
def fake_endpoint(db, fake_openai):
    """A named endpoint `fake` pointing at the fake server; its key comes from an environment variable."""
    from runs.models import Endpoint

    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    return Endpoint.objects.create(
        name="fake", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_concurrency=50, timeout=5
    )


def _database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = quote(db["USER"] or "")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _purge_broker() -> None:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        for sub in ("queue", "processed"):
            folder = settings.BROKER_DIR / sub
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)
    elif url.startswith("redis://"):
        import redis

        redis.Redis.from_url(url).flushdb()


class Worker:
    """`celery worker` in a child process, against the test database and broker."""

    def __init__(self, log_path: Path, env: dict[str, str], concurrency: int = 10):
        self.log_path = log_path
        self.env = env
        self.concurrency = concurrency
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Worker:
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--pool", "threads",
             "--concurrency", str(self.concurrency), "--loglevel", "INFO", "--without-gossip",
             "--without-mingle", "--hostname", f"test-{os.getpid()}-{time.monotonic_ns()}@%h"],
            cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.log_path.read_text(errors="replace"):
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"worker did not start:\n{self.log_path.read_text(errors='replace')[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, unacked messages and leases are left as a crash leaves them."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self, timeout: float = 30) -> float:
        """SIGTERM, Celery's warm shutdown, as a service manager stops a worker; seconds until it exited."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=timeout)
        return time.monotonic() - started

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        # The test is over, so no need for a warm shutdown (which waits seconds for the pool to drain).
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture
def start_worker(transactional_db, tmp_path):
    """Start real Celery workers: `start_worker(**env_overrides)`. Stopped when the test ends."""
    _purge_broker()
    workers: list[Worker] = []

    def start(concurrency: int = 10, **env_overrides: str) -> Worker:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": _database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "EVALSITE_VAR_DIR": str(settings.VAR_DIR),
            "EVALSITE_MAX_RETRIES": "2",
            FAKE_KEY_ENV: FAKE_KEY,
            **env_overrides,
        }
        worker = Worker(tmp_path / f"worker-{len(workers)}.log", env, concurrency).start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def wait_for_run(run, timeout: float = 60):
    """Poll the database until the run ends; returns it refreshed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if not run.is_active:
            return run
        time.sleep(0.1)
    states = list(run.conversations.values_list("index", "status", "turn_count", "error"))
    raise AssertionError(f"run still {run.status} after {timeout}s: {states}")
