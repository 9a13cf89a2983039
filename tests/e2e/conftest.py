"""Fixtures of the end-to-end layer: real Celery workers in their own processes against the test database and
broker, and a browser (Playwright driving Debian's chromium) against the live server."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings

from tests.conftest import ARTIFACTS, FAKE_KEY, FAKE_KEY_ENV, ROOT

# End-to-end tests of a feature through a real worker (a judge calibrated, graders, a regex timeout, a
# simulated user...). They run on the SQLite pass; the PostgreSQL + Redis pass keeps the tests where the
# backend matters (claims, leases, recovery, retries across processes, the pool, the fault harness), so the
# whole suite stays well under 15 minutes on two cores.
FEATURE_MODULES = {
    "test_e2e_calibration", "test_e2e_ci", "test_e2e_concurrency", "test_e2e_cost_limit", "test_e2e_graders", "test_e2e_key_redaction",
    "test_e2e_matrix", "test_e2e_regex", "test_e2e_response_cache", "test_e2e_scripted", "test_e2e_settings",
    "test_e2e_simulate", "test_e2e_tools", "test_e2e_tool_mcp", "test_e2e_tool_replay",
}  # fmt: skip


def pytest_collection_modifyitems(config, items):
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        return
    skip = pytest.mark.skip(reason="a feature through a worker: the SQLite pass runs it")
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in FEATURE_MODULES:
            item.add_marker(skip)


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

    def __init__(
        self, log_path: Path, env: dict[str, str], concurrency: int = 10, hostname: str | None = None
    ):
        self.log_path = log_path
        self.env = env
        self.concurrency = concurrency
        self.hostname = hostname or f"test-{os.getpid()}-{time.monotonic_ns()}@%h"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Worker:
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--pool", "threads",
             "--concurrency", str(self.concurrency), "--loglevel", "INFO", "--without-gossip",
             "--without-mingle", "--hostname", self.hostname],
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

    def start(concurrency: int = 10, hostname: str | None = None, **env_overrides: str) -> Worker:
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
        worker = Worker(tmp_path / f"worker-{len(workers)}.log", env, concurrency, hostname).start()
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


# The browser: Debian's chromium driven by Playwright, never a Playwright download.

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-gpu",
]
TIMEOUT_MS = 30_000
VIEWPORT = {"width": 1280, "height": 800}
PASSWORD = "pw-alice-123"  # the `user` fixture's


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests use Debian's chromium (apt-get install chromium), "
            "never a Playwright download",
            pytrace=False,
        )
    from playwright.sync_api import expect, sync_playwright

    # Playwright's sync API keeps an asyncio loop on this thread, and Django refuses ORM calls from a thread
    # with a running loop. The ORM calls here are plain synchronous test code, so allow them.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    expect.set_options(timeout=TIMEOUT_MS)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


class PageWatch:
    """What went wrong in the page that no assertion looks at: JS errors and failed HTTP responses."""

    def __init__(self, page):
        self.errors: list[str] = []
        self.failed: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("response", self._response)

    def _response(self, response):
        # A 400 from a form post re-renders the editor on purpose; anything else >= 400 is a broken page.
        if response.status >= 400 and not (response.status == 400 and response.request.method == "POST"):
            self.failed.append(f"{response.status} {response.request.method} {response.url}")

    def check(self):
        assert not self.failed, f"failed responses: {self.failed}"
        assert not self.errors, f"JavaScript errors: {self.errors}"


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


@pytest.fixture
def watch(page):
    return PageWatch(page)


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def log_in(page, username: str, password: str) -> None:
    from playwright.sync_api import expect

    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.get_by_role("button", name="Sign in").click()
    # The suites list, or for someone in no project yet, how to get into one.
    expect(page.locator("h1")).to_have_text(re.compile(r"^(Suites|You are not in a project yet)$"))
    expect(page.locator(".topbar-user")).to_contain_text(username)
    # htmx came from the live server's static files, not a 404.
    page.wait_for_function("() => window.htmx !== undefined")
